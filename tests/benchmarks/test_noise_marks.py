"""benchmarks/noise_marks.py: the analysis of its timings (distributions, marks against moved ratios), the loaders,
and its bad input."""
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import _noise_analysis as na
import noise_marks as nm

SCRIPT = os.path.join(ROOT, "benchmarks", "noise_marks.py")
POLICY = {"cv_max": 0.05, "rounds_cv_max": 0.4, "foreign_cpu_max": 0.3, "slowdown_max": 1.2, "drift_max": 0.1,
          "remeasure": 1}


def timing(block, cond, g, lo, hi, foreign=0.0, rcv=0.01, calib=1e-4, drift=0.0):
    rows = {"tuned": {"rcv": rcv, "round_medians_ms": [1.0] * 5}, "torch": {"rcv": rcv, "round_medians_ms": [g] * 5}}
    return {"block": block, "condition": cond, "layer": "L", "foreign_cpu": foreign, "drift": drift,
            "calib": {"s_pre": calib, "s_post": calib * (1 + drift), "foreign_pre": foreign, "foreign_post": foreign},
            "rows": rows, "ratio": {"g": g, "lo": lo, "hi": hi}}


def result(timings):
    return {"timings": timings, "policy": POLICY, "user_cached_reference_s": 5e-5}


def test_a_ratio_moved_when_it_leaves_the_quiet_median_by_more_than_its_half_width():
    ts = [timing(0, "quiet", 2.0, 1.9, 2.1), timing(0, "quiet", 2.08, 2.03, 2.13), timing(0, "quiet", 1.9, 1.88, 1.92),
          timing(1, "yes1", 3.0, 2.5, 3.5, foreign=0.9), timing(1, "yes1", 2.1, 1.5, 2.7, foreign=0.9)]
    assert na.moved(ts) == [False, True, True, True, False]  # quiet median 2.0; half-widths 0.1, 0.05, 0.02, 0.5, 0.6


def test_marks_are_scored_against_the_moves_and_name_their_signals():
    ts = [timing(0, "quiet", 2.0, 1.9, 2.1), timing(0, "quiet", 2.0, 1.95, 2.05, rcv=0.3),
          timing(1, "yes2", 3.0, 2.9, 3.1, foreign=1.3), timing(1, "yes2", 2.0, 1.0, 3.0, foreign=1.3)]
    sigs = [na.signals(t, na.references(result(ts))) for t in ts]
    e = na.evaluate(ts, sigs, na.moved(ts), na.threshold_policy({"rcv": 0.2, "foreign_cpu": 0.3}))
    assert e["marked_share"] == {"quiet": 0.5, "yes2": 1.0}
    assert e["fired"] == {"rcv": 1, "foreign_cpu": 2}
    assert e["p_moved_marked"] == pytest.approx(1 / 3) and e["p_moved_unmarked"] == 0.0 and e["lift"] is None
    assert e["false_positive_rate"] == pytest.approx(2 / 3) and e["false_negative_rate"] == 0.0


def test_the_references_and_the_slowdown_against_each():
    ts = [timing(0, "quiet", 2.0, 1.9, 2.1, calib=1e-4), timing(0, "quiet", 2.0, 1.9, 2.1, calib=1.2e-4),
          timing(3, "quiet", 2.0, 1.9, 2.1, calib=0.9e-4), timing(1, "yes1", 2.0, 1.9, 2.1, calib=5e-4)]
    refs = na.references(result(ts))
    assert refs == {"cached": 5e-5, "run_min": 0.9e-4, "run_start": pytest.approx(1.1e-4)}
    s = na.signals(ts[3], refs)
    assert s["slowdown_cached"] == pytest.approx(10.0) and s["slowdown_run_start"] == pytest.approx(5 / 1.1)


def test_the_whole_analysis_runs_on_a_small_result_and_prints():
    ts = [timing(b, c, 2.0 + 0.01 * i, 1.9, 2.1, foreign=0.0 if c == "quiet" else 1.0)
          for i, (b, c) in enumerate([(0, "quiet"), (1, "yes1"), (2, "yes2"), (3, "quiet"), (4, "yes1"), (5, "yes2")])]
    out = result(ts)
    out["analysis"] = na.analyse(out)
    a = out["analysis"]
    assert set(a["policies"]) >= {"run_cached_ref", "default_ratio", "default_absolute"}
    assert a["oracle_loaded"]["marked_share"] == {"quiet": 0.0, "yes1": 1.0, "yes2": 1.0}
    assert a["coverage"]["quiet"]["bootstrap"] == 1.0 and set(a["fitted"]) == {"ratio", "absolute"}
    na.print_report(out)


def test_the_loaders_start_and_stop():
    with nm.Loaders() as loaders:
        loaders.set(2)
        pids = [p.pid for p in loaders.procs]
        assert len(pids) == 2 and all(p.poll() is None for p in loaders.procs)
        loaders.set(1)
        assert len(loaders.procs) == 1
    time.sleep(0.1)
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()


def test_bad_arguments_are_one_error_line():
    for args, text in ((["--minutes", "0"], "--minutes 0.0: must be positive"),
                       (["--analyse", "/nonexistent.json"], "--analyse /nonexistent.json: no such file")):
        proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
        assert proc.returncode == 2 and text in proc.stderr, proc.stderr
