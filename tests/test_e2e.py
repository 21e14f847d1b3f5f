"""Tests of end-to-end model latency (tunebench.harness.e2e); CPU, except ``gpu``-marked.

Every task of a model is scheduled with a random config of its template; the whole model is
then compiled with those schedules, checked against PyTorch and timed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import tvm
import tvm_ffi

from conftest import TINY_LAYER, gpu, load_conf
from tunebench.datasets import extract_tasks, import_model, model_tasks
from tunebench.datasets.tasks import task_id
from tunebench.harness.e2e import (SCHEDULED_ATTR, E2EMismatch, default_build_module, measure_model,
                                   model_latencies, torch_latency, tuned_module)
from tunebench.targets.templates import get_template
from tunebench.targets.tvm_target import TVMTarget

LATENCY_KEYS = {"latency_ms", "latency_std_ms", "latency_median_ms", "n_runs"}
MEASURE_KEYS = LATENCY_KEYS | {"max_abs_err", "rel_err", "compile_s"}
TOL = 1e-4


class SmallCNN(nn.Module):
    """conv+BN+ReLU, a residual block, depthwise + pointwise convs, a linear: (1, 3, 32, 32) -> (1, 10)."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.c2, self.bn2 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 32, 1)
        self.fc = nn.Linear(32, 10)
        with torch.no_grad():  # non-trivial BN statistics, so the folding matters
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.1, 0.1)
                bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.c1(x)))
        y = torch.relu(self.bn2(self.c2(y)) + y)
        y = torch.relu(self.pw(torch.relu(self.dw(y))))
        return self.fc(torch.flatten(y.mean((2, 3), keepdim=True), 1))


def random_schedules(tasks, target_kind: str = "llvm", seed: int = 0) -> dict[str, tvm.IRModule]:
    """Task id -> the task scheduled with a random config of its template."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in tasks:
        tpl = get_template(t.kind, target_kind)
        space = tpl.make_space(t.mod)
        out[t.id] = tpl.apply(t.mod, space.get(int(rng.integers(len(space)))))
    return out


def llvm_target(tmp_path) -> TVMTarget:
    cfg = load_conf("target/llvm.yaml")
    cfg["lock_dir"] = str(tmp_path)
    return TVMTarget(cfg)


def measure(imported, mod, target: TVMTarget, **kw):
    args = dict(tvm_target=target.tvm_target, device_spec=target.device_spec, n_runs=3, warmup=1,
                device_key=target.device_key, lock_dir=target.lock_dir, tolerance=TOL)
    return measure_model(imported, mod, **{**args, **kw})


@pytest.fixture(scope="module")
def cnn():
    """(imported SmallCNN, its tasks, random llvm schedules of all tasks)."""
    torch.manual_seed(0)
    imported = import_model(SmallCNN(), torch.randn(1, 3, 32, 32), "llvm")
    tasks = extract_tasks(imported)
    return imported, tasks, random_schedules(tasks)


def call_counts(mod: tvm.IRModule) -> dict[str, int]:
    """Function name -> number of ``call_tir`` sites in ``main``."""
    call_tir, counts = tvm.ir.Op.get("relax.call_tir"), {}
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, tvm.relax.Call) and value.op.same_as(call_tir):
                counts[value.args[0].name_hint] = counts.get(value.args[0].name_hint, 0) + 1
    return counts


def assert_replaced(imported, tuned, schedules, tasks, target_kind="llvm"):
    """Every PrimFunc of a scheduled task is that schedule; every other function is untouched.

    Identical layers share one PrimFunc called several times: call sites of replaced functions
    add up to the tasks' weights.
    """
    replaced, calls = 0, call_counts(imported.mod)
    for gv, func in imported.mod.functions.items():
        new = tuned[gv.name_hint]
        tid = task_id(func, target_kind) if isinstance(func, tvm.tirx.PrimFunc) else None
        if tid in schedules:
            assert new.attrs[SCHEDULED_ATTR]
            assert "global_symbol" not in new.attrs  # fused functions get theirs at compile time
            want = schedules[tid]["main"].without_attr("global_symbol")
            assert tvm_ffi.structural_equal(new.without_attr(SCHEDULED_ATTR), want), gv.name_hint
            replaced += calls[gv.name_hint]
        else:
            assert new.same_as(func), gv.name_hint
    assert replaced == sum(t.weight for t in tasks if t.id in schedules)


# ---- module surgery ---------------------------------------------------------------------------

def test_small_cnn_has_every_task_kind(cnn):
    _, tasks, _ = cnn
    assert sorted(t.kind for t in tasks) == ["conv2d", "conv2d", "conv2d", "dense", "depthwise_conv2d"]


def test_tuned_module_replaces_every_task_function(cnn):
    imported, tasks, schedules = cnn
    tuned = tuned_module(imported, schedules, "llvm")
    assert_replaced(imported, tuned, schedules, tasks)
    assert not any(SCHEDULED_ATTR in (f.attrs or {}) for f in imported.mod.functions.values()
                   if isinstance(f, tvm.tirx.PrimFunc))  # the imported module is not modified


def test_compile_pipeline_keeps_the_schedules(cnn):
    """tvm.compile's llvm pipeline re-runs fusion; it must leave the scheduled functions alone."""
    from tvm.relax.backend.cpu_generic.pipeline import legalize_passes

    imported, _, schedules = cnn
    tuned = tuned_module(imported, schedules, "llvm")
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    with target:
        lowered = tvm.transform.Sequential(legalize_passes(target))(tuned)
    for gv, func in tuned.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc) and SCHEDULED_ATTR in func.attrs:
            assert tvm_ffi.structural_equal(lowered[gv.name_hint].without_attr("op_pattern"), func)


def test_tuned_module_rejects_a_schedule_of_another_shape(cnn):
    imported, tasks, schedules = cnn
    first, dense = tasks[0], next(t for t in tasks if t.kind == "dense")
    with pytest.raises(ValueError, match=f"task {first.id}") as err:
        tuned_module(imported, {first.id: schedules[dense.id]}, "llvm")
    assert "\n" not in str(err.value)


def test_identical_layers_all_get_the_schedule():
    tasks, imported = model_tasks({"name": "layers", "layers": [TINY_LAYER, TINY_LAYER]}, "llvm")
    assert len(tasks) == 1 and tasks[0].weight == 2
    schedules = random_schedules(tasks)
    assert_replaced(imported, tuned_module(imported, schedules, "llvm"), schedules, tasks)


# ---- measuring ------------------------------------------------------------------------------

def test_measure_model_tuned_matches_pytorch_and_is_timed(cnn, tmp_path):
    imported, _, schedules = cnn
    target = llvm_target(tmp_path)
    res = measure(imported, tuned_module(imported, schedules, "llvm"), target)
    assert set(res) == MEASURE_KEYS and res["n_runs"] == 3
    assert res["latency_ms"] > 0 and res["latency_median_ms"] > 0 and res["latency_std_ms"] >= 0
    assert res["rel_err"] <= TOL and res["compile_s"] > 0


def test_default_build_and_torch_latency(cnn, tmp_path):
    imported, _, _ = cnn
    assert default_build_module(imported, "llvm") is imported.mod
    res = measure(imported, default_build_module(imported, "llvm"), llvm_target(tmp_path))
    assert res["latency_ms"] > 0 and res["rel_err"] <= TOL
    threads = torch.get_num_threads()
    eager = torch_latency(imported, n_runs=4, warmup=1, num_threads=1)
    assert set(eager) == LATENCY_KEYS and eager["n_runs"] == 4 and eager["latency_ms"] > 0
    assert torch.get_num_threads() == threads  # restored


def test_model_latencies_reports_untuned_tasks(cnn, tmp_path):
    imported, tasks, schedules = cnn
    left_out = tasks[1]
    partial = {k: v for k, v in schedules.items() if k != left_out.id}
    res = model_latencies(imported, tasks, partial, llvm_target(tmp_path), n_runs=2, warmup=0,
                          tolerance=TOL, name="small_cnn")
    assert set(res) == {"tuned", "tvm_default", "torch"}
    assert res["tuned"]["untuned_tasks"] == [left_out.name]
    assert set(res["tuned"]) == MEASURE_KEYS | {"untuned_tasks"}
    assert set(res["tvm_default"]) == MEASURE_KEYS and set(res["torch"]) == LATENCY_KEYS
    assert all(res[row]["latency_ms"] > 0 for row in res)


def test_wrong_schedule_is_an_output_mismatch(tmp_path):
    """conv+ReLU and conv without ReLU have the same signature; swapping their schedules is caught."""
    layers = [dict(TINY_LAYER), dict(TINY_LAYER, relu=False)]
    tasks, imported = model_tasks({"name": "layers", "layers": layers}, "llvm")
    relu, plain = sorted(tasks, key=lambda t: "relu" not in t.name)
    assert "relu" in relu.name and "relu" not in plain.name
    schedules = random_schedules(tasks)
    target = llvm_target(tmp_path)
    assert measure(imported, tuned_module(imported, schedules, "llvm"), target)["rel_err"] <= TOL
    wrong = tuned_module(imported, {relu.id: schedules[plain.id], plain.id: schedules[plain.id]}, "llvm")
    with pytest.raises(E2EMismatch, match=r"^wrong layers: output differs from PyTorch") as err:
        measure(imported, wrong, target, name="wrong layers")
    assert "\n" not in str(err.value)


def test_resnet18_random_configs_compile_and_match_pytorch(tmp_path):
    tasks, imported = model_tasks({"name": "resnet18"}, "llvm")
    assert len(tasks) == 19
    schedules = random_schedules(tasks, seed=1)
    tuned = tuned_module(imported, schedules, "llvm")
    assert_replaced(imported, tuned, schedules, tasks)
    res = measure(imported, tuned, llvm_target(tmp_path), n_runs=1, warmup=0, name="resnet18 (tuned)")
    assert res["rel_err"] <= TOL and res["latency_ms"] > 0


# ---- cuda -----------------------------------------------------------------------------------

def cuda_schedules(tasks, limits: dict, seed: int = 0) -> dict[str, tvm.IRModule]:
    """Random cuda configs that respect the GPU limits (``Template.check``)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in tasks:
        tpl = get_template(t.kind, "cuda")
        space = tpl.make_space(t.mod)
        cfg = next(c for c in (space.get(int(i)) for i in rng.integers(len(space), size=1000))
                   if tpl.check(t.mod, c, limits) is None)
        out[t.id] = tpl.apply(t.mod, cfg)
    return out


CUDA_LIMITS = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "max_thread_x": 1024,
               "max_thread_y": 1024, "max_thread_z": 64, "max_vthread": 8}


def test_cuda_tuned_module_compiles_without_a_gpu():
    """The cuda pipeline's dlight pass schedules only the untuned functions; codegen needs no GPU."""
    from tvm.relax.backend.cuda.pipeline import legalize_passes

    torch.manual_seed(0)
    imported = import_model(SmallCNN(), torch.randn(1, 3, 32, 32), "cuda")
    tasks = extract_tasks(imported)
    schedules = cuda_schedules(tasks, CUDA_LIMITS)
    tuned = tuned_module(imported, schedules, "cuda")
    assert_replaced(imported, tuned, schedules, tasks, "cuda")
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    with target:
        lowered = tvm.transform.Sequential(legalize_passes(target))(tuned)
    for gv, func in tuned.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc) and SCHEDULED_ATTR in func.attrs:
            assert tvm_ffi.structural_equal(lowered[gv.name_hint].without_attr("op_pattern"), func)
    tvm.compile(tuned, target=target)
    tvm.compile(default_build_module(imported, "cuda", target), target=target)


@pytest.mark.gpu
@gpu
def test_cuda_model_latencies_on_gpu(tmp_path):
    torch.manual_seed(0)
    imported = import_model(SmallCNN(), torch.randn(1, 3, 32, 32), "cuda")
    tasks = extract_tasks(imported)
    cfg = load_conf("target/cuda.yaml")
    cfg["lock_dir"] = str(tmp_path)
    target = TVMTarget(cfg)
    schedules = cuda_schedules(tasks, target.limits)
    res = model_latencies(imported, tasks, schedules, target, n_runs=5, warmup=2, tolerance=TOL,
                          name="small_cnn")
    assert res["tuned"]["untuned_tasks"] == [] and res["tuned"]["rel_err"] <= TOL
    assert all(res[row]["latency_ms"] > 0 for row in res)
