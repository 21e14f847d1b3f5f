"""The methodology score ([Willemsen-FGCS24]; :mod:`tunebench.protocol.methodology`) of the leaderboard's
groups whose every configuration was measured beforehand: runs on ``target=replay``, whose space (its valid
latencies and the seconds each configuration cost) is read from the measured-space file of the run's saved
``model.path``.

Per method of such a group: the score over evaluations (1 .. the group's largest trial count) and over
search time (the replay clock, from one mean evaluation to the median over the group's runs of their final
clock, 100 points), mean over seeds with a 95 % bootstrap interval; over several spaces (runs of the same
method on different measured spaces), the mean of the spaces' standardised curves, seeds matched by seed
number. Figures: the mean standardised curve of each method over evaluations and over time, with the band
of its seeds' 2.5-97.5 percentiles.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import yaml

from tunebench.protocol.methodology import (
    Score,
    SpaceStats,
    baseline_over_fevals,
    baseline_over_time,
    curve_on_fevals,
    curve_on_time,
    score,
)
from tunebench.report.curves import record_score

SCORE_COLUMNS = tuple(f"method_score_{x}_{s}" for x in ("evals", "time") for s in ("mean", "ci_low", "ci_high"))
TIME_POINTS = 100


@dataclass
class RunCurve:
    """One run's best-so-far values per evaluation and the replay clock at each, on one space."""

    method: str
    seed: str
    space: str
    values: np.ndarray
    times: np.ndarray


def replay_space(saved: dict, cache: dict) -> tuple[str, SpaceStats] | None:
    """The measured space of a run's saved config (``target=replay``), or None for any other run."""
    from tunebench.config.load import SavedRun
    from tunebench.datasets.space_file import read_measured

    run = SavedRun.read(saved)
    path = run.model_config.get("path")
    if run.target_kind != "replay" or not isinstance(path, str):
        return None
    if path not in cache:
        measured = read_measured(path)
        cache[path] = (measured.digest, measured.stats())
    return cache[path]


def run_curve(run: dict, records: list[dict], space: str) -> RunCurve | None:
    """The best-so-far curve of a run's records on ``space`` (its one task), in trial order."""
    recs = sorted((r for r in records if r.get("task_id") == space), key=lambda r: r["trial"])
    if not recs:
        return None
    values = [record_score(r) if r.get("valid") else math.inf for r in recs]
    best = np.minimum.accumulate(np.array([math.inf if v is None else v for v in values], dtype=np.float64))
    times = np.array([float(r.get("search_s") or 0.0) for r in recs])
    return RunCurve(str(run["method"]), str(run["seed"]), space, best, times)


def load_curves(group: pd.DataFrame, files) -> tuple[list[RunCurve], dict[str, SpaceStats]]:
    """The replay runs' curves of a group and their spaces (none: not a replay group)."""
    curves, spaces, cache = [], {}, {}
    for run in group.to_dict("records"):
        cfg_path = files.path(run, "config.yaml")
        if not cfg_path:
            continue
        with open(cfg_path) as fh:
            found = replay_space(yaml.safe_load(fh) or {}, cache)
        loaded = files.load(run) if found else None
        if not loaded:
            continue
        curve = run_curve(run, loaded[0], found[0])
        if curve is not None:
            curves.append(curve)
            spaces[found[0]] = found[1]
    return curves, spaces


def _ranges(curves: list[RunCurve], spaces: dict[str, SpaceStats]) -> tuple[np.ndarray, np.ndarray | None]:
    budget = max(len(c.values) for c in curves)
    tpf = max(s.time_per_feval for s in spaces.values())
    end = float(np.median([c.times[-1] for c in curves]))
    grid = np.linspace(tpf, end, TIME_POINTS) if math.isfinite(tpf) and end > tpf else None
    return np.arange(1, budget + 1), grid


def method_scores(curves: list[RunCurve], spaces: dict[str, SpaceStats], fevals: np.ndarray,
                  grid: np.ndarray | None) -> dict[str, dict[str, Score]]:
    """Per method: its :class:`Score` over the evaluations ``fevals`` (``evals``) and over the time ``grid``
    (``time``, when there is one: the spaces recorded their seconds); seeds matched across spaces by seed
    number."""
    order = sorted(spaces)
    base_f = [baseline_over_fevals(spaces[s], fevals) for s in order]
    base_t = [baseline_over_time(spaces[s], grid) for s in order] if grid is not None else None
    out: dict[str, dict[str, Score]] = {}
    for method in sorted({c.method for c in curves}):
        by_seed: dict[str, dict[str, RunCurve]] = {}
        for c in curves:
            if c.method == method:
                by_seed.setdefault(c.seed, {})[c.space] = c
        complete = [runs for runs in by_seed.values() if len(runs) == len(order)]
        if not complete:
            continue
        out[method] = {"evals": score([[curve_on_fevals(r[s].values, len(fevals)) for s in order] for r in complete],
                                      base_f, [spaces[s] for s in order])}
        if base_t is not None:
            out[method]["time"] = score([[curve_on_time(r[s].times, r[s].values, grid) for s in order]
                                         for r in complete], base_t, [spaces[s] for s in order])
    return out


def add_scores(table: pd.DataFrame, runs: pd.DataFrame, files) -> dict[tuple[str, str], dict]:
    """Fill the :data:`SCORE_COLUMNS` of ``table``'s rows in replay groups; returns per group the scores and
    the ranges for :func:`score_figure`."""
    for col in SCORE_COLUMNS:
        if col not in table:
            table[col] = math.nan
    found = {}
    for (model, target), group in runs.groupby(["model", "target"], sort=True):
        curves, spaces = load_curves(group, files)
        if not curves:
            continue
        ranges = _ranges(curves, spaces)
        scores = method_scores(curves, spaces, *ranges)
        found[(model, target)] = {"scores": scores, "ranges": ranges, "n_spaces": len(spaces)}
        for method, by_axis in scores.items():
            rows = (table["model"] == model) & (table["target"] == target) & (table["method"] == method)
            for axis, s in by_axis.items():
                table.loc[rows, [f"method_score_{axis}_{k}" for k in ("mean", "ci_low", "ci_high")]] = \
                    [s.mean, s.ci_low, s.ci_high]
    return found


def score_figure(model: str, target: str, found: dict):
    """The methods' mean standardised curves over evaluations (left) and over time (right)."""
    from matplotlib.figure import Figure

    fevals, grid = found["ranges"]
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for i, (method, by_axis) in enumerate(sorted(found["scores"].items())):
        for ax, axis, x in ((axes[0], "evals", fevals), (axes[1], "time", grid)):
            if axis in by_axis and x is not None:
                s, color = by_axis[axis], f"C{i % 10}"
                ax.plot(x, s.curve, color=color, lw=2.0, label=f"{method}: {s.mean:.3f}")
                if len(s.seed_curves) >= 2:
                    with warnings.catch_warnings():  # an undefined point (all NaN) stays blank
                        warnings.simplefilter("ignore", RuntimeWarning)
                        low, high = np.nanpercentile(s.seed_curves, [2.5, 97.5], axis=0)
                    ax.fill_between(x, low, high, color=color, alpha=0.15, lw=0)
    axes[0].set_xlabel("function evaluations")
    axes[1].set_xlabel("search time (replay clock) [s]")
    axes[0].set_ylabel("performance relative to random (0) and the optimum (1)")
    for ax in axes:
        ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{model} on {target}: methodology score [Willemsen-FGCS24], mean over seeds and "
                 f"{found['n_spaces']} space(s)")
    return fig
