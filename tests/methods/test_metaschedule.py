"""method=metaschedule: MetaSchedule's search and cost model, measured by the tunebench target."""
import json
import os
import subprocess
import sys

from mlflow.tracking import MlflowClient

from conftest import ROOT, TINY_LAYER_ARG
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG
from tunebench.search_space import Space, TraceConfig
from tunebench.task import Measurement


def test_trace_records_round_trip():
    rec = {"task_id": "t", "trial": 3, "index": 7, "config": {"trace": [[["GetSBlock", [], ["C", "main"], ["b0"]]], []]},
           "valid": True, "latency_s": 1e-3}
    m = Measurement.from_record(rec, Space([]))
    assert isinstance(m.config, TraceConfig) and m.config.index == 7
    assert m.config.to_dict() == rec["config"]


def test_metaschedule_run_measures_traces_checks_and_builds_the_model(tmp_path):
    # a fresh process, as a user runs it (MetaSchedule's one-time imports are slow inside a process
    # that has imported MLflow first, as this test process has)
    args = ["method=metaschedule", "method.num_trials_per_iter=6", "method.population_size=32",
            "method.init_min_unmeasured=8", "budget.trials_per_task=8",  # ends in the middle of round 2
            TINY_LAYER_ARG, "target.runner.repeat=3", "target.runner.min_repeat_ms=5", "progress=false",
            "e2e.torch_compile=false"]  # the replayed traces in the whole model are the point here
    res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED" and run.data.tags["method"] == "metaschedule"
    recs = read_records(run.data.tags[RECORD_TAG])
    assert len(recs) == 8 and all("trace" in r["config"] for r in recs)
    assert [r["index"] for r in recs] == list(range(8))
    assert len({json.dumps(r["config"]) for r in recs}) == 8  # MetaSchedule proposes distinct programs
    assert sum(r["valid"] for r in recs) >= 6
    m = run.data.metrics
    assert [v for k, v in m.items() if k.endswith(".check_ok")] == [1.0]
    assert m["e2e_latency_ms"] > 0 and m["e2e_rel_err"] <= 1e-4  # replayed traces in the whole model


def test_settings_are_typed_without_tvm():
    """metaschedule and gat share the search's knobs; typing their settings (and a bad value's one-line error)
    never imports TVM, whose first import takes 30-40 s."""
    code = """
import sys
import pytest
from tunebench.config.load import typed
from tunebench.errors import UserError
from tunebench.methods import make_method
from tunebench.methods.tensor_programs.gat.settings import GATSettings
from tunebench.methods.tensor_programs.metaschedule import MetaScheduleSettings

gat = typed(GATSettings, {"name": "gat", "variant": "mhsa", "population_size": 32}, "method")
ms = typed(MetaScheduleSettings, {"name": "metaschedule", "cost_model": "random"}, "method")
assert (gat.variant, gat.population_size, gat.epochs, ms.cost_model) == ("mhsa", 32, 300, "random")
assert GATSettings().eps_greedy == MetaScheduleSettings().eps_greedy == 0.05
for cfg, says in (({"name": "metaschedule", "cost_model": "x"}, "method.cost_model='x': valid: xgb, random"),
                  ({"name": "metaschedule", "eps_greedy": 2}, "method.eps_greedy=2"),
                  ({"name": "gat", "variant": "foo"}, "method.variant='foo': valid: gat, mhsa, gnn_mlp"),
                  ({"name": "gat", "pretrained": "/nonexistent/gat.pt"}, "method.pretrained=/nonexistent/gat.pt: "),
                  ({"name": "gat", "cost_model": "xgb"}, "method.cost_model is unknown")):
    with pytest.raises(UserError, match=says):
        make_method(cfg)
assert "tvm" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_frozen_modules_are_known_to_inspect_and_frames_read_the_same(monkeypatch):
    """import_metaschedule's speed-up enters the frozen modules' frame file names in inspect's cache; a
    stack taken inside an import (frozen import-machinery frames on it) gives the same frame infos."""
    import importlib
    import inspect
    import sys
    import types

    def stack_inside_an_import() -> list:
        name = "tunebench_stack_probe"
        module = types.ModuleType(name)
        loader = type("L", (), {"create_module": lambda self, spec: None,
                                "exec_module": lambda self, m: setattr(m, "stack", inspect.stack())})()
        spec = importlib.util.spec_from_loader(name, loader)
        sys.modules.pop(name, None)
        try:
            module = importlib._bootstrap._load(spec)
        finally:
            sys.modules.pop(name, None)
        return [(f.filename, f.lineno, f.function, f.code_context) for f in module.stack]

    from tunebench.methods.tensor_programs.metaschedule import _know_frozen_modules

    monkeypatch.setattr(inspect, "modulesbyfile", {k: v for k, v in inspect.modulesbyfile.items()
                                                   if not k.startswith("<frozen ")})  # as in a fresh process
    stacks = []
    for known in (False, True):  # one call site for both stacks
        if known:
            _know_frozen_modules()
        stacks.append(stack_inside_an_import())
    assert any(fn.startswith("<frozen ") for fn, *_ in stacks[0])
    assert inspect.modulesbyfile["<frozen importlib._bootstrap>"] == "importlib._bootstrap"
    assert stacks[1] == stacks[0]


def test_cuda_candidates_build_for_the_h100_and_keep_its_limits_without_a_gpu(tmp_path):
    """MetaSchedule's CUDA search, as target=cuda with target.tag=nvidia/nvidia-h100 sets it up, proposes traces
    that replay, compile for sm_90 and pass the H100's static limits: a GPU run of method=metaschedule (the GPU
    suite's part) cannot fail on the search or the build side. Among them are virtual-thread extents above AutoTVM's
    per-axis 8, which MetaSchedule's own checks allow (they run after virtual-thread injection): a trace is not
    rejected for them (``gpu_verify.trace_limits``), a template config is."""
    import numpy as np
    import tvm

    from conftest import TINY_LAYER
    from tunebench.methods import Budget, make_method
    from tunebench.targets.tvm.gpu_limits import device_limits, tag_gpu
    from tunebench.targets.tvm.messages import BuildInput, TaskSpec
    from tunebench.targets.tvm.scheduling import apply_trace
    from tunebench.targets.tvm.templates.gpu_verify import thread_bindings
    from tunebench.targets.tvm.worker import handle
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    gpu = tag_gpu("nvidia/nvidia-h100")
    limits = device_limits(gpu, 8)
    major, minor = gpu["compute_version"].split(".")
    tvm_target = {"kind": "cuda", "arch": f"sm_{major}{minor}", "max_threads_per_block": limits["max_threads_per_block"],
                  "max_shared_memory_per_block": limits["max_shared_memory_per_block"],
                  "thread_warp_size": gpu["warp_size"]}  # as CUDATarget._set_gpu makes it
    (task, *_), _ = model_tasks({"name": "layers", "layers": [TINY_LAYER]}, "cuda")
    method = make_method({"name": "metaschedule", "num_trials_per_iter": 4, "population_size": 16,
                          "init_min_unmeasured": 4, "num_threads": 1})  # one thread: the same draws every run
    method.setup(task, type("Info", (), {"tvm_target": tvm_target})(), None, Budget(4), np.random.default_rng(5))
    configs = method.ask(4)
    assert len(configs) == 4
    vthreads = [max(v.values(), default=1) for c in configs
                for _, v in thread_bindings(apply_trace(task.mod, c.trace))]
    assert max(vthreads) > limits["max_vthread"], vthreads  # this seed's draws include one (14 and 28 in TVM 0.27)
    spec = TaskSpec(key=task.id, mod_json=tvm.ir.save_json(task.mod), kind=task.kind, target_kind="cuda")
    for cfg in configs:  # the build verifies the lowered kernel against the limits first (an error if broken)
        path = str(tmp_path / f"{cfg.index}.so")
        handle("build", BuildInput(task=spec, index=cfg.index, trace=cfg.trace, target=tvm_target, path=path,
                                   limits=limits))
        assert os.path.getsize(path) > 0
