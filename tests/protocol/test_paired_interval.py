"""The interval of a speedup from interleaved rounds (Student t on the rounds' log ratios): its coverage on
synthetic rounds with a known ratio, its edge cases, and that the e2e step and the kernel choice use it."""

import math

import numpy as np
import pytest

from tunebench.protocol.stats import paired_ratio_ci, student_t_ci

TRUE_RATIO = 1.7


def rounds(rng, n, sigma=0.15, round_sigma=0.3):
    """n interleaved rounds of a baseline and a tuned model: log-normal round medians sharing a per-round factor
    (a slower round slows both), whose ratio is log-normal around TRUE_RATIO."""
    shared = rng.normal(0.0, round_sigma, n)
    base = np.exp(math.log(TRUE_RATIO) + shared + rng.normal(0.0, sigma, n))
    tuned = np.exp(shared + rng.normal(0.0, sigma, n))
    return base, tuned


@pytest.mark.parametrize("n", [3, 5, 10])
def test_the_interval_covers_the_true_ratio_at_its_level_on_log_normal_rounds(n):
    rng = np.random.default_rng(20261129 + n)
    hits = []
    for _ in range(3000):
        base, tuned = rounds(rng, n)
        g, lo, hi = paired_ratio_ci(base, tuned)
        assert lo <= g <= hi
        hits.append(lo <= TRUE_RATIO <= hi)
    assert 0.93 <= np.mean(hits) <= 0.97, np.mean(hits)


def test_the_percentile_bootstrap_it_replaced_covers_too_little_over_5_rounds():
    """The same data through a percentile bootstrap of the geometric mean over the rounds (the e2e interval
    before): clearly under 95 %, so the coverage test above can tell a too-narrow interval."""
    rng = np.random.default_rng(5)
    hits = []
    for _ in range(1000):
        base, tuned = rounds(rng, 5)
        logs = np.log(base / tuned)
        means = logs[rng.integers(0, 5, size=(2000, 5))].mean(axis=1)
        lo, hi = np.quantile(means, [0.025, 0.975])
        hits.append(lo <= math.log(TRUE_RATIO) <= hi)
    assert np.mean(hits) < 0.9


def test_the_interval_is_the_written_out_student_t():
    base, tuned = [2.0, 2.2, 1.9, 2.5, 2.1], [1.0, 1.05, 1.0, 1.1, 0.98]
    logs = np.log(np.array(base) / np.array(tuned))
    half = 2.7764451051977987 * logs.std(ddof=1) / math.sqrt(5)  # t(0.975, 4 df)
    g, lo, hi = paired_ratio_ci(base, tuned)
    assert (g, lo, hi) == pytest.approx((math.exp(logs.mean()), math.exp(logs.mean() - half),
                                         math.exp(logs.mean() + half)))
    assert paired_ratio_ci(base, tuned, level=0.99)[2] > hi  # a higher level: wider
    assert student_t_ci(logs) == pytest.approx((logs.mean() - half, logs.mean() + half))


def test_edge_cases():
    assert paired_ratio_ci([2.0, 4.0], [1.0, 2.0]) == pytest.approx((2.0, 2.0, 2.0))  # every round says 2x
    g, lo, hi = paired_ratio_ci([1.0], [0.5])
    assert g == pytest.approx(2.0) and math.isnan(lo) and math.isnan(hi)  # one round: no interval
    g, lo, hi = paired_ratio_ci([1.0, 2.0, math.inf], [1.0, 1.0, 1.0])
    assert lo <= 1.0 and hi >= 2.0  # a non-finite round is left out of the interval
    assert all(math.isnan(v) for v in student_t_ci([1.0, math.nan]))
    with pytest.raises(ValueError):
        paired_ratio_ci([1.0, 2.0], [1.0])


def test_the_e2e_speedups_and_the_kernel_choice_use_it():
    from tunebench.targets.tvm.e2e.kernels import decide
    from tunebench.targets.tvm.e2e.pooled import speedups

    tuned, torch, default = [1.0, 1.1, 0.95, 1.05, 1.0], [1.6, 1.9, 1.5, 1.7, 1.8], [3.0, 2.5, 2.9, 3.4, 3.1]
    out, _ = speedups([{"tuned": {"round_medians": tuned}, "torch": {"round_medians": torch},
                        "tvm_default": {"round_medians": default[:3]}}])  # one timing; the default build's 3 rounds
    assert out["torch"] == pytest.approx(paired_ratio_ci(torch, tuned))
    assert out["tvm_default"] == pytest.approx(paired_ratio_ci(default[:3], tuned[:3]))
    choice = decide(tuned, default)
    assert (choice["speedup"], choice["ci_low"], choice["ci_high"]) == pytest.approx(paired_ratio_ci(default, tuned))
