"""Curve math of the leaderboard plots: pure functions of record lines (no plotting, no store).

Model-level best so far (:func:`model_curve`)
    Tasks are tuned one after another, so a run's measurements form one sequence: task 1's trials,
    then task 2's, ... (order of ``tasks.json``, else of first appearance in the record file; trials
    in trial order). At each point k of that sequence the curve is ``L(k) = sum_i w_i * b_i(k)``,
    w_i the task's weight (occurrences in the model, from ``tasks.json``; 1 when unknown) and b_i(k)
    the best valid latency of task i among the measurements up to k -- or, for a task not reached
    yet (or with only invalid trials so far), its *first valid latency in the run*: the value it
    takes as soon as its search begins to count. The curve thus starts at k = 0 (every task at its
    first valid latency), never increases, and ends at sum_i w_i * best_i (the run's
    ``tasks_latency_ms`` when every best passed the output check). A run with a task that never got
    a valid measurement has no curve. x axes: cumulative trials k, and cumulative search seconds (the
    finished tasks' final clocks from ``tasks.json`` -- else their last record's ``search_s`` -- plus
    the current task's ``search_s``); both start at 0. :func:`median_curve` gives the pointwise
    median over seeds, each seed's curve held at its last value after it ends.

Fraction of the optimum (:func:`group_fractions`), after Kernel Tuner's benchmark methodology
[KT-Bench] (docs/REFERENCES.md), aggregated over a model's tasks
    Within one (model, target) group, a task's optimum is the best valid latency that any run of the
    group (every method, every seed) found for it. For one run and task, at per-task search time t
    (the records' ``search_s``: the task's own clock, from 0), ``fraction(t) = optimum / best valid
    latency of the run on the task up to t``; 0 before its first valid measurement, held at its last
    value after the task's clock ends. A run's curve is the mean of ``fraction(t)`` over the group's
    tasks that have an optimum (a task the run never measured validly counts 0); a method's line is
    the mean of its runs' curves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd


def record_score(rec: dict) -> float | None:
    """What a one-objective search minimized in a record: its only objective (``latency_s`` on targets that
    time kernels, ``energy_pj_per_mac`` on ``target=accel``), else its ``latency_s``
    (as :attr:`tunebench.task.Measurement.score`)."""
    objectives = rec.get("objectives") or {}
    if len(objectives) == 1:
        return float(next(iter(objectives.values())))
    return rec.get("latency_s")


def _valid(rec: dict) -> bool:
    return bool(rec.get("valid")) and record_score(rec) is not None


# ---------------------------------------------------------------- model-level best so far

def _task_sequence(records: list[dict], tasks: list[dict]) -> tuple[list[str], dict[str, list[dict]]]:
    """The tasks in tuning order and each task's records in trial order."""
    by_task: dict[str, list[dict]] = {}
    for rec in records:
        by_task.setdefault(rec["task_id"], []).append(rec)
    info = {t["id"]: t for t in tasks}
    order = [tid for tid in info if tid in by_task] + [tid for tid in by_task if tid not in info]
    for tid in order:
        by_task[tid].sort(key=lambda r: r["trial"])
    return order, by_task


def model_curve(records: list[dict], tasks: list[dict]) -> pd.DataFrame | None:
    """The run's model-level best-so-far curve (see the module docstring).

    Args:
        records: the run's record lines.
        tasks: the run's ``tasks.json`` (``id``, ``weight``, ``search_s``; may be empty).

    Returns:
        columns ``trials`` (cumulative; row 0 is the start, before any trial), ``seconds`` (cumulative
        search clock) and ``latency_ms``; None without records or when a task has no valid measurement.
    """
    order, by_task = _task_sequence(records, tasks)
    if not order:
        return None
    info = {t["id"]: t for t in tasks}
    best, weight = {}, {}
    for tid in order:
        first = next((r["latency_s"] for r in by_task[tid] if _valid(r)), None)
        if first is None:
            return None
        best[tid], weight[tid] = first, float(info.get(tid, {}).get("weight") or 1)
    total = sum(weight[t] * best[t] for t in order)
    rows, offset = [(0, 0.0, total * 1e3)], 0.0
    for tid in order:
        for rec in by_task[tid]:
            lat = rec.get("latency_s")
            if rec.get("valid") and lat is not None and lat < best[tid]:
                total += weight[tid] * (lat - best[tid])
                best[tid] = lat
            rows.append((len(rows), offset + float(rec.get("search_s") or 0.0), total * 1e3))
        final = info.get(tid, {}).get("search_s")
        offset += float(final) if final is not None else max(float(r.get("search_s") or 0.0) for r in by_task[tid])
    curve = pd.DataFrame(rows, columns=["trials", "seconds", "latency_ms"])
    curve["seconds"] = np.maximum.accumulate(curve["seconds"].to_numpy())
    return curve


def median_curve(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise median of step curves on the union of their x values; each curve holds its last value
    after its end and is left out before its start."""
    grid = np.unique(np.concatenate([np.asarray(x, float) for x, _ in curves]))
    values = np.full((len(curves), len(grid)), np.nan)
    for i, (x, y) in enumerate(curves):
        idx = np.searchsorted(np.asarray(x, float), grid, side="right") - 1
        ok = idx >= 0
        values[i, ok] = np.asarray(y, float)[idx[ok]]
    return grid, np.nanmedian(values, axis=0)


# ---------------------------------------------------------------- fraction of the optimum

def best_so_far(records: Iterable[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per task: the clock times of its valid measurements (ascending) and the best score
    (:func:`record_score`) up to each."""
    points: dict[str, list[tuple[float, float]]] = {}
    for rec in records:
        if _valid(rec):
            points.setdefault(rec["task_id"], []).append((float(rec.get("search_s") or 0.0), record_score(rec)))
    out = {}
    for tid, pts in points.items():
        t, lat = np.asarray(sorted(pts), dtype=float).T
        out[tid] = (t, np.minimum.accumulate(lat))
    return out


def task_optima(runs: Iterable[list[dict]]) -> dict[str, float]:
    """Per task: the best valid score (:func:`record_score`: latency in seconds, or the target's one
    objective) over all the runs' records."""
    best: dict[str, float] = {}
    for records in runs:
        for rec in records:
            if _valid(rec):
                best[rec["task_id"]] = min(best.get(rec["task_id"], math.inf), record_score(rec))
    return best


def noisy_optima(runs: Iterable[list[dict]], optima: dict[str, float]) -> list[str]:
    """Tasks whose optimum comes only from measurements marked ``"noisy": true``."""
    reached, clean = set(), set()
    for records in runs:
        for rec in records:
            tid = rec.get("task_id")
            if _valid(rec) and record_score(rec) == optima.get(tid):
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
