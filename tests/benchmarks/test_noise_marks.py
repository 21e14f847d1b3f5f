"""benchmarks/noise_marks.py: the analysis of its timings (distributions, marks against moved ratios), the loaders,
and its bad input."""
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import _noise_analysis as na
import noise_marks as nm

SCRIPT = os.path.join(ROOT, "benchmarks", "noise_marks.py")
POLICY = {"cv_max": 0.05, "rounds_cv_max": 0.4, "foreign_cpu_max": 0.3, "slowdown_max": 1.2, "drift_max": 0.1,
          "remeasure": 1}


Z = [-1.0, -0.5, 0.0, 0.5, 1.0]  # round offsets: sd 0.79, so a Student-t log half-width of 0.98 * spread


def timing(block, cond, g, spread=0.05, foreign=0.0, rcv=0.01, calib=1e-4, drift=0.0, layer="L", t_s=0.0):
    """A timing whose 5 round ratios are ``g * exp(spread * z)`` (geometric mean ``g``)."""
    torch = [g * math.exp(spread * z) for z in Z]
    rows = {"tuned": {"rcv": rcv, "round_medians_ms": [1.0] * 5}, "torch": {"rcv": rcv, "round_medians_ms": torch}}
    return {"block": block, "condition": cond, "layer": layer, "foreign_cpu": foreign, "drift": drift, "t_s": t_s,
            "calib": {"s_pre": calib, "s_post": calib * (1 + drift), "foreign_pre": foreign, "foreign_post": foreign},
            "rows": rows, "ratio": {"g": g, "lo": None, "hi": None}}


def result(timings):
    return {"timings": timings, "policy": POLICY, "user_cached_reference_s": 5e-5}


def test_a_ratio_moved_when_the_harness_interval_misses_the_quiet_median():
    # quiet median 2.0; log distances 0, 0.039, 0.051, 0.405, 0.049 against log half-widths 0.098, 0.020, 0.098,
    # 0.196, 0.49; the interval is recomputed from the rounds (the saved one is ignored)
    ts = [timing(0, "quiet", 2.0, 0.1), timing(0, "quiet", 2.08, 0.02), timing(0, "quiet", 1.9, 0.1),
          timing(1, "yes1", 3.0, 0.2, foreign=0.9), timing(1, "yes1", 2.1, 0.5, foreign=0.9)]
    assert na.moved(ts) == [False, True, False, True, False]


def test_marks_are_scored_against_the_moves_and_name_their_signals():
    ts = [timing(0, "quiet", 2.0), timing(0, "quiet", 2.0, 0.025, rcv=0.3),
          timing(1, "yes2", 3.0, 0.03, foreign=1.3), timing(1, "yes2", 2.0, 0.5, foreign=1.3)]
    sigs = [na.signals(t, na.references(result(ts))) for t in ts]
    e = na.evaluate(ts, sigs, na.moved(ts), na.threshold_policy({"rcv": 0.2, "foreign_cpu": 0.3}))
    assert e["marked_share"] == {"quiet": 0.5, "yes2": 1.0}
    assert e["fired"] == {"rcv": 1, "foreign_cpu": 2}
    assert e["p_moved_marked"] == pytest.approx(1 / 3) and e["p_moved_unmarked"] == 0.0 and e["lift"] is None
    assert e["false_positive_rate"] == pytest.approx(2 / 3) and e["false_negative_rate"] == 0.0


def test_the_references_and_the_slowdown_against_each():
    ts = [timing(0, "quiet", 2.0, calib=1e-4), timing(0, "quiet", 2.0, calib=1.2e-4),
          timing(3, "quiet", 2.0, calib=0.9e-4), timing(1, "yes1", 2.0, calib=5e-4)]
    refs = na.references(result(ts))
    assert refs == {"cached": 5e-5, "run_min": 0.9e-4, "run_start": pytest.approx(1.1e-4)}
    s = na.signals(ts[3], refs)
    assert s["slowdown_cached"] == pytest.approx(10.0) and s["slowdown_run_start"] == pytest.approx(5 / 1.1)


def test_the_whole_analysis_runs_on_a_small_result_and_prints():
    ts = [timing(b, c, 2.0 + 0.01 * i, foreign=0.0 if c == "quiet" else 1.0)
          for i, (b, c) in enumerate([(0, "quiet"), (1, "yes1"), (2, "yes2"), (3, "quiet"), (4, "yes1"), (5, "yes2")])]
    out = result(ts)
    out["analysis"] = na.analyse(out)
    a = out["analysis"]
    assert set(a["policies"]) >= {"run_cached_ref", "default_ratio", "default_absolute"}
    assert a["oracle_loaded"]["marked_share"] == {"quiet": 0.0, "yes1": 1.0, "yes2": 1.0}
    assert a["intervals"]["constructions"]["student_t"]["coverage"]["quiet"] == 1.0 and set(a["fitted"]) == {"ratio", "absolute"}
    na.print_report(out)


def test_the_speedups_as_published_are_k_timings_with_the_harness_interval():
    """Speedups of 3 timings each (``--timings 3``): the interval over the timings' ratios
    (:func:`~tunebench.protocol.stats.timings_ratio_ci`), moved against the quiet median of the published ratios,
    marked when any timing is."""
    from tunebench.protocol.stats import timings_ratio_ci

    levels = {0: (2.0, 2.1, 1.9), 1: (2.0, 1.95, 2.05), 2: (2.0, 2.02, 1.98), 3: (3.0, 3.1, 2.9)}
    ts = []
    for sp, (cond, foreign) in enumerate([("quiet", 0.0), ("quiet", 0.0), ("quiet", 0.0), ("yes1", 0.0)]):
        for i, g in enumerate(levels[sp]):
            ts.append({**timing(sp, cond, g, 0.01, foreign=0.9 if (cond == "yes1" and i == 1) else foreign,
                                t_s=10.0 * sp), "speedup": sp, "timing": i})
    out = {**result(ts), "blocks_s": 120.0}
    p = na.published(out, na.references(out), na.policies(POLICY)["default_ratio"])
    assert p["n_speedups"] == 4 and p["timings_per_speedup"] == 3 and p["speedups_per_minute"] == 2.0
    iv = timings_ratio_ci([t["rows"]["torch"]["round_medians_ms"] for t in ts[9:]],
                          [t["rows"]["tuned"]["round_medians_ms"] for t in ts[9:]])
    assert iv[0] == pytest.approx(3.0, rel=1e-3) and not iv[1] <= 2.0 <= iv[2]  # the loaded speedup moved
    assert p["coverage"] == {"quiet": 1.0, "yes1": 0.0}
    e = p["default_marks"]
    assert e["marked_share"] == {"quiet": 0.0, "yes1": 1.0} and e["fired"] == {"foreign_cpu": 1}
    assert e["p_moved_marked"] == 1.0 and e["p_moved_unmarked"] == 0.0 and e["false_negative_rate"] == 0.0
    # a result saved before --timings: one timing per speedup, the interval over its rounds
    before = result([{k: v for k, v in t.items() if k not in ("speedup", "timing")} for t in ts[:3]])
    old = na.published(before, na.references(before), na.policies(POLICY)["default_ratio"])
    assert old["n_speedups"] == 3 and old["timings_per_speedup"] == 1 and old["speedups_per_minute"] is None


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
                       (["--analyse", "/nonexistent.json"], "--analyse /nonexistent.json: no such file"),
                       (["--timings", "0"], "--timings 0: must be 1..100")):
        proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
        assert proc.returncode == 2 and text in proc.stderr, proc.stderr


def test_the_interval_constructions_on_known_rounds():
    import _interval_analysis as ia

    t = timing(0, "quiet", 2.0, 0.1, drift=0.2)
    g, lo, hi = ia.student_t(t)
    assert g == pytest.approx(2.0) and math.log(hi / g) == pytest.approx(0.098, abs=0.001)
    assert ia.t_plus_drift(t) == pytest.approx((g, lo / 1.2, hi * 1.2))  # widened by log(1 + drift) each side
    assert ia.min_max(t) == pytest.approx((2.0, 2.0 * math.exp(-0.1), 2.0 * math.exp(0.1)))
    b = ia.bootstrap(t)
    assert b[1] < 2.0 < b[2] and b[2] - b[1] < hi - lo  # the percentile bootstrap: narrower
    f = ia.fieller(t)  # a constant tuned time: Fieller is the t interval of the mean baseline time
    a = np.array(t["rows"]["torch"]["round_medians_ms"])
    half = 2.7764451051977987 * a.std(ddof=1) / math.sqrt(5)
    assert f == pytest.approx((a.mean(), a.mean() - half, a.mean() + half))


def test_more_rounds_of_one_timing_do_not_cover_a_level_that_lasts_a_timing_but_timings_as_units_do():
    import _interval_analysis as ia

    # each timing sits at its own level (log offsets 0, 0.02 in block 0; 0.2, 0.22 in block 3) with tight rounds:
    # the quiet median (offset 0.11) is in no single timing's interval, nor in two timings' pooled rounds (t on
    # 10 rounds, half-width ~0.008), but in the interval over the two timings as units (t on 1 df, ~0.13)
    ts = [timing(b, "quiet", 2.0 * math.exp(off), 0.001, t_s=10 * b + i)
          for b, offs in ((0, (0.0, 0.02)), (3, (0.2, 0.22))) for i, off in enumerate(offs)]
    ts += [timing(1, "yes1", 5.0 * math.exp(0.02 * (i % 2)), 0.001, foreign=1.0, t_s=10 + i) for i in range(4)]
    out = ia.more_rounds(ts, [t["condition"] != "quiet" for t in ts], ks=(1, 2))
    assert out["pooled 5"]["coverage"]["quiet"] == 0.0 and out["pooled 10"]["coverage"]["quiet"] == 0.0
    assert out["timings 10"]["coverage"]["quiet"] == 1.0 and out["timings 10"]["coverage"]["yes1"] == 0.0
    assert out["timings 10"]["lift"]["oracle"] is None  # nothing quiet moved: no ratio
    assert out["pooled 10"]["seconds"]["L"] == pytest.approx(2.0) and out["timings 10"]["groups"] == 4
    cmp = ia.compare(ts, {"oracle": [t["condition"] != "quiet" for t in ts]})
    assert cmp["student_t"]["coverage"] == {"quiet": 0.0, "yes1": 0.0}
    assert cmp["bootstrap"]["lift"]["oracle"] == pytest.approx(1.0)
