"""Progress display: one rich progress row per task (trials, best GFLOPS, errors) plus a log line
per finished task (so that non-interactive runs, e.g. CI or a sweep, still show progress)."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

log = logging.getLogger("tunebench")


class TuningProgress:
    """Context manager showing the tasks of one run.

    Args:
        n_tasks: number of tasks in the run.
        enabled: False turns the live display off (log lines remain).
    """

    def __init__(self, n_tasks: int, enabled: bool = True):
        self.n_tasks = n_tasks
        self.console = Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self._progress = Progress(
            TextColumn("[bold]{task.description}", justify="left"), BarColumn(bar_width=24),
            MofNCompleteColumn(), TextColumn("best {task.fields[best]:>9} GFLOPS"),
            TextColumn("errors {task.fields[errors]}"), TimeElapsedColumn(),
            console=self.console, disable=not self.enabled, transient=False)
        self._done = 0

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        self._progress.__exit__(*exc)

    def start_task(self, task, trials: int, prior) -> int:
        desc = f"[{self._done + 1}/{self.n_tasks}] {task.name[:40]}"
        best = max((m.gflops for m in prior if m.valid), default=0.0)
        return self._progress.add_task(desc, total=trials, completed=len(prior), best=f"{best:.1f}",
                                       errors=sum(not m.valid for m in prior))

    def update(self, row: int, result) -> None:
        if not self.enabled:  # no live display: nothing to refresh (the best is a pass over every measurement)
            return
        best = max((m.gflops for m in result.measurements if m.valid), default=0.0)
        self._progress.update(row, completed=len(result.measurements), best=f"{best:.1f}", errors=result.n_invalid)

    def finish_task(self, row: int, result, best, protocol_s: float | None = None) -> None:
        """The task's log line: trials, search clock, where the time went (the builds' worker seconds,
        which overlap when built in parallel, the device's seconds, and the protocol's steps after the
        search: calibration, re-timing, output check), its best and why it stopped."""
        self.update(row, result)
        self._done += 1
        text = _best_text(best)
        build = sum(m.build_s for m in result.measurements)
        device = sum(m.run_s for m in result.measurements)
        spent = f"builds {build:.1f} s of worker time, device {device:.1f} s"
        if protocol_s is not None:
            spent += f"; then the protocol {protocol_s:.1f} s"
        log.info("task %d/%d %s: %d trials (%d invalid) in %.1f s (%s) -> %s [%s]", self._done, self.n_tasks,
                 result.task.name, len(result.measurements), result.n_invalid, result.search_s, spent, text,
                 result.stop_reason)


def _best_text(best) -> str:
    """A task's best for the log line: its latency and GFLOPS, or its objectives where latency is not one
    of them (``target=memory``: ``peak_bytes``)."""
    if best is None:
        return "no valid, output-checked config"
    if best.objectives and "latency_s" not in best.objectives and "delay_s" not in best.objectives:
        return ", ".join(f"{k} {v:g}" for k, v in best.objectives.items())
    return f"{best.latency_s * 1e3:.4f} ms, {best.gflops:.1f} GFLOPS"
