"""The quiet reference (``measure.noise.reference``) on a fake clock, and the verdict on an interleaved ratio."""

import pytest

from tunebench.protocol.noise import NoisePolicy, fired, judge, judge_ratio
from tunebench.protocol.reference import CalibrationReference


class FakeCache:
    """The machine cache's calibration part: keeps the fastest offered."""

    def __init__(self, best=None):
        self.best = best

    def calibration_reference(self):
        return self.best

    def offer_calibration(self, seconds):
        self.best = seconds if self.best is None or seconds < self.best else self.best
        return self.best


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_run_reference_is_the_first_clean_calibration_and_is_renewed_after_its_age():
    clock, cache = FakeClock(), FakeCache(best=1.0)
    ref = CalibrationReference("run", cache, max_age_s=100.0, clock=clock)
    assert ref.value() is None and ref.slowdown(2.0) is None
    ref.offer(2.0)  # the first clean calibration of the run
    assert ref.value() == 2.0 and ref.slowdown(2.4) == pytest.approx(1.2)
    assert ref.host_slowdown(2.0) == pytest.approx(2.0)  # the machine's best day was twice as fast
    clock.now = 50.0
    ref.offer(1.5)  # faster, but the reference is young: it stays (a lucky sample is no new baseline)
    assert ref.value() == 2.0 and cache.best == 1.0
    clock.now = 150.0
    ref.offer(3.0)  # older than max_age_s: the next clean calibration renews it (the clock moved)
    assert ref.value() == 3.0 and ref.slowdown(3.0) == pytest.approx(1.0)
    clock.now = 200.0
    ref.offer(0.5)
    assert ref.value() == 3.0 and cache.best == 0.5  # the cache keeps its fastest either way


def test_the_machine_reference_is_the_fastest_ever_cached():
    cache = FakeCache()
    ref = CalibrationReference("machine", cache)
    assert ref.slowdown(1.0) is None
    for s in (2.0, 1.0, 3.0):
        ref.offer(s)
    assert ref.value() == 1.0 and ref.slowdown(1.5) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="reference 'boot': valid: run, machine"):
        CalibrationReference("boot", cache)


def test_a_ratio_is_judged_on_the_signals_that_can_move_it_and_says_which_fired():
    p = NoisePolicy(cv_max=0.05, foreign_cpu_max=0.3, slowdown_max=1.2, drift_max=0.1)
    # both sides 1.5x slower than the reference (a slower host): each absolute time is marked, the ratio is not
    tuned = judge(p, rcv=0.01, foreign_cpu=0.0, slowdown=1.5, drift=0.02)
    base = judge(p, rcv=0.02, foreign_cpu=0.0, slowdown=1.5, drift=0.02)
    assert tuned.noisy and base.noisy and fired(tuned.reasons) == ["slowdown"]
    assert not judge_ratio(p, [tuned, base]).noisy
    # one side spread, the calibration drifted: the ratio is marked, naming both
    spread = judge(p, rcv=0.2, foreign_cpu=0.0, slowdown=1.0, drift=-0.3)
    v = judge_ratio(p, (x for x in [tuned, spread]))  # any iterable
    assert v.noisy and fired(v.reasons) == ["rcv", "drift"] and v.signals["drift"] == pytest.approx(-0.3)
    assert fired(["rcv 0.2 > 0.05", "rcv 0.3 > 0.05", "", "foreign_cpu 1 > 0.3"]) == ["rcv", "foreign_cpu"]


# ---- recorded traces (benchmarks/results/noise_marks.json, 2026-11-29): per row the medians of its 5 rounds (ms),
# the calibration before and after (s), the foreign CPU during the rounds; a 2-vCPU VM
QUIET = {"tuned": [1.1735, 1.1725, 1.1723, 1.1889, 1.1605], "torch": [1.1092, 1.09, 1.1438, 1.1354, 1.2573],
         "calib": (1.479e-4, 1.483e-4), "foreign_cpu": 0.014}  # block 3, nothing else running
TWO_LOADERS = {"tuned": [2.7334, 4.8, 9.6801, 11.5475, 10.6628], "torch": [57.1559, 13.9094, 8.4315, 9.5976, 3.4291],
               "calib": (3.8753e-3, 3.5552e-3), "foreign_cpu": 1.276}  # block 2, two `yes` loaders
ONE_LOADER = {"tuned": [0.1321, 3.7884, 0.1613, 3.5559, 0.1641], "torch": [0.3482, 0.8915, 0.3182, 0.3289, 1.0009],
              "calib": (3.187e-4, 2.0853e-3), "foreign_cpu": 0.897}  # block 1, one loader


def _judged(trace: dict, reference: CalibrationReference, scale: float = 1.0) -> tuple[dict, dict]:
    """The e2e step's verdicts on a trace (each round's median as two samples), every time ``scale`` x."""
    from tunebench.targets.tvm.e2e.pooled import judge_timing, pooled

    cal = [{"median_s": c * scale, "slowdown": reference.slowdown(c * scale)} for c in trace["calib"]]
    samples = {row: [[m * scale / 1e3] * 2 for m in trace[row]] for row in ("tuned", "torch")}
    timing = {"samples": samples, "calibration": tuple(cal), "foreign_cpu": trace["foreign_cpu"], "loadavg": None}
    result = pooled([{**timing, **judge_timing(timing, NoisePolicy())}], NoisePolicy())  # one timing, as e2e.timings=1
    return result["rows"], result["speedup_verdicts"]


def test_the_default_marks_a_loaded_trace_and_not_a_quiet_one():
    ref = CalibrationReference("run", FakeCache())
    ref.offer(QUIET["calib"][0])  # the run's first clean calibration
    rows, ratio = _judged(QUIET, ref)
    assert not any(r["verdict"].noisy for r in rows.values()) and not ratio["torch"].noisy
    for trace, signals in ((TWO_LOADERS, {"foreign_cpu", "rcv", "slowdown"}), (ONE_LOADER, {"foreign_cpu", "drift"})):
        rows, ratio = _judged(trace, ref)
        assert ratio["torch"].noisy and "slowdown" not in fired(ratio["torch"].reasons)
        assert signals <= set(fired(rows["tuned"]["verdict"].reasons) + fired(rows["torch"]["verdict"].reasons))


def test_a_uniformly_slower_host_marks_absolute_times_against_the_machine_reference_only():
    machine = CalibrationReference("machine", FakeCache(best=QUIET["calib"][0]))  # its best day: today's quiet
    rows, ratio = _judged(QUIET, machine, scale=1.6)  # another boot on a host 1.6x slower
    assert all(fired(r["verdict"].reasons) == ["slowdown"] for r in rows.values())  # the times are slower...
    assert not ratio["torch"].noisy  # ...the interleaved ratio is the same
    run = CalibrationReference("run", FakeCache(best=QUIET["calib"][0]))
    run.offer(QUIET["calib"][0] * 1.6)  # the run started on the slower host
    rows, ratio = _judged(QUIET, run, scale=1.6)
    assert not any(r["verdict"].noisy for r in rows.values()) and not ratio["torch"].noisy
    assert run.host_slowdown(QUIET["calib"][0] * 1.6) == pytest.approx(1.6)  # reported beside the times
