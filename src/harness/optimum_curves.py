"""Fraction of the optimum reached vs search time, after the methodology of Kernel Tuner's benchmark
(Schoonhoven, van Werkhoven, Batenburg, "Benchmarking optimization algorithms for auto-tuning GPU
kernels", IEEE Transactions on Evolutionary Computation, 2022), aggregated over a model's tasks.

Within one (model, target) group, a task's optimum is the best valid latency that any run of the group
(every method, every seed) found for it. For one run and task, at per-task search time t (the
records' ``search_s``: the task's own clock, from 0), ``fraction(t) = optimum / best valid latency of
the run on the task up to t``; 0 before its first valid measurement, held at its last value after
the task's clock ends. A run's curve is the mean of ``fraction(t)`` over the group's tasks that have
an optimum (a task the run never measured validly counts 0); a method's line is the mean of its
runs' curves. Everything but :func:`plot_optimum` is a pure function of record lines.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np


def _valid(rec: dict) -> bool:
    return bool(rec.get("valid")) and rec.get("latency_s") is not None


def best_so_far(records: Iterable[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per task: the clock times of its valid measurements (ascending) and the best latency up to each."""
    points: dict[str, list[tuple[float, float]]] = {}
    for rec in records:
        if _valid(rec):
            points.setdefault(rec["task_id"], []).append((float(rec.get("search_s") or 0.0), float(rec["latency_s"])))
    out = {}
    for tid, pts in points.items():
        t, lat = np.asarray(sorted(pts), dtype=float).T
        out[tid] = (t, np.minimum.accumulate(lat))
    return out


def task_optima(runs: Iterable[list[dict]]) -> dict[str, float]:
    """Per task: the best valid latency over all the runs' records (seconds)."""
    best: dict[str, float] = {}
    for records in runs:
        for rec in records:
            if _valid(rec):
                best[rec["task_id"]] = min(best.get(rec["task_id"], math.inf), float(rec["latency_s"]))
    return best


def noisy_optima(runs: Iterable[list[dict]], optima: dict[str, float]) -> list[str]:
    """Tasks whose optimum comes only from measurements marked ``"noisy": true``."""
    reached, clean = set(), set()
    for records in runs:
        for rec in records:
            tid = rec.get("task_id")
            if _valid(rec) and float(rec["latency_s"]) == optima.get(tid):
                reached.add(tid)
                if not rec.get("noisy"):
                    clean.add(tid)
    return sorted(reached - clean)


def time_grid(runs: Iterable[list[dict]]) -> np.ndarray:
    """0 and every record's clock time, ascending and unique: where any curve may change or end."""
    times = [float(rec.get("search_s") or 0.0) for records in runs for rec in records]
    return np.unique(np.asarray([0.0, *times], dtype=float))


def fraction_curve(best: dict[str, tuple[np.ndarray, np.ndarray]], optima: dict[str, float],
                   grid: np.ndarray) -> np.ndarray:
    """One run's mean over the tasks of ``optimum / best so far`` at each time in ``grid``."""
    grid = np.asarray(grid, dtype=float)
    total = np.zeros(len(grid))
    for tid, optimum in optima.items():
        if tid not in best:
            continue  # never measured validly by this run: 0 throughout
        t, b = best[tid]
        idx = np.searchsorted(t, grid, side="right") - 1
        total += np.where(idx >= 0, optimum / b[np.maximum(idx, 0)], 0.0)
    return total / len(optima) if optima else total


def group_fractions(records_by_method: dict[str, list[list[dict]]]
                    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, float]]:
    """The time grid, per method an array (runs × grid) of run curves, and the task optima."""
    runs = [records for method_runs in records_by_method.values() for records in method_runs]
    optima, grid = task_optima(runs), time_grid(runs)
    fractions = {method: np.array([fraction_curve(best_so_far(r), optima, grid) for r in method_runs])
                 for method, method_runs in records_by_method.items()}
    return grid, fractions, optima


def plot_optimum(title: str, grid: np.ndarray, fractions: dict[str, np.ndarray], path: str) -> None:
    """One PNG: per method thin lines per seed and a thick line for their mean."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for i, (method, curves) in enumerate(sorted(fractions.items())):
        color = f"C{i % 10}"
        for y in curves:
            ax.plot(grid, y, color=color, lw=0.9, alpha=0.45, drawstyle="steps-post")
        ax.plot(grid, curves.mean(axis=0), color=color, lw=2.0, drawstyle="steps-post",
                label=f"{method} (mean of {len(curves)})")
    ax.set_xlabel("search time per task [s]")
    ax.set_ylabel("fraction of the optimum (mean over tasks)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.savefig(path, dpi=110)


def write_optimum_plot(model: str, target: str, records_by_method: dict[str, list[list[dict]]],
                       shown: set[str] | None, path: str) -> list[str]:
    """Plot the methods in ``shown`` (None: all) with optima over every method given; returns the
    tasks whose optimum comes only from noisy measurements."""
    grid, fractions, optima = group_fractions(records_by_method)
    runs = [records for method_runs in records_by_method.values() for records in method_runs]
    noisy = noisy_optima(runs, optima)
    title = (f"{model} on {target}: fraction of the optimum reached, mean over {len(optima)} tasks "
             "(thin: seeds, thick: mean)")
    if noisy:
        title += f"\noptimum of {len(noisy)} task(s) from measurements marked noisy"
    plot_optimum(title, grid, {m: f for m, f in fractions.items() if shown is None or m in shown}, path)
    return noisy
