"""The methodology score ([Willemsen-FGCS24]): a hand-made case, and the package's own baseline and
standardised curves on the same inputs (bench extra: autotuning-methodology)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from tunebench.protocol.methodology import (
    SpaceStats,
    baseline_over_fevals,
    baseline_over_time,
    curve_on_fevals,
    curve_on_time,
    score,
    standardised,
)

VALUES = [5.0, 3.0, 9.0, 1.0, 7.0, 2.0, 8.0]  # 7 valid values, optimum 1


def test_hand_made_case():
    """N = 7, worst first [9, 8, 7, 5, 3, 2, 1]; M = 1: index round(1 * 8 / 2) = 4 -> 3; M = 2: round(16 / 3)
    = 5 -> 2; M >= 3: round(24 / 4) = 6 -> 1 (the optimum). A method at 3 after one evaluation is as good as
    random (0); at 1 after two it is at the optimum where random is at 2 (1); later points, where random is
    at the optimum too, are undefined and left out: the score is (0 + 1) / 2."""
    space = SpaceStats.of(VALUES + [math.inf, None], seconds=[0.5] * 7)
    b = baseline_over_fevals(space, np.arange(1, 6))
    assert list(b) == [3.0, 2.0, 1.0, 1.0, 1.0]
    curve = curve_on_fevals([3.0, 1.0], 5)  # ended after 2 evaluations: held
    assert list(curve) == [3.0, 1.0, 1.0, 1.0, 1.0]
    assert list(standardised(curve, b, space.optimum)[:2]) == [0.0, 1.0]
    s = score([[curve]], [b], [space])
    assert s.mean == pytest.approx(0.5) and math.isnan(s.ci_low)  # one seed: no interval
    worse = score([[curve_on_fevals([9.0, 9.0, 9.0], 5)]], [b], [space])
    assert worse.mean == pytest.approx(((9 - 3) / (1 - 3) + (9 - 2) / (1 - 2)) / 2)  # below random: negative
    # over time: 0.5 s per evaluation; t = 0.5, 1.0 -> 1, 2 evaluations
    assert list(baseline_over_time(space, [0.1, 0.5, 1.0])) == [3.0, 3.0, 2.0]
    assert list(curve_on_time([0.5, 1.0], [3.0, 1.0], [0.1, 0.5, 1.0, 2.0])) == [math.inf, 3.0, 1.0, 1.0]


def test_seeds_and_spaces_aggregate():
    """Two seeds: the mean of their scores with a bootstrap interval; two spaces: the mean of their
    standardised curves; a point before the first valid value counts at the space's worst value."""
    space = SpaceStats.of(VALUES)
    b = baseline_over_fevals(space, [1, 2])
    runs = [[curve_on_fevals([3.0, 1.0], 2)], [curve_on_fevals([math.inf, 2.0], 2)]]
    s = score(runs, [b], [space])
    first = (0.0 + 1.0) / 2
    second = ((9 - 3) / (1 - 3) + 0.0) / 2
    assert s.per_seed == pytest.approx((first, second)) and s.mean == pytest.approx((first + second) / 2)
    assert s.ci_low <= s.mean <= s.ci_high
    two = score([[curve_on_fevals([3.0, 1.0], 2), curve_on_fevals([3.0, 2.0], 2)]], [b, b], [space, space])
    assert two.mean == pytest.approx((0.0 + 0.5) / 2)


def test_matches_the_package():
    """The package's calculated baseline (not simulated, without NaN) and standardised curves equal ours on
    a random space, over evaluations 1..200 and over a time range of evenly spaced evaluation counts."""
    pytest.importorskip("autotuning_methodology", reason="the bench extra (autotuning-methodology) is not installed")
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    rng = np.random.default_rng(3)
    values = rng.lognormal(0.0, 0.5, size=997)
    space = SpaceStats.of(values, seconds=rng.uniform(0.1, 0.3, size=997))
    stats = types.SimpleNamespace(
        objective_performances_total_sorted_nan=np.sort(values), objective_performances_total_sorted=np.sort(values),
        minimization=True, total_performance_absolute_optimum=lambda: float(values.min()),
        get_time_per_feval=lambda operator: space.time_per_feval)
    theirs = RandomSearchCalculatedBaseline(stats)
    fevals = np.arange(1, 201)
    assert np.array_equal(theirs.get_curve_over_fevals(fevals), baseline_over_fevals(space, fevals))
    method = np.minimum.accumulate(rng.permutation(values)[:200])
    ours = standardised(method, baseline_over_fevals(space, fevals), space.optimum)
    (pkg,) = theirs.get_standardised_curves(fevals, [method], "fevals")
    assert np.allclose(pkg[np.isfinite(ours)], ours[np.isfinite(ours)])
    times = np.arange(1, 101) * 2 * space.time_per_feval  # 2, 4, ..., 200 evaluations: evenly spaced
    assert np.allclose(theirs.get_curve_over_time(times), baseline_over_time(space, times))
