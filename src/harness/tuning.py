"""Tuning one task of a run: its resumed measurements, the observers of its loop, the loop itself,
then the protocol's steps (calibration around it, re-timing, output checks) and its metrics.

A resumed task that an earlier attempt finished (its ``tasks.json`` entry is there) and that has
nothing left to measure keeps that attempt's result: no calibration, re-timing, checks or metrics again.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np

from tunebench.harness.loop import tune_task
from tunebench.harness.metrics import (
    RunTotals,
    log_task_metrics,
    note_unchecked,
    task_metrics,
    task_summary,
    time_split,
)
from tunebench.harness.observers import HistoryFeed, ProgressRow, RecordWriter
from tunebench.harness.run_folder import append_checks, write_tasks_json
from tunebench.methods import Method, make_method
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    """Everything the tasks of one run are tuned with (built and checked before the run started)."""

    cfg: object  # the typed ExperimentConfig
    target: object
    tasks: list[Task]
    tracker: object
    history: object
    protocol: object = None
    progress: object = None
    records: object = None
    run_dir: str = ""
    steps: list = field(default_factory=list)
    totals: RunTotals = field(default_factory=RunTotals)
    entries: dict = field(default_factory=dict)  # task id -> its tasks.json entry (an earlier attempt's until replaced)


def task_rng(seed: int, task: Task) -> np.random.Generator:
    """Each task gets its own generator from (seed, task id): repeatable, independent of task order."""
    return np.random.default_rng([int(seed), int(task.id[:8], 16)])


def prior_measurements(task: Task, recs: list[dict]) -> tuple[list[Measurement], list[dict]]:
    """A resumed task's earlier measurements and the records they came from; a record that does not
    fit the task's space is skipped (logged with its trial number), never a crash."""
    out, kept = [], []
    for r in recs:
        try:
            out.append(Measurement.from_record(r, task.space))
            kept.append(r)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("task %s: record of trial %s skipped (%s)", task.name, r.get("trial"), exc)
    return out, kept


def _observers(run: RunContext, task: Task, method: Method, row, prior_recs: list[dict]) -> list:
    """What watches a task's loop, in call order: its records, the run's history (when the task ends),
    the run steps' observers (curves), and its progress row."""
    writer = RecordWriter(run.records, task, prior_recs)
    steps = [o for s in run.steps for o in s.task_observers(task, method, run.tracker, run.run_dir)]
    return [writer, HistoryFeed(run.history, task, writer), *steps, ProgressRow(run.progress, row)]


def run_task(run: RunContext, task: Task, prior_recs: list[dict]) -> None:
    """One task of a run: its search loop (:func:`~tunebench.harness.loop.tune_task`), then its protocol
    steps (calibration, re-timing, checks), metrics and records."""
    cfg, protocol = run.cfg, run.protocol
    prior, prior_recs = prior_measurements(task, prior_recs)
    row = run.progress.start_task(task, cfg.budget.trials_per_task, prior)
    method = make_method(cfg.method)
    observers = _observers(run, task, method, row, prior_recs)
    earlier = run.entries.get(task.id)
    stats0 = dict(run.target.stats)
    t0 = time.monotonic()
    pre = None if earlier else protocol.before_task(f"task {task.name}")
    protocol_s = time.monotonic() - t0
    result = tune_task(task, method, run.target, cfg.budget, task_rng(cfg.seed, task), prior=prior,
                       history=run.history, observers=observers)
    if earlier and len(result.measurements) == len(prior) == earlier.get("trials"):
        _keep_earlier(run, task, result, earlier, row)
        return
    t0 = time.monotonic()
    after = protocol.after_task(pre)
    best, checks, retimed = protocol.final_best(result, cfg.check_correctness)
    protocol_s += time.monotonic() - t0
    tags = protocol.warn_if_noisy(task, best, after)
    if tags:
        run.tracker.set_tags(tags)
    metrics = task_metrics(task, result, best, checks, cfg.check_correctness, protocol, (pre, after))
    metrics.update(time_split(run.target.stats, stats0))
    log_task_metrics(run.tracker, task, metrics, len(result.measurements), run.totals)
    run.progress.finish_task(row, result, best, protocol_s)
    run.totals.add(task, result, best)
    summary = task_summary(task, result, best, checks, retimed, metrics)
    for step in run.steps:
        summary.update(step.task_summary())
    append_checks(run.run_dir, checks)
    _finish(run, task, summary)


def _finish(run: RunContext, task: Task, summary: dict) -> None:
    """The task's ``tasks.json`` entry joins the run's totals and the file (rewritten after every task,
    so that a run stopped later keeps it)."""
    run.totals.summaries.append(summary)
    run.entries[task.id] = summary
    write_tasks_json(run.run_dir, [run.entries[t.id] for t in run.tasks if t.id in run.entries])


def _keep_earlier(run: RunContext, task: Task, result, summary: dict, row) -> None:
    """A resumed task with nothing left to measure: the earlier attempt's best, checks and metrics stand."""
    best = earlier_best(result, summary)
    check = summary.get("check") or {}
    if check.get("status") == "unchecked":
        note_unchecked(run.tracker, task, run.totals)
    if best is not None and run.protocol.timed and summary.get("best_noisy"):
        run.protocol.n_noisy_tasks += 1
    log.info("task %s: nothing left to measure; the result of an earlier attempt is kept (no re-timing)", task.name)
    run.progress.finish_task(row, result, best)
    run.totals.add(task, result, best)
    _finish(run, task, summary)


def earlier_best(result, summary: dict) -> Measurement | None:
    """The reported best of an earlier attempt (``tasks.json`` entry ``summary``): its measurement among
    ``result``'s, with the re-timed latency when the entry has one."""
    trial = summary.get("best_trial")
    best = next((m for m in result.measurements if m.trial == trial), None) if trial is not None else None
    if best is None or not summary.get("retimed"):
        return best
    latency_s, lat_min = summary["best_latency_ms"] / 1e3, summary.get("best_latency_min_ms")
    return dataclasses.replace(best, gflops=summary["best_gflops"],
                               latency_min_s=lat_min / 1e3 if lat_min is not None else math.inf,
                               objectives={"latency_s": latency_s}, noisy=bool(summary.get("best_noisy")))
