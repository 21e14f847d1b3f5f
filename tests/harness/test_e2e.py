"""Tests of end-to-end model latency (tunebench.targets.tvm.e2e); CPU, except ``gpu``-marked.

Every task of a model is scheduled with a random config of its template; the whole model is
then compiled with those schedules, checked against PyTorch and timed.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn as nn
import tvm
import tvm_ffi

from conftest import TINY_LAYER, gpu, measure_settings, target_settings
from tunebench.targets.tvm.cuda import CUDATarget
from tunebench.targets.tvm.e2e.build import (
    SCHEDULED_ATTR,
    E2EMismatch,
    default_build_module,
    tuned_module,
)
from tunebench.targets.tvm.e2e.timing import E2ESettings, e2e_metrics, model_latencies
from tunebench.targets.tvm.llvm import LLVMTarget
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.workloads.relax_import import import_model
from tunebench.targets.tvm.workloads.tasks import extract_tasks, model_tasks, task_id
from tvm_helpers import TOL, call_counts, lifted_prepacks, run_compiled

QUICK = E2ESettings(rounds=2, n_runs=4, default_n_runs=2, torch_compile=False, timings=1)  # one short interleaved timing


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


def random_schedules(tasks, target_kind: str = "llvm", seed: int = 0, variant=None) -> dict[str, tvm.IRModule]:
    """Task id -> the task scheduled with a random config of its template (``variant``; None: the default)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in tasks:
        tpl = get_template(t.kind, target_kind, variant)
        space = tpl.make_space(t.mod)
        out[t.id] = tpl.apply(t.mod, space.get(int(rng.integers(len(space)))))
    return out


def llvm_target(tmp_path) -> LLVMTarget:
    return LLVMTarget(target_settings("llvm", lock_dir=str(tmp_path)),
                      measure_settings(cache_dir=str(tmp_path / "cache"), noise={"remeasure": 0}))


@pytest.fixture(scope="module")
def cnn():
    """(imported SmallCNN, its tasks, random llvm schedules of all tasks on the weights as they are)."""
    torch.manual_seed(0)
    imported = import_model(SmallCNN(), torch.randn(1, 3, 32, 32), "llvm")
    tasks = extract_tasks(imported)
    return imported, tasks, random_schedules(tasks, variant="nchw")


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
    schedules = random_schedules(tasks, variant="nchw")
    assert_replaced(imported, tuned_module(imported, schedules, "llvm"), schedules, tasks)


# ---- measuring ------------------------------------------------------------------------------

def test_model_latencies_times_every_row_interleaved(cnn, tmp_path):
    """Two timings (``e2e.timings=2``) of 2 rounds each: every row's samples pooled, the speedup over the timings."""
    from tunebench.protocol.stats import timings_ratio_ci

    imported, tasks, schedules = cnn
    target = llvm_target(tmp_path)
    try:
        res = model_latencies(imported, tasks, schedules, target, dataclasses.replace(QUICK, timings=2),
                              name="small_cnn")
    finally:
        target.close()
    rows = res["rows"]
    assert set(rows) == {"tuned", "tvm_default", "torch"}
    assert rows["tuned"]["stats"].n == 8 and rows["torch"]["stats"].n == 8 and rows["tvm_default"]["stats"].n == 4
    assert [len(x) for x in rows["tuned"]["timing_round_medians"]] == [2, 2]  # one block per round, per timing
    assert len(rows["tuned"]["round_medians"]) == 4
    for row in rows.values():
        st = row["stats"]
        assert 0 < st.min <= st.median and st.cv >= 0 and row["rel_err"] <= (TOL if row is not rows["torch"] else 0)
    assert rows["tuned"]["rel_err"] <= TOL and rows["tuned"]["compile_s"] > 0
    ratio, lo, hi = res["speedups"]["torch"]
    assert lo <= ratio <= hi  # the geometric mean of the timings' ratios inside its interval
    assert (ratio, lo, hi) == pytest.approx(timings_ratio_ci(rows["torch"]["timing_round_medians"],
                                                             rows["tuned"]["timing_round_medians"]))
    assert len(res["timing_speedups"]["torch"]) == 2 and res["timings"] == 2
    pre, post = res["calibration"][:2]  # the first timing's; then the second's
    assert len(res["calibration"]) == 4 and pre["median_s"] > 0 and post["median_s"] > 0 and res["attempts"] == 2
    metrics = e2e_metrics(res)
    assert metrics["e2e_latency_ms"] == rows["tuned"]["stats"].median
    assert {"torch_latency_min_ms", "e2e_latency_cv", "e2e_noisy", "speedup_vs_torch", "speedup_vs_torch_ci_low",
            "speedup_vs_tvm_default", "speedup_vs_torch_noisy", "speedup_vs_torch_t1", "speedup_vs_torch_t2"} <= set(metrics)
    assert metrics["e2e_timings"] == 2
    # a ratio's own verdict: never on the slowdown (both sides of every round alike)
    assert "slowdown" not in res["speedup_verdicts"]["torch"].signals
    # the slowdown needs the run's calibration reference, recorded only by a quiet calibration
    assert "e2e_calib_slowdown" in metrics or pre["noisy"] or post["noisy"]


def test_packed_weights_are_packed_once_in_the_model_worker(cnn, tmp_path):
    """Packed-weight schedules: the row's worker packs the weights once at load (main_transform_params)
    and the tuned model's output matches PyTorch's."""
    imported, tasks, _ = cnn
    schedules = random_schedules(tasks, seed=2, variant="packed")
    target = llvm_target(tmp_path)
    try:
        res = model_latencies(imported, tasks, schedules, target, QUICK, name="small_cnn packed")
    finally:
        target.close()
    assert res["rows"]["tuned"]["rel_err"] <= TOL and res["rows"]["tuned"]["stats"].n == 4


def test_torch_compile_row_untuned_tasks_and_no_default_build(cnn, tmp_path):
    """A task without a schedule keeps TVM's default; ``default_n_runs=0`` leaves the default-build row out."""
    imported, tasks, schedules = cnn
    left_out = tasks[1]
    partial = {k: v for k, v in schedules.items() if k != left_out.id}
    target = llvm_target(tmp_path)
    settings = E2ESettings(rounds=1, n_runs=2, default_n_runs=0, torch_compile=True, torch_compile_timeout_s=300,
                           timings=1)
    try:
        res = model_latencies(imported, tasks, partial, target, settings, name="small_cnn")
    finally:
        target.close()
    assert res["untuned_tasks"] == [left_out.name]
    assert set(res["rows"]) == {"tuned", "torch", "torch_compile"}
    assert set(res["speedups"]) == {"torch", "torch_compile"}
    assert res["rows"]["torch_compile"]["rel_err"] < 1e-3  # Inductor may reorder sums, nothing more
    assert math.isnan(res["speedups"]["torch"][1])  # one round: no interval


def test_rows_run_with_the_targets_thread_count(tmp_path):
    """Every row's worker gets TVM_NUM_THREADS / OMP_NUM_THREADS = the target's threads (TVM's own default
    on x86 is half the logical CPUs, PyTorch's the physical cores: the comparison would not be fair)."""
    from tunebench.targets.tvm.e2e.timing import _torch_row, _tvm_row

    target = LLVMTarget(target_settings("llvm", lock_dir=str(tmp_path), num_cores=1),
                        measure_settings(cache_dir=str(tmp_path)))
    imported = SimpleNamespace(params=[], inputs=[torch.zeros(1)], torch_module=nn.Identity())
    for row in (_tvm_row("tuned", "x.so", imported, target, 2, QUICK), _torch_row("torch", imported, target, QUICK)):
        assert row.worker.env == {"TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "TUNEBENCH_KEEP_FREED_MEMORY": "1"}
    plain = dataclasses.replace(QUICK, keep_freed_memory=False)
    assert "TUNEBENCH_KEEP_FREED_MEMORY" not in _torch_row("torch", imported, target, plain).worker.env
    assert _torch_row("torch", imported, target, QUICK).load[1].threads == 1
    assert target._runner is None  # nothing started


def test_wrong_schedule_is_an_output_mismatch(tmp_path):
    """conv+ReLU and conv without ReLU have the same signature; swapping their schedules is caught."""
    layers = [dict(TINY_LAYER), dict(TINY_LAYER, relu=False)]
    tasks, imported = model_tasks({"name": "layers", "layers": layers}, "llvm")
    relu, plain = sorted(tasks, key=lambda t: "relu" not in t.name)
    assert "relu" in relu.name and "relu" not in plain.name
    schedules = random_schedules(tasks)
    assert run_compiled(imported, tuned_module(imported, schedules, "llvm"), tmp_path)[1] <= TOL
    wrong = {relu.id: schedules[plain.id], plain.id: schedules[plain.id]}
    with pytest.raises(E2EMismatch, match=r"^wrong layers: output differs from PyTorch") as err:
        run_compiled(imported, tuned_module(imported, wrong, "llvm"), tmp_path, name="wrong layers")
    assert "\n" not in str(err.value)
    target = llvm_target(tmp_path)  # the harness path refuses it before timing anything
    try:
        with pytest.raises(E2EMismatch, match=r"^layers \(tuned\): output differs from PyTorch"):
            model_latencies(imported, tasks, wrong, target, QUICK, name="layers")
    finally:
        target.close()


def test_resnet18_random_configs_compile_and_match_pytorch(tmp_path):
    """Packed-weight schedules of every task: the packing is lifted out of ``main`` into
    ``main_transform_params`` and the model still computes PyTorch's output."""
    tasks, imported = model_tasks({"name": "resnet18"}, "llvm")
    assert len(tasks) == 19
    schedules = random_schedules(tasks, seed=1, variant="packed")
    tuned = tuned_module(imported, schedules, "llvm")
    prepack = lifted_prepacks(tuned)
    assert len(prepack) == sum(t.kind != "depthwise_conv2d" for t in tasks)  # one per conv/dense function
    assert run_compiled(imported, tuned, tmp_path, name="resnet18 (tuned)")[1] <= TOL


def test_an_operator_model_packs_its_weights_once_at_load(tmp_path):
    """``model=ops``: a packed-weight schedule of an operator gets its packing lifted out of ``main`` as in
    a whole model, so the e2e step times the kernel, not the kernel plus a weight re-layout per call."""
    from tunebench.datasets.operators import task_operator
    from tunebench.targets.tvm.workloads.operator_torch import operator_model
    from tunebench.targets.tvm.workloads.tasks import operator_tasks

    (task,) = operator_tasks({"operators": ["gmm"], "cases": [1]}, "llvm")
    imported = operator_model(*task_operator(task.shape))
    tuned = tuned_module(imported, random_schedules([task], variant="packed"), "llvm")
    lifted_prepacks(tuned)
    assert run_compiled(imported, tuned, tmp_path, name="gmm_1 (tuned)")[1] <= TOL


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
    tvm.compile(default_build_module(imported, target), target=target)


@pytest.mark.gpu
@gpu
def test_cuda_model_latencies_on_gpu(tmp_path):
    torch.manual_seed(0)
    imported = import_model(SmallCNN(), torch.randn(1, 3, 32, 32), "cuda")
    tasks = extract_tasks(imported)
    target = CUDATarget(target_settings("cuda", lock_dir=str(tmp_path)), measure_settings(cache_dir=str(tmp_path)))
    schedules = cuda_schedules(tasks, target.limits)
    try:
        res = model_latencies(imported, tasks, schedules, target, E2ESettings(rounds=2, n_runs=4), name="small_cnn")
    finally:
        target.close()
    rows = res["rows"]
    assert res["untuned_tasks"] == [] and rows["tuned"]["rel_err"] <= TOL
    assert set(rows) == {"tuned", "tvm_default", "torch", "torch_compile", "torch_tf32"}
    assert all(r["stats"].median > 0 for r in rows.values())
    assert {"torch_tf32", "torch_compile"} <= set(res["speedups"])
