"""method=timeloop_random: Timeloop's random-pruned mapper ([Parashar-ISPASS19]) on a mapspace, with a
synthetic objective (no ZigZag): its termination, its walk of the mapspace, its reproducibility."""

from __future__ import annotations

import math

import numpy as np

from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.targets.accel.settings import AccelSettings
from tunebench.targets.accel.target import make_mapspace
from tunebench.task import Task
from tunebench.testing.fakes import FakeTarget

MATMUL = {"batch": 64, "in_features": 128, "out_features": 512}
SMALL = AccelSettings(scratchpad_kib=16, accumulator_kib=4)  # most of the raw mapspace does not fit


def run(objective, settings=SMALL, trials=4000, seed=0, **knobs):
    ms = make_mapspace(settings, MATMUL)
    task = Task(id="tl_map", name="tl", kind="dense", mod=ms, shape={}, flops=1, space=ms.space)
    target = FakeTarget(objective(ms), batch_size=4, details={"mapspace": True})
    method = make_method({"name": "timeloop_random", **knobs})
    result = tune_task(task, method, target, Budget(trials), np.random.default_rng(seed))
    return ms, method, result


def flat(value):
    """The same value for every mapping that fits (invalid: inf): no valid mapping after the first improves."""
    return lambda ms: (lambda c: value if ms.fits(c) else math.inf)


def test_victory_after_n_valid_mappings_without_improvement():
    ms, method, result = run(flat(1.0), victory_condition=25)
    report = result.report
    assert report["stop"] == "victory" and result.stop_reason == "exhausted"
    assert report["valid_mappings"] == 26  # the first improves, the 25 after it do not
    assert len(result.measurements) - result.n_invalid + report["revisits"] >= 26
    assert report["last_improvement"] == next(i + 1 for i, m in enumerate(result.measurements) if m.valid)


def test_timeout_after_n_invalid_mappings_in_a_row():
    _, method, result = run(lambda ms: (lambda c: math.inf), timeout=40)
    assert result.report["stop"] == "timeout" and result.report["iterations"] == 40
    assert result.report["if_visits"] >= 40  # an invalid mapping ends its index factorization's visit


def test_the_budget_caps_a_search_without_victory():
    _, _, result = run(flat(1.0), trials=300, victory_condition=0)
    assert result.report["stop"] == "budget" and len(result.measurements) == 300


def test_walk_prunes_permutations_and_skips_a_bad_factorization():
    """A visit keeps one index factorization for at most 16 mappings, moves on after an invalid one, keeps the
    register level's canonical order, never measures a mapping twice."""
    ms, method, result = run(flat(1.0), trials=600, victory_condition=0)
    configs = [m.config for m in result.measurements]
    assert len({c.index for c in configs}) == len(configs)
    visit, prev_factors, prev_valid = 0, None, True
    for c, m in zip(configs, result.measurements):
        factors = ms.factors(c)
        for d in ms.dims:  # a complete tiling of every dimension
            assert math.prod(f[d] for f in factors) == ms.temporal[d]
        assert c["order_weight_reg"] == ms.dims  # canonical innermost order
        if factors == prev_factors:
            assert prev_valid, "an invalid mapping must end its factorization's visit"
            visit += 1
            assert visit < 16
        else:
            visit = 0
        prev_factors, prev_valid = factors, m.valid
    assert 0 < result.n_invalid < len(configs)


def test_seeded_runs_are_reproducible():
    def indices(seed):
        _, _, result = run(flat(1.0), trials=200, seed=seed, victory_condition=0)
        return [m.config.index for m in result.measurements]

    assert indices(3) == indices(3)
    assert indices(3) != indices(4)
