import functools
import os
import sys

import pytest

from tunebench.harness.setup.compose import layers_override

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

# A tiny conv layer: fast to build and time, so the end-to-end tests stay quick on 2 cores.
TINY_LAYER = {"in_channels": 8, "height": 14, "width": 14, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1}


TINY_LAYER_ARG = layers_override([TINY_LAYER])  # the same layer as a command-line override


def pytest_configure(config):
    """The machine cache (peak, calibration reference) of the test session lives in a temporary
    folder: tests never write the user's ~/.cache/tunebench."""
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tunebench-test-cache-")
    config.addinivalue_line("markers", "needs_cuda: skipped where no CUDA GPU is found (the `gpu` of this file)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (now)."""
    from tunebench.targets.tvm.rpc_fleet import free_port as _free

    return _free("127.0.0.1")


def target_settings(name: str, **overrides):
    """The typed settings of ``target=<name>`` with ``overrides`` (nested dicts for nested settings)."""
    from tunebench.config.load import typed
    from tunebench.harness.setup.store import registered_options

    return typed(registered_options()["target"][name], overrides, "target")


def measure_settings(**overrides):
    """The typed ``measure`` settings with ``overrides`` (nested dicts for nested settings)."""
    from tunebench.config.experiment import MeasureSettings
    from tunebench.config.load import typed

    return typed(MeasureSettings, overrides, "measure")


def method_settings(name: str, **overrides):
    """The typed settings of ``method=<name>`` with ``overrides``."""
    from tunebench.config.load import typed
    from tunebench.methods import METHODS

    return typed(METHODS[name].Settings, overrides, "method")


@pytest.fixture
def tiny_cfg(tmp_path):
    """A complete experiment config: random search on one tiny layer on llvm, in a temp workdir."""
    from tunebench.harness.setup.compose import compose_config

    return compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", TINY_LAYER_ARG,
                           "target.batch_size=3", "target.runner.repeat=3", "target.runner.min_repeat_ms=5",
                           "budget.trials_per_task=6", "e2e.torch_compile=false"])


@functools.cache
def cuda_available() -> bool:
    import tvm

    return bool(tvm.cuda(0).exist)


# Skips a test where no CUDA GPU is found, asked when the test is set up (pytest_runtest_setup) rather
# than when this file is imported: tests that never need TVM do not import it.
gpu = pytest.mark.needs_cuda


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_cuda") is not None and not cuda_available():
        pytest.skip("needs a CUDA GPU (tvm.cuda(0).exist is False)")
