"""The performance score of [Willemsen-FGCS24] ("A methodology for comparing optimization algorithms for
auto-tuning"; its package ``autotuning-methodology`` 1.1.0): a tuning method's best-so-far curve on a
search space whose every configuration is measured, placed between a calculated random-search baseline (0)
and the space's optimum (1), over function evaluations or over search time, averaged over the range and
over spaces.

Definitions, for a minimized objective over the space's N valid values ``v`` sorted from worst to best
(``d[0]`` the worst, ``d[N-1]`` the optimum):

- **calculated random baseline** at M evaluations: ``d[min(N - 1, round(M (N + 1) / (M + 1)))]``, the value
  at the expected rank of the best of M draws without replacement (the package's
  ``RandomSearchCalculatedBaseline`` without NaN, not simulated); over time, at
  ``M = max(1, round(t / time_per_feval))`` with ``time_per_feval`` the space's mean seconds per
  configuration (the package additionally smooths the time curve by monotone interpolation; here it is
  used as computed);
- **standardised curve**: ``(curve - baseline) / (optimum - baseline)``: 0 where the method is as good as
  the random baseline, 1 at the optimum, negative below random;
- **score**: the mean of the standardised curve over the range (evaluations 1..B, or a time grid); over
  several spaces, the mean of their standardised curves (the paper's aggregate); over seeds, the mean of
  the seeds' scores with a 95 % bootstrap interval (seeds as the resampling unit).

Where the baseline reaches the optimum the standardised value is undefined (0/0); such points are left out
of the mean, and a range where it reaches the optimum everywhere has no score (NaN).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tunebench.protocol.stats import bootstrap_ci


@dataclass(frozen=True)
class SpaceStats:
    """What the score needs of a measured space: its valid objective values (any order; invalid configs
    left out) and the mean seconds one configuration costs to evaluate (build + run)."""

    values: np.ndarray
    time_per_feval: float

    @classmethod
    def of(cls, values: Sequence[float], seconds: Sequence[float] | None = None) -> SpaceStats:
        v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
        if not len(v):
            raise ValueError("a space without a valid measured value has no score")
        tpf = float(np.mean(seconds)) if seconds is not None and len(seconds) else math.nan
        return cls(values=v, time_per_feval=tpf)

    @property
    def optimum(self) -> float:
        return float(self.values.min())


def baseline_over_fevals(space: SpaceStats, fevals: Sequence[int]) -> np.ndarray:
    """The calculated random-search baseline at each number of evaluations (module docstring)."""
    worst_first = np.sort(space.values)[::-1]
    n = len(worst_first)
    m = np.asarray(fevals, dtype=np.int64)
    if np.any(m < 1):
        raise ValueError("evaluation counts must be at least 1")
    # np.round rounds halves to even, as the package's Python round()
    index = np.minimum(n - 1, np.round(m * (n + 1) / (m + 1)).astype(np.int64))
    return worst_first[index]


def baseline_over_time(space: SpaceStats, seconds: Sequence[float]) -> np.ndarray:
    """The baseline at each search time: at ``max(1, round(t / time_per_feval))`` evaluations."""
    if not math.isfinite(space.time_per_feval) or space.time_per_feval <= 0:
        raise ValueError("the space has no recorded seconds per configuration: no baseline over time")
    fevals = np.maximum(np.round(np.asarray(seconds, dtype=np.float64) / space.time_per_feval), 1).astype(np.int64)
    return baseline_over_fevals(space, fevals)


def standardised(curve: Sequence[float], baseline: np.ndarray, optimum: float) -> np.ndarray:
    """``(curve - baseline) / (optimum - baseline)`` (NaN where the baseline is at the optimum)."""
    c = np.asarray(curve, dtype=np.float64)
    den = optimum - baseline
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, (c - baseline) / np.where(den != 0, den, 1.0), np.nan)


def curve_on_fevals(best_so_far: Sequence[float], budget: int) -> np.ndarray:
    """A run's best-so-far values at evaluations 1..budget; a run that ended early holds its last value;
    before its first valid value: +inf (worse than any baseline)."""
    c = np.asarray(best_so_far, dtype=np.float64)[:budget]
    if len(c) < budget:
        c = np.concatenate([c, np.full(budget - len(c), c[-1] if len(c) else np.inf)])
    return c


def curve_on_time(times: Sequence[float], best_so_far: Sequence[float], grid: Sequence[float]) -> np.ndarray:
    """A run's best so far at each time of ``grid`` (``times``: the search clock at each evaluation,
    ascending); +inf before its first evaluation."""
    t = np.asarray(times, dtype=np.float64)
    c = np.asarray(best_so_far, dtype=np.float64)
    idx = np.searchsorted(t, np.asarray(grid, dtype=np.float64), side="right") - 1
    return np.where(idx >= 0, c[np.clip(idx, 0, len(c) - 1)], np.inf)


def _nanmean(rows: np.ndarray, axis: int | None = None):
    """``np.nanmean`` without its warning for an all-NaN column (an undefined point stays NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(rows, axis=axis)


@dataclass(frozen=True)
class Score:
    """A method's score: the mean over seeds, its 95 % bootstrap interval, the per-seed scores, the mean
    standardised curve over the range and each seed's (rows; for plots)."""

    mean: float
    ci_low: float
    ci_high: float
    per_seed: tuple[float, ...]
    curve: np.ndarray
    seed_curves: np.ndarray


def score(runs: Sequence[Sequence[np.ndarray]], baselines: Sequence[np.ndarray], spaces: Sequence[SpaceStats],
          seed: int | None = 0) -> Score:
    """The score of a method from its runs.

    Args:
        runs: per seed, one curve per space (each on the range of that space's baseline: values at
            evaluations 1..B from :func:`curve_on_fevals`, or on a time grid from :func:`curve_on_time`).
        baselines: per space, the baseline on the same range.
        spaces: the spaces.

    A curve point before the run's first valid value (+inf) is counted at the space's worst value.
    """
    per_seed, curves = [], []
    for run in runs:
        stds = []
        for c, b, s in zip(run, baselines, spaces, strict=True):
            c = np.where(np.isfinite(c), c, s.values.max())
            stds.append(standardised(c, b, s.optimum))
        agg = _nanmean(np.vstack(stds), axis=0) if len(stds) > 1 else stds[0]
        curves.append(agg)
        per_seed.append(float(_nanmean(agg)) if np.any(np.isfinite(agg)) else math.nan)
    values = np.array([v for v in per_seed if math.isfinite(v)])
    if not len(values):
        nan = np.full(len(baselines[0]), np.nan)
        return Score(math.nan, math.nan, math.nan, tuple(per_seed), nan, np.vstack(curves))
    low, high = bootstrap_ci(values, seed=seed) if len(values) >= 2 else (math.nan, math.nan)
    rows = np.vstack(curves)
    return Score(float(values.mean()), float(low), float(high), tuple(per_seed), _nanmean(rows, axis=0), rows)
