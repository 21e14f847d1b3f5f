"""A speedup from k separate timings (``e2e.timings``): the interval over the per-timing ratios
(:func:`tunebench.protocol.stats.timings_ratio_ci`) and the e2e step's composition of k judged timings
(:func:`tunebench.targets.tvm.e2e.pooled.pooled`), on hand-made timings."""

import math

import numpy as np
import pytest

from tunebench.protocol.noise import NoisePolicy
from tunebench.protocol.stats import paired_ratio_ci, summarize, timing_ratios, timings_ratio_ci

BASE = [[2.0, 2.2, 1.9, 2.5, 2.1], [2.4, 2.6, 2.3, 2.5, 2.7], [1.8, 2.0, 1.9, 2.1, 1.7]]
TUNED = [[1.0, 1.05, 1.0, 1.1, 0.98], [1.3, 1.2, 1.25, 1.3, 1.2], [1.0, 1.0, 0.9, 1.1, 1.0]]


def test_one_timing_is_the_interval_over_its_rounds():
    assert timings_ratio_ci(BASE[:1], TUNED[:1]) == pytest.approx(paired_ratio_ci(BASE[0], TUNED[0]))
    assert timings_ratio_ci(BASE[:1], TUNED[:1], level=0.9) == pytest.approx(paired_ratio_ci(BASE[0], TUNED[0], 0.9))


def test_k_timings_of_the_same_ratio_have_a_zero_width_interval():
    num = [[2.0, 3.0], [4.0, 5.0], [1.0, 1.5]]
    den = [[1.0, 1.5], [2.0, 2.5], [0.5, 0.75]]  # every round of every timing says 2x
    assert timings_ratio_ci(num, den) == pytest.approx((2.0, 2.0, 2.0))


def test_timings_that_agree_by_chance_keep_the_width_their_rounds_give():
    """Two timings whose geometric means agree (4x) while the rounds of the first say 2x and 8x: the
    variance of a timing's mean is at least the rounds' pooled within-timing variance / rounds (the
    random-effects estimate with the between-timing part truncated at 0), not the means' variance 0."""
    g, lo, hi = timings_ratio_ci([[2.0, 8.0], [4.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]])
    within = (2 * math.log(2.0) ** 2) / 2  # squares about each timing's mean log / (1 + 1) df
    half = 12.706204736174705 * math.sqrt(within / 2 / 2)  # t(0.975, 1 df); 2 rounds per timing; 2 timings
    assert (g, lo, hi) == pytest.approx((4.0, 4.0 * math.exp(-half), 4.0 * math.exp(half)))


def test_the_floor_never_narrows_the_interval_over_the_timings():
    rng = np.random.default_rng(0)
    for _ in range(50):
        num = np.exp(rng.normal(0.5, 0.2, (3, 5)) + rng.normal(0, rng.uniform(0, 0.3), (3, 1)))
        den = np.ones((3, 5))
        logs = np.log(timing_ratios(num, den))
        half = 4.302652729911275 * logs.std(ddof=1) / math.sqrt(3)
        _, lo, hi = timings_ratio_ci(num, den)
        assert math.log(hi / lo) >= 2 * half * (1 - 1e-9)


def test_the_interval_is_the_written_out_student_t_over_the_timings():
    per = [math.exp(np.mean(np.log(np.array(b) / np.array(t)))) for b, t in zip(BASE, TUNED)]
    assert timing_ratios(BASE, TUNED) == pytest.approx(per)
    logs = np.log(per)
    half = 4.302652729911275 * logs.std(ddof=1) / math.sqrt(3)  # t(0.975, 2 df)
    g, lo, hi = timings_ratio_ci(BASE, TUNED)
    assert (g, lo, hi) == pytest.approx((math.exp(logs.mean()), math.exp(logs.mean() - half),
                                         math.exp(logs.mean() + half)))
    # wider than the rounds pooled as if they were one timing: 2 df, and the levels between timings count
    pooled = paired_ratio_ci(sum(BASE, []), sum(TUNED, []))
    assert pooled[0] == pytest.approx(g) and hi - lo > pooled[2] - pooled[1]


def test_a_timing_without_a_positive_ratio_is_left_out_of_the_interval():
    g, lo, hi = timings_ratio_ci([[2.0], [3.0], [0.0]], [[1.0], [1.0], [1.0]])
    assert math.isnan(g) and 0.0 < lo < 2.0 < 3.0 < hi  # the two positive ones still give an interval (1 df)
    g, lo, hi = timings_ratio_ci([[2.0], [0.0]], [[1.0], [1.0]])
    assert math.isnan(lo) and math.isnan(hi)  # one usable timing: no interval


@pytest.mark.parametrize("num, den", [
    ([], []),                          # no timing
    ([[1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]]),  # 1 vs 2 timings
    ([[1.0, 2.0], [1.0]], [[1.0, 2.0], [1.0, 2.0]]),  # a timing's sides of different lengths
    ([[1.0], []], [[1.0], []]),         # an empty timing
])
def test_bad_input_is_a_value_error(num, den):
    with pytest.raises(ValueError, match="timing"):
        timings_ratio_ci(num, den)


# ---- the e2e step's composition of k judged timings -----------------------------------------------

def fake_timing(tuned_rounds, torch_rounds, slowdown=0.0, drift=0.0, foreign=0.01, load=0.5):
    """One timing as :func:`~tunebench.targets.tvm.e2e.timing._time_rounds` returns it (seconds): rounds of
    samples, the calibrations before and after, the foreign CPU and load."""
    pre = {"median_s": 1.0, "slowdown": slowdown}
    post = {"median_s": 1.0 + drift, "slowdown": slowdown}
    return {"samples": {"tuned": tuned_rounds, "torch": torch_rounds}, "calibration": (pre, post),
            "foreign_cpu": foreign, "loadavg": load}


def judged(timing):
    from tunebench.targets.tvm.e2e.pooled import judge_timing

    return {**timing, **judge_timing(timing, NoisePolicy())}


def test_pooled_timings_one_result():
    from tunebench.targets.tvm.e2e.pooled import pooled

    quiet = [judged(fake_timing([[1e-3, 1e-3]] * 3, [[2e-3, 2e-3]] * 3)),
             judged(fake_timing([[1e-3, 1e-3]] * 3, [[2.2e-3, 2.2e-3]] * 3))]
    drifted = judged(fake_timing([[1e-3, 1e-3]] * 3, [[2.4e-3, 2.4e-3]] * 3, drift=0.8, foreign=0.2, load=1.5))
    res = pooled([*quiet, drifted], NoisePolicy())
    tuned, torch = res["rows"]["tuned"], res["rows"]["torch"]
    assert tuned["stats"].n == 18 and torch["stats"].median == pytest.approx(2.2)  # every timing's samples, ms
    assert torch["stats"] == summarize([x for t in ([2e-3] * 6, [2.2e-3] * 6, [2.4e-3] * 6) for x in t]).scaled(1e3)
    assert torch["timing_round_medians"] == [[2.0] * 3, [2.2] * 3, [2.4] * 3] and len(torch["round_medians"]) == 9
    assert res["timing_speedups"]["torch"] == pytest.approx([2.0, 2.2, 2.4])
    assert res["speedups"]["torch"] == pytest.approx(timings_ratio_ci(
        [[2.0] * 3, [2.2] * 3, [2.4] * 3], [[1.0] * 3] * 3))
    # the third timing drifted: every row and the speedup are noisy, the reasons say where
    for verdict in (tuned["verdict"], torch["verdict"], res["speedup_verdicts"]["torch"]):
        assert verdict.noisy and verdict.reasons and all(r.endswith("in timing 3 of 3") for r in verdict.reasons)
        assert verdict.signals["drift"] == pytest.approx(0.8)
    assert res["drift"] == pytest.approx(0.8) and res["foreign_cpu"] == 0.2 and res["loadavg"] == 1.5
    assert len(res["calibration"]) == 6 and res["timings"] == 3


def test_one_pooled_timing_is_the_timing_itself():
    """k = 1: the verdicts, statistics and the interval over the rounds of one timing, as before timings."""
    from tunebench.protocol.noise import judge_ratio
    from tunebench.targets.tvm.e2e.pooled import pooled

    one = judged(fake_timing([[1e-3, 1.1e-3], [1.2e-3], [0.9e-3]], [[2e-3], [2.6e-3, 2.5e-3], [1.9e-3]], drift=0.3))
    res = pooled([one], NoisePolicy())
    for name in ("tuned", "torch"):
        assert res["rows"][name]["stats"] == one["rows"][name]["stats"]
        assert res["rows"][name]["verdict"] == one["rows"][name]["verdict"]
    sides = (one["rows"]["torch"]["verdict"], one["rows"]["tuned"]["verdict"])
    assert res["speedup_verdicts"]["torch"] == judge_ratio(NoisePolicy().for_rounds(), sides)
    assert res["speedups"]["torch"] == pytest.approx(paired_ratio_ci(one["rows"]["torch"]["round_medians"],
                                                                     one["rows"]["tuned"]["round_medians"]))
