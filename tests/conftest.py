import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

# A tiny conv layer: fast to build and time, so the end-to-end tests stay quick on 2 cores.
TINY_LAYER = {"in_channels": 8, "height": 14, "width": 14, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1}


def load_conf(path):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(os.path.join(ROOT, "conf", path)))


@pytest.fixture
def tiny_cfg(tmp_path):
    """A complete experiment config: random search on one tiny layer on llvm, in a temp workdir."""
    target = load_conf("target/llvm.yaml")
    target["batch_size"] = 3
    target["runner"].update(repeat=3, min_repeat_ms=5)
    return {"seed": 0, "resume": None, "experiment": "test", "tracking": {"uri": None, "artifact_root": None},
            "workdir": str(tmp_path), "records_dir": "records", "check_correctness": True, "progress": False,
            "method": load_conf("method/random.yaml"), "target": target,
            "model": {"name": "layers", "seed": 0, "layers": [TINY_LAYER]},
            "budget": {"trials_per_task": 6, "seconds_per_task": None, "early_stopping": None}}


def cuda_available() -> bool:
    import tvm

    return bool(tvm.cuda(0).exist)


gpu = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU (tvm.cuda(0).exist is False)")
