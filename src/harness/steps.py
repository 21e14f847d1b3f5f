"""What a run does besides tuning its tasks, chosen by what its target measures:

- one objective: each task's best-so-far curve (:class:`~tunebench.harness.observers.SearchCurve`);
  on a target that compiles whole models (``Target.end_to_end``), the end-to-end step after the last
  task (:mod:`tunebench.harness.e2e`);
- several objectives: each task's hypervolume / ADRS curves and final values, the run's means
  (:mod:`tunebench.harness.fronts`);
- graph schedules (``TargetInfo.graph_schedules``: ``target=memory``): the run's memory metrics over its
  tasks; on any one-objective target, the target's own run metrics (:class:`TargetMetricsStep`).

A step gives observers to each task's loop, adds to the task's ``tasks.json`` entry, and works once
all tasks are tuned; :func:`run_steps` picks them from the target's facts, never its name.
"""

from __future__ import annotations

from tunebench.harness.observers import Observer, SearchCurve


class RunStep:
    """One thing a run does around its tasks; every hook is optional."""

    artifacts: list[str] = []  # run-folder files logged as MLflow artifacts at the end

    def task_observers(self, task, method, tracker, run_dir: str) -> list[Observer]:
        """Observers of ``task``'s loop (after the record writer and the history feed)."""
        return []

    def task_summary(self) -> dict:
        """Entries added to the task's ``tasks.json`` entry once it is tuned."""
        return {}

    def finish(self, run) -> str | None:
        """After every task (``run``: the :class:`~tunebench.harness.tuning.RunContext`); returns the
        text of an error that fails the run once its files are written, or None."""
        return None


class CurveStep(RunStep):
    """The best-so-far latency and GFLOPS of each task's search."""

    def task_observers(self, task, method, tracker, run_dir: str) -> list[Observer]:
        return [SearchCurve(tracker, task)]


class FrontStep(RunStep):
    """Several objectives: hypervolume and ADRS curves, each task's front, the run's means."""

    def __init__(self, target):
        from tunebench.harness.fronts import FrontMetrics

        self.metrics = FrontMetrics(target)
        self.artifacts = self.metrics.artifacts
        self._curve = None

    def task_observers(self, task, method, tracker, run_dir: str) -> list[Observer]:
        self._curve = self.metrics.observer(task, tracker, run_dir, method.learned_set)
        return [self._curve]

    def task_summary(self) -> dict:
        return {"fpga": self._curve.summary}

    def finish(self, run) -> str | None:
        self.metrics.log_run(run.tracker)
        run.tracker.flush()
        return None


class EndToEndStep(RunStep):
    """The whole model (or each single operator) with each task's best schedule, against the baselines."""

    def __init__(self, imported):
        self.imported = imported

    def finish(self, run) -> str | None:
        from tunebench.harness.e2e.step import model_latency, operator_latencies

        run.protocol.wait_if_busy("the end-to-end step")
        cfg = run.cfg
        entries = run.totals.summaries  # the tasks.json entries, given each task's kernel choice
        if self.imported is None:
            error = operator_latencies(cfg.e2e, run.tasks, run.totals.best, run.target, run.tracker, entries=entries)
        else:
            error = model_latency(cfg.e2e, cfg.model.name, self.imported, run.tasks, run.totals.best, run.target,
                                  run.tracker, entries=entries)
        run.tracker.flush()
        return error


class TargetMetricsStep(RunStep):
    """The target's numbers of each task's best (:meth:`Target.best_metrics`) summed up by the target as run
    metrics (:meth:`Target.run_metrics`: ``target=memory``'s peaks and traffic, ``target=accel``'s energy),
    once every task has a best."""

    def __init__(self, target):
        self.target = target

    def finish(self, run) -> str | None:
        rows = [(t, self.target.best_metrics(t, run.totals.best[t.id])) for t in run.tasks if t.id in run.totals.best]
        if rows and len(rows) == len(run.tasks) and all(r for _, r in rows):  # every task tuned
            for key, value in self.target.run_metrics(rows, run.totals.summaries).items():
                run.tracker.metric(key, value)
            run.tracker.flush()
        return None


def run_steps(cfg, target, imported) -> list[RunStep]:
    """The steps of a run on ``target`` (module docstring)."""
    if target.info.graph_schedules:
        return [TargetMetricsStep(target)]
    if target.info.multi_objective:
        return [FrontStep(target)]
    steps: list[RunStep] = [CurveStep(), TargetMetricsStep(target)]
    if cfg.e2e.enabled and target.end_to_end:
        steps.append(EndToEndStep(imported))
    return steps
