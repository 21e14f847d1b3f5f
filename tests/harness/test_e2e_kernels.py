"""The end-to-end step takes, per task, the faster of its tuned kernel and TVM's default kernel
(tunebench.targets.tvm.e2e.kernels); CPU (target=llvm)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import tvm

from conftest import TINY_LAYER, measure_settings, target_settings
from tunebench.config.experiment import E2ESettings
from tunebench.targets.tvm.e2e import kernels, step
from tunebench.targets.tvm.e2e.kernels import build_pairs, choice_line, choice_metrics, compare_task, decide
from tunebench.targets.tvm.llvm import LLVMTarget
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.workloads.tasks import model_tasks
from tunebench.task import Measurement

FAST = E2ESettings(rounds=3, n_runs=3, default_n_runs=1, torch_compile=False, min_sample_ms=2, kernel_repeat=1)
DENSE = {"in_features": 64, "out_features": 32}


def test_decide_takes_the_faster_kernel_and_marks_noise():
    slow_default = decide([1.0, 1.1, 1.0], [2.0, 2.1, 2.2])
    assert slow_default["kernel"] == "tuned" and slow_default["speedup"] > 1.9 and not slow_default["within_noise"]
    assert slow_default["ci_low"] <= slow_default["speedup"] <= slow_default["ci_high"]
    fast_default = decide([2.0, 2.1, 2.2], [1.0, 1.1, 1.0])
    assert fast_default["kernel"] == "default" and fast_default["speedup"] < 0.55
    tie = decide([1.0, 1.0], [1.0, 1.0])
    assert tie["kernel"] == "tuned" and tie["speedup"] == 1.0 and tie["within_noise"]  # a tie keeps the tuned kernel
    close = decide([1.0, 1.05, 0.97, 1.02], [0.99, 1.04, 1.0, 1.0])
    assert close["within_noise"]  # a ratio whose interval contains 1
    one = decide([1.0], [0.9])
    assert one["kernel"] == "default" and one["within_noise"] and math.isnan(one["ci_low"])  # no interval


def test_choice_metrics_and_a_failed_comparison():
    assert choice_metrics({"kernel": "tuned", "error": "build: x"}) == {"kernel_default_taken": 0.0}
    assert "could not be compared" in choice_line({"kernel": "tuned", "error": "build: x"})


def _layers(specs):
    tasks, imported = model_tasks({"name": "layers", "layers": specs}, "llvm")
    return tasks, imported


def _best(task, index: int) -> Measurement:
    space = get_template(task.kind, "llvm", task.template).make_space(task.mod)
    return Measurement.timed(task.id, space.get(index % len(space)), 1e-3)


@pytest.fixture
def llvm(tmp_path):
    target = LLVMTarget(target_settings("llvm", lock_dir=str(tmp_path)),
                        measure_settings(cache_dir=str(tmp_path / "cache"), noise={"remeasure": 0}))
    yield target
    target.close()


def test_compare_task_times_both_kernels_interleaved(llvm, tmp_path):
    tasks, _ = _layers([TINY_LAYER])
    task = tasks[0]
    paths = build_pairs([task], {task.id: _best(task, 7).config}, llvm, str(tmp_path))[task.id]
    assert [os.path.getsize(p) > 0 for p in paths] == [True, True], paths
    c = compare_task(task, paths, llvm, FAST)
    assert "error" not in c, c
    assert c["rounds"] == 3 and c["attempts"] == 1
    for name in ("tuned", "default"):
        st = c[f"{name}_ms"]
        assert st["n"] == 3 and 0 < st["min"] <= st["median"] and st["cv"] >= 0
    # the decision is the paired ratio of the two kernels' per-round medians (its arithmetic: the decide tests
    # above); here only what holds whatever the machine's load: the choice follows the ratio, inside its interval
    assert c["kernel"] == ("default" if c["speedup"] < 1 else "tuned")
    assert c["ci_low"] <= c["speedup"] <= c["ci_high"]
    assert "interleaved rounds" in choice_line(c)
    m = choice_metrics(c)
    assert m["kernel_default_taken"] == float(c["kernel"] == "default") and m["kernel_tuned_ms"] > 0
    assert {"kernel_default_ms", "kernel_default_cv", "kernel_speedup_vs_default_ci_low"} <= set(m)


class Tracker:
    def __init__(self):
        self.metrics, self.tags = {}, {}

    def metric(self, key, value, step=0):
        self.metrics[key] = value

    def set_tags(self, tags):
        self.tags.update(tags)

    def flush(self):
        pass


def test_a_task_whose_default_kernel_is_faster_gets_it_in_the_model(llvm, monkeypatch):
    """The step builds the model with the default kernel of a task whose comparison chose it (forced here),
    logs both latencies per task, tags the task and fills the tasks.json entries; the model's output is
    still checked against PyTorch and the task is not reported as untuned."""
    tasks, imported = _layers([TINY_LAYER, DENSE])
    best = {t.id: _best(t, 3) for t in tasks}
    forced = tasks[0].id
    real = kernels.compare_task

    def compare(task, paths, target, s):
        c = real(task, paths, target, s)
        if task.id == forced:
            c["kernel"] = "default"
        return c

    monkeypatch.setattr(kernels, "compare_task", compare)
    seen = {}
    real_latencies = step.model_latencies

    def latencies(imported, tasks, schedules, target, settings, name="model", default_tasks=()):
        seen["schedules"], seen["default"] = set(schedules), set(default_tasks)
        return real_latencies(imported, tasks, schedules, target, settings, name=name, default_tasks=default_tasks)

    monkeypatch.setattr(step, "model_latencies", latencies)
    tracker, entries = Tracker(), [{"id": t.id, "name": t.name} for t in tasks]
    assert step.model_latency(FAST, "layers", imported, tasks, best, llvm, tracker, entries=entries) is None
    assert seen == {"schedules": {tasks[1].id}, "default": {forced}}
    assert tracker.tags["tunebench.e2e_default_kernels"] == tasks[0].name
    assert "tunebench.e2e_untuned_tasks" not in tracker.tags
    m = tracker.metrics
    assert m["e2e_default_kernels"] >= 1 and m[f"{forced}.kernel_default_taken"] == 1.0
    for t in tasks:
        assert m[f"{t.id}.kernel_tuned_ms"] > 0 and m[f"{t.id}.kernel_default_ms"] > 0
    assert m["e2e_latency_ms"] > 0 and m["tvm_default_latency_ms"] > 0
    assert m["e2e_timings"] == 3 and {f"speedup_vs_torch_t{i}" for i in (1, 2, 3)} <= set(m)  # e2e.timings' default
    assert entries[0]["e2e_kernel"]["kernel"] == "default" and entries[1]["e2e_kernel"]["tuned_ms"]["n"] == 3


def test_default_kernels_false_keeps_every_tuned_kernel(llvm, monkeypatch):
    tasks, imported = _layers([DENSE])
    monkeypatch.setattr(kernels, "compare_task", lambda *a: pytest.fail("compared with default_kernels=false"))
    tracker = Tracker()
    settings = E2ESettings(**{**FAST.__dict__, "default_kernels": False, "default_n_runs": 0})
    assert step.model_latency(settings, "layers", imported, tasks, {tasks[0].id: _best(tasks[0], 1)}, llvm,
                              tracker) is None
    assert not any(".kernel_" in k for k in tracker.metrics) and "e2e_default_kernels" not in tracker.metrics
    assert np.isfinite(tracker.metrics["e2e_latency_ms"])


def test_both_cuda_kernels_build_without_a_gpu(tmp_path):
    """On cuda the default kernel is dlight's default schedule; the builders' ``"build"`` request compiles and
    exports both kernels without a GPU."""
    from tunebench.targets.tvm.messages import BuildInput, TaskSpec
    from tunebench.targets.tvm.scheduling import default_schedule
    from tunebench.targets.tvm.worker import handle

    limits = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "max_thread_x": 1024,
              "max_thread_y": 1024, "max_thread_z": 64, "max_vthread": 8}
    target = {"kind": "cuda", "arch": "sm_80"}
    tasks, _ = model_tasks({"name": "layers", "layers": [TINY_LAYER, DENSE]}, "cuda")
    rng = np.random.default_rng(0)
    for task in tasks:
        tpl = get_template(task.kind, "cuda")
        space = tpl.make_space(task.mod)
        cfg = next(c for c in (space.get(int(i)) for i in rng.integers(len(space), size=1000))
                   if tpl.check(task.mod, c, limits) is None)
        unscheduled = task.mod["main"]
        assert default_schedule(task.mod, target)["main"].attrs["tirx.is_scheduled"]
        assert task.mod["main"].same_as(unscheduled)  # dlight's pass works on a copy, not on the task's module
        spec = TaskSpec(key=task.id, mod_json=tvm.ir.save_json(task.mod), kind=task.kind, target_kind="cuda")
        # the default first: the worker's parsed task must stay unscheduled for the tuned build after it
        for name, index, default in (("default", -1, True), ("tuned", cfg.index, False)):
            path = str(tmp_path / f"{task.id}-{name}.so")
            handle("build", BuildInput(task=spec, index=index, target=target, path=path, limits=limits,
                                       default=default))
            assert os.path.getsize(path) > 0


def test_a_default_kernel_that_fails_to_build_keeps_the_tuned_one(llvm, monkeypatch):
    tasks, _ = _layers([TINY_LAYER])
    task = tasks[0]
    monkeypatch.setattr(llvm, "build_kernels", lambda jobs, folder: [("x.so", None), (None, "ValueError: no")])
    assert build_pairs(tasks, {task.id: _best(task, 1).config}, llvm, "/nonexistent") == {task.id: "build: ValueError: no"}
    out = kernels.choose_kernels(tasks, {task.id: _best(task, 1).config}, llvm, FAST)
    assert out[task.id] == {"kernel": "tuned", "error": "build: ValueError: no"}
