"""Observers of the tuning loop: each does one thing with what :func:`~tunebench.harness.loop.tune_task`
measures (write records, log the best-so-far curve, update the progress row, ...).

``tune_task(..., observers=[...])`` calls, in list order, ``task_started`` once, ``batch_measured``
after every batch (before the method is told it, so a record is on disk before anything can fail) and
``task_finished`` once. Every hook is optional: :class:`Observer` implements them as no-ops.
"""

from __future__ import annotations

import math


class Observer:
    """One consumer of a task's measurements; override the hooks you need."""

    def task_started(self, result) -> None:
        """The loop is about to ask for the first batch (``result`` holds the prior measurements)."""

    def batch_measured(self, batch: list, result) -> None:
        """``batch`` was measured and appended to ``result.measurements``."""

    def task_finished(self, result) -> None:
        """The loop ended (``result.stop_reason`` says why)."""


class RecordWriter(Observer):
    """Appends every measurement to the run's record file (flushed line by line); ``lines`` keeps the
    records written, so nothing converts a measurement a second time.

    Args:
        records: a :class:`~tunebench.record_file.RecordFile`.
        prior: the records of the task's resumed measurements (already in the file): the start of ``lines``.
    """

    def __init__(self, records, task, prior: list[dict] = ()):
        self.records, self.task = records, task
        self.lines: list[dict] = list(prior)

    def batch_measured(self, batch, result) -> None:
        for m in batch:
            self.lines.append(self.records.append(m, self.task))


class HistoryFeed(Observer):
    """Adds the task's records to the run's :class:`~tunebench.history.History` when the task ends,
    labelled with the role the method reports (later tasks of a transfer method learn from them)."""

    def __init__(self, history, task, writer: RecordWriter):
        self.history, self.task, self.writer = history, task, writer

    def task_finished(self, result) -> None:
        role = str(result.report.get("role", ""))
        self.history.add_task(self.task, self.writer.lines, role=role)


class SearchCurve(Observer):
    """The search's best-so-far latency and GFLOPS as MLflow metric histories (step = trial); on a target
    whose one objective is another (``target=accel``: energy per MAC), ``search_best_<objective>``."""

    def __init__(self, tracker, task):
        self.tracker, self.task = tracker, task

    def batch_measured(self, batch, result) -> None:
        start = len(result.measurements) - len(batch)
        names = next((list(m.objectives) for m in result.measurements if m.valid), [])
        other = names[0] if len(names) == 1 and names[0] != "latency_s" else None
        for m, best in zip(batch, result.best_so_far[start:]):
            if math.isfinite(best) and other:
                self.tracker.metric(f"{self.task.id}.search_best_{other}", best, m.trial)
            elif math.isfinite(best):
                self.tracker.metric(f"{self.task.id}.search_best_latency_ms", best * 1e3, m.trial)
                self.tracker.metric(f"{self.task.id}.search_best_gflops", self.task.flops / best / 1e9, m.trial)
        self.tracker.flush_due()


class ProgressRow(Observer):
    """Keeps the task's progress row (trials, best GFLOPS, errors) current."""

    def __init__(self, progress, row):
        self.progress, self.row = progress, row

    def batch_measured(self, batch, result) -> None:
        self.progress.update(self.row, result)


def notify(observers, hook: str, *args) -> None:
    """Call ``hook`` on every observer, in order."""
    for obs in observers:
        getattr(obs, hook)(*args)
