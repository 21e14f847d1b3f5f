"""benchmarks/kt_published.py: the aggregate over spaces from per-space per-seed scores, the rank
agreement with the published scores, and the published hyperparameters as Kernel Tuner reads them."""
import math
import os
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import kt_published as ktp


def test_aggregate_of_per_space_scores_is_the_score_of_the_averaged_curves():
    from tunebench.protocol.methodology import SpaceStats, baseline_over_fevals, curve_on_fevals, score

    rng = np.random.default_rng(1)
    spaces = [SpaceStats.of(list(rng.uniform(1, 10, 300))), SpaceStats.of(list(rng.uniform(5, 50, 500)))]
    budget = 40
    bases = [baseline_over_fevals(s, np.arange(1, budget + 1)) for s in spaces]
    runs = [[curve_on_fevals(np.minimum.accumulate(rng.choice(s.values, budget)), budget) for s in spaces]
            for _ in range(6)]
    per_space = {f"s{i}": list(score([[r[i]] for r in runs], [bases[i]], [spaces[i]]).per_seed) for i in range(2)}
    agg = ktp.aggregate(per_space)
    want = score(runs, bases, spaces)
    assert np.allclose(agg["per_seed"], want.per_seed) and math.isclose(agg["mean"], want.mean)
    assert agg["ci"][0] < agg["mean"] < agg["ci"][1]
    per_space["s1"][2] = math.nan  # a seed with an undefined score on one space is left out, not averaged in
    assert math.isnan(ktp.aggregate(per_space)["per_seed"][2])


def test_rank_agreement():
    pub = {"a": 0.3, "b": -0.1, "c": -0.5, "d": -0.6}
    assert ktp.rank_agreement(pub, {"a": 1.0, "b": 0.5, "c": 0.0, "d": -1.0}) == 1.0
    assert ktp.rank_agreement(pub, {"a": -1.0, "b": 0.0, "c": 0.5, "d": 1.0}) == -1.0
    assert math.isnan(ktp.rank_agreement(pub, {"a": 1.0, "b": 0.0}))  # fewer than three in common


def test_rows_and_published_hyperparameters_are_kernel_tuner_options():
    rows = ktp.settings()
    assert rows["genetic_algorithm"] == ("genetic_algorithm", {})
    assert rows["genetic_algorithm@hub"] == ("genetic_algorithm", ktp.PUBLISHED["genetic_algorithm"][0])
    assert set(rows) == {*ktp.PUBLISHED, *ktp.EXTRA, *(f"{s}@hub" for s in ktp.PUBLISHED)}
    pytest.importorskip("kernel_tuner")
    import importlib

    for strategy, (options, score, (low, mid, high), n) in ktp.PUBLISHED.items():
        known = importlib.import_module(f"kernel_tuner.strategies.{strategy}")._options
        assert set(options) <= set(known), strategy  # Kernel Tuner 1.5 would ignore a misspelt one
        assert low <= score <= high and low <= mid <= high and n > 1
