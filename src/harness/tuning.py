"""Tuning one task of a run: its resumed measurements, the observers of its loop, the loop itself,
then the protocol's steps (calibration around it, re-timing, output checks) and its metrics."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from tunebench.harness.loop import tune_task
from tunebench.harness.metrics import RunTotals, log_task_metrics, task_metrics, task_summary
from tunebench.harness.observers import HistoryFeed, ProgressRow, RecordWriter
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


def tune_one(run: RunContext, task: Task, prior_recs: list[dict]) -> None:
    """Tune one task, then its protocol steps (calibration, re-timing, checks) and metrics."""
    cfg, protocol = run.cfg, run.protocol
    prior, prior_recs = prior_measurements(task, prior_recs)
    row = run.progress.start_task(task, cfg.budget.trials_per_task, prior)
    method = make_method(cfg.method)
    observers = _observers(run, task, method, row, prior_recs)
    pre = protocol.before_task(f"task {task.name}")
    result = tune_task(task, method, run.target, cfg.budget, task_rng(cfg.seed, task), prior=prior,
                       history=run.history, observers=observers)
    after = protocol.after_task(pre)
    best, checks, retimed = protocol.final_best(result, cfg.check_correctness)
    protocol.warn_if_noisy(task, best, after)
    metrics = task_metrics(task, result, best, checks, cfg.check_correctness, protocol, (pre, after))
    log_task_metrics(run.tracker, task, metrics, len(result.measurements), run.totals)
    run.progress.finish_task(row, result, best)
    run.totals.add(task, result, best, checks)
    summary = task_summary(task, result, best, checks, retimed, metrics)
    for step in run.steps:
        summary.update(step.task_summary())
    run.totals.summaries.append(summary)
