"""What a run does besides tuning its tasks, chosen by what its target measures:

- one objective: each task's best-so-far curve (:class:`~tunebench.harness.observers.SearchCurve`);
- several objectives: each task's hypervolume / ADRS curves and final values, the run's means
  (:mod:`tunebench.harness.fronts`);
- graph schedules (``TargetInfo.graph_schedules``: ``target=memory``): the run's memory metrics over its
  tasks; on any one-objective target, the target's own run metrics (:class:`TargetMetricsStep`);
- then the target's own steps (:class:`~tunebench.targets.capabilities.HasRunSteps`: on a TVM target the
  end-to-end step after the last task, :mod:`tunebench.targets.tvm.e2e`).

A step (:class:`~tunebench.targets.base.RunStep`) gives observers to each task's loop, adds to the task's ``tasks.json`` entry, and works once
all tasks are tuned; :func:`run_steps` picks them from the target's facts, never its name.
"""

from __future__ import annotations

from tunebench.harness.observers import Observer, SearchCurve
from tunebench.targets.base import RunStep
from tunebench.targets.capabilities import HasRunSteps, ReportsMetrics


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


class TargetMetricsStep(RunStep):
    """The target's numbers of each task's best summed up by the target as run metrics (a target that
    :class:`~tunebench.targets.capabilities.ReportsMetrics`: ``target=memory``'s peaks and traffic, ``target=accel``'s energy),
    once every task has a best."""

    def __init__(self, target):
        self.target = target

    def finish(self, run) -> str | None:
        if not isinstance(self.target, ReportsMetrics):
            return None
        rows = [(t, self.target.best_metrics(t, run.totals.best[t.id])) for t in run.tasks if t.id in run.totals.best]
        if rows and len(rows) == len(run.tasks) and all(r for _, r in rows):  # every task tuned
            for key, value in self.target.run_metrics(rows, run.totals.summaries).items():
                run.tracker.metric(key, value)
            run.tracker.flush()
        return None


def run_steps(cfg, target, imported) -> list[RunStep]:
    """The steps of a run on ``target`` (module docstring): the harness's, then the target's own."""
    if target.info.graph_schedules:
        steps: list[RunStep] = [TargetMetricsStep(target)]
    elif target.info.multi_objective:
        steps = [FrontStep(target)]
    else:
        steps = [CurveStep(), TargetMetricsStep(target)]
    return steps + (target.run_steps(cfg, imported) if isinstance(target, HasRunSteps) else [])
