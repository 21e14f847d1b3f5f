"""The timing protocol on a real llvm target (calibration, noise marking, re-timing), the choice of the
reported best, and clocks that leave out waiting for another process's device lock."""

import json
import os
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import TINY_LAYER, measure_settings, target_settings
from helpers import hold_lock
from helpers import small_task as make_task
from tunebench.harness.loop import tune_task
from tunebench.harness.measurement import ProtocolRunner
from tunebench.methods import Budget, make_method
from tunebench.protocol.noise import Verdict
from tunebench.protocol.stats import summarize
from tunebench.targets.tvm.llvm import LLVMTarget
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.workloads.tasks import model_tasks
from tunebench.task import Measurement
from tunebench.testing.fakes import FakeTarget


@pytest.fixture(scope="module")
def tiny_task():
    tasks, _ = model_tasks({"name": "layers", "layers": [TINY_LAYER]}, "llvm")
    task = tasks[0]
    task.space = get_template(task.kind, "llvm").make_space(task.mod)
    return task


def llvm(tmp_path, **noise) -> LLVMTarget:
    cfg = target_settings("llvm", lock_dir=str(tmp_path), runner={"repeat": 3, "min_repeat_ms": 5})
    return LLVMTarget(cfg, measure_settings(cache_dir=str(tmp_path / "cache"), noise=noise))


def test_each_cpu_model_has_its_own_calibration_reference(tmp_path):
    """The calibration kernel compiled for another LLVM CPU model is other code: its reference is its own."""
    targets = [LLVMTarget(target_settings("llvm", lock_dir=str(tmp_path), mcpu=m),
                          measure_settings(cache_dir=str(tmp_path / "cache"))) for m in ("haswell", "nehalem", "haswell")]
    try:
        paths = [t.machine.path for t in targets]
        assert paths[0] != paths[1] and paths[0] == paths[2]
    finally:
        for t in targets:
            t.close()


def test_calibration_sets_and_uses_the_machine_reference(tmp_path):
    target = llvm(tmp_path, reference="machine")
    try:
        first = target.calibrate()
        assert first["median_s"] > 0 and first["min_s"] <= first["median_s"]
        if not first["noisy"]:
            assert first["slowdown"] == pytest.approx(1.0) and target.machine.calibration_reference() == first["median_s"]
        target.machine.offer_calibration(first["median_s"] / 100)  # pretend the machine once was 100x faster
        slow = target.calibrate()  # (two calibrations of a shared machine can differ 2x: the margin is wide)
        assert slow["slowdown"] > 5 and slow["noisy"] and any(r.startswith("slowdown") for r in slow["reasons"])
    finally:
        target.close()


def test_the_run_reference_is_the_runs_first_clean_calibration_and_the_machines_best_is_only_reported(tmp_path):
    target = llvm(tmp_path, cv_max=10.0, foreign_cpu_max=100.0)  # every calibration is clean
    try:
        first = target.calibrate()
        assert first["slowdown"] == pytest.approx(1.0) and target.reference.value() == first["median_s"]
        assert first["host_slowdown"] is None  # the machine cache had nothing before
        target.machine.offer_calibration(first["median_s"] / 100)  # the machine's lucky best day, 100x faster
        again = target.calibrate()
        assert again["host_slowdown"] > 5  # reported beside the times...
        assert again["slowdown"] < 5 and not any(r.startswith("slowdown") for r in again["reasons"])  # ...not a mark
    finally:
        target.close()


def test_noisy_timings_are_remeasured_then_marked(tmp_path, tiny_task):
    cfgs = [tiny_task.space.get(i) for i in (0, 7)]
    strict = llvm(tmp_path, cv_max=0.0, remeasure=2)  # every timing is "noisy"
    loose = llvm(tmp_path, cv_max=10.0, foreign_cpu_max=100.0, remeasure=2)
    try:
        for m in strict.measure(tiny_task, cfgs):
            assert m.valid and m.noisy and m.noise["attempts"] == 3 and m.noise["reasons"][0].startswith("rcv")
            assert m.latency_min_s <= m.latency_s and m.noise["cv"] >= 0
        for m in loose.measure(tiny_task, cfgs):
            assert m.valid and not m.noisy and m.noise["attempts"] == 1
        rec = m.to_record()
        assert rec["noisy"] is False and rec["noise"]["attempts"] == 1 and rec["latency_min_s"] > 0
        assert Measurement.from_record(rec, tiny_task.space).noise == m.noise
    finally:
        strict.close()
        loose.close()


def test_retime_interleaves_the_candidates_with_the_calibration(tmp_path, tiny_task):
    target = llvm(tmp_path)
    try:
        cal = target.calibrate()  # the run's reference, as the harness takes it before its first task
        if target.reference.value() is None:  # a busy machine sets none: use this one
            target.reference.offer(cal["median_s"])
        out = target.retime(tiny_task, [tiny_task.space.get(i) for i in (1, 2, 3)], rounds=3, repeat=2)
    finally:
        target.close()
    assert len(out) == 3
    for r in out:
        assert r["stats"].n == 6 and r["stats"].median > 0 and len(r["calibration"]) == 3
        assert {"rcv", "slowdown", "drift"} <= set(r["verdict"].signals)
    assert target.stats["protocol_s"] > 0


def test_retime_takes_the_libraries_the_search_kept_and_builds_only_the_others(tmp_path, tiny_task):
    """The search keeps the libraries of a task's ``retime.top_k`` fastest configs (3); the re-timing times
    those without building them again, builds the config it has none of, and leaves no library behind."""
    target = llvm(tmp_path)
    try:
        found = target.measure(tiny_task, [tiny_task.space.get(i) for i in (1, 2, 3, 4)])
        kept = target.libraries.paths()
        assert len(kept) == 3 and all(os.path.exists(p) for p in kept)
        fastest = sorted(found, key=lambda m: m.latency_s)[:3]
        built: list = []
        real = target._build_all
        target._build_all = lambda task, configs, phase="build_phase_s": (built.extend(configs),
                                                                         real(task, configs, phase))[1]
        configs = [m.config for m in fastest[:2]] + [tiny_task.space.get(9)]
        out = target.retime(tiny_task, configs, rounds=2, repeat=2)
        assert [c.index for c in built] == [9] and target.libraries.hits == 2
        assert all(r is not None and r["stats"].n == 4 for r in out)
        assert target.libraries.paths() == [] and not any(os.path.exists(p) for p in kept)
    finally:
        target.close()


class RetimeTarget(FakeTarget):
    """Search timings from the fake loop target; re-timings given by hand (the search's best is not the
    re-timed best), output checks that fail for one config. It times kernels (TimesKernels): only ``retime``
    is used here, the other steps are not reached."""

    def __init__(self, retimed_ms: dict, wrong: set = frozenset()):
        super().__init__()
        self.retimed_ms, self.wrong, self.asked = retimed_ms, set(wrong), []

    def calibrate(self):
        raise AssertionError("final_best does not calibrate")

    def peak(self):
        raise AssertionError("final_best does not measure the peak")

    def worker_pids(self):
        return []

    def run_tags(self):
        return {}

    def retime(self, task, configs, rounds, repeat):
        self.asked.append([c.index for c in configs])
        return [{"stats": summarize([self.retimed_ms[c.index] / 1e3] * 4), "calibration": [1e-4] * rounds,
                 "verdict": Verdict(signals={"rcv": 0.0})} for c in configs]

    def check(self, task, config):
        super().check(task, config)
        return config.index not in self.wrong, "fake check"


def test_reported_best_is_the_fastest_retimed_config_that_passes_its_check(tmp_path):
    task = make_task()
    search = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}  # search latencies (ms) of configs 0..3
    result = SimpleNamespace(task=task, ranked=lambda: [
        Measurement.timed(task.id, task.space.get(i), ms / 1e3, trial=i) for i, ms in search.items()])
    target = RetimeTarget({0: 3.5, 1: 1.5, 2: 2.5}, wrong={1})
    proto = ProtocolRunner(target, measure_settings(retime={"top_k": 3}), str(tmp_path))
    assert proto.timed  # a target with TimesKernels' methods times kernels
    best, checks, rows = proto.final_best(result, check=True)
    assert target.asked == [[0, 1, 2]]  # the search's top 3
    assert [c["index"] for c in checks] == [1, 2] and [c["ok"] for c in checks] == [False, True]
    assert best.config.index == 2 and best.latency_s == pytest.approx(2.5e-3)  # re-timed, not the search's 3 ms
    assert best.noise["search_latency_s"] == pytest.approx(3e-3) and best.gflops == pytest.approx(task.flops / 2.5e-3 / 1e9)
    lines = [json.loads(x) for x in open(tmp_path / "retimed.jsonl")]
    assert [(r["index"], r["chosen"]) for r in lines] == [(1, False), (2, True), (0, False)]
    assert lines[1]["search_latency_s"] == pytest.approx(3e-3) and lines[1]["latency_s"] == pytest.approx(2.5e-3)
    best, checks, _ = proto.final_best(result, check=False)
    assert best.config.index == 1 and checks == []  # unchecked: simply the fastest re-timed


def test_protocol_settings_validate_every_key():
    s = measure_settings(retime={"top_k": 5}, noise={"cv_max": 0.1}, wait_for_quiet={"enabled": True})
    assert (s.retime.top_k, s.retime.rounds, s.noise.cv_max, s.wait_for_quiet.enabled) == (5, 5, 0.1, True)
    from tunebench.errors import UserError

    for bad, match in (({"retime": {"top_k": 0}}, r"measure\.retime\.top_k=0"),
                       ({"retime": {"topk": 1}}, r"measure\.retime\.topk is unknown"),
                       ({"calibrate": "maybe"}, r"measure\.calibrate='maybe'"),
                       ({"wait_for_quiet": {"max_wait_s": -1}}, r"max_wait_s=-1"),
                       ({"colour": 1}, r"measure\.colour is unknown")):
        with pytest.raises(UserError, match=match):
            measure_settings(**bad)


# ---- clocks --------------------------------------------------------------------------------------

def test_search_clock_leaves_out_lock_waits():
    task = make_task()
    target = FakeTarget(lock_wait_s=2.0)  # each batch 'waits' 2 s for another process's lock (not slept)
    res = tune_task(task, make_method({"name": "random"}), target, Budget(trials_per_task=8),
                    np.random.default_rng(0))
    assert res.lock_wait_s == pytest.approx(4.0)  # two batches of 4
    assert res.search_s < 1.0 and all(m.search_s < 1.0 for m in res.measurements)


def test_a_run_blocked_by_a_held_lock_says_so_and_does_not_charge_the_wait(tiny_cfg, monkeypatch, caplog):
    """Another process takes the device lock right when the first batch is about to be timed."""
    from mlflow.tracking import MlflowClient

    import tunebench.harness.experiment as experiment
    import tunebench.harness.tuning as tuning
    from tunebench.targets.tvm.llvm import LLVMTarget as Real

    lock_dir = tiny_cfg.workdir + "/locks"
    tiny_cfg.target.lock_dir = lock_dir
    tiny_cfg.e2e.enabled = False
    holder: list[subprocess.Popen] = []
    real_make = tuning.make_method

    def make_method(cfg):
        method = real_make(cfg)
        ask = method.ask

        def ask_then_block(n):
            if not holder:  # the first ask of the run: from now on the lock is held for 10 s
                holder.append(hold_lock(f"cpu-{os.uname().nodename}", lock_dir, 10.0))
            return ask(n)

        method.ask = ask_then_block
        return method

    monkeypatch.setattr(tuning, "make_method", make_method)
    with caplog.at_level("WARNING"):
        run_id = experiment.run_experiment(tiny_cfg)
    holder[0].wait()
    m = MlflowClient(f"sqlite:///{tiny_cfg.workdir}/mlflow.db").get_run(run_id).data.metrics
    tid = next(k.split(".")[0] for k in m if k.endswith(".trials"))
    assert m["lock_wait_s"] > 8.0 and m[f"{tid}.lock_wait_s"] == pytest.approx(m["lock_wait_s"], abs=0.5)
    # six tiny trials (a few seconds even on a loaded machine); the wait charged would make it > lock_wait_s
    assert m["search_time_s"] < m["lock_wait_s"] - 2.0
    waits = [r.getMessage() for r in caplog.records if "waiting for the" in r.getMessage()]
    assert len(waits) == 1 and f"held by pid {holder[0].pid} (" in waits[0]
    assert Real is LLVMTarget


def test_a_short_build_timeout_does_not_count_the_workers_tvm_import(tmp_path, tiny_task):
    """Workers import TVM before they report ready: the first builds of a fresh target fit in 2 s."""
    target = llvm(tmp_path)
    target.settings.builder.timeout_s = 2
    try:
        ms = target.measure(tiny_task, [tiny_task.space.get(i) for i in (3, 4)])
    finally:
        target.close()
    assert all(m.valid for m in ms), [m.error for m in ms]
