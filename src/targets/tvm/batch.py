"""How the TVM targets measure a batch of configs: build in parallel, time one after another.

The build workers (``builder.n_parallel``) compile the batch's configs in parallel, without the
device; the runner worker times the built libraries one at a time under the device lock
(:mod:`tunebench.targets.tvm.timing`). Two ways to join the phases (``target.builder.overlap``):

- **one after the other** (CPUs' default): every config is built, then the lock is taken and the
  built ones are timed in the batch's order. A CPU kernel is timed on the cores the builders compile
  on: compiling meanwhile would slow it down, unseen by the noise check (the builders are our own
  processes, not foreign CPU).
- **overlapped** (GPUs' default): the lock is taken first (a wait for it is before any of the batch's
  work, so leaving it out of the search clock stays exact), the builds start, and each config is timed
  as soon as its build is done, while the others still compile. Configs are timed in the order their
  builds finish; the results come back in the batch's order. Only the batch's own builds overlap its
  timings: the next batch is asked for after this one is told, as every method's loop needs.

Either way a batch records :class:`BatchTimes` (``last_batch``) and adds to the target's ``stats``:
``build_phase_s`` (the batch's start to its last build's end), ``run_phase_s`` (the runner's timing
requests, one after another, with the cooldowns), of which ``upload_s`` (libraries sent to a remote
device; 0 locally) and ``retiming_s`` (noisy timings timed again); and ``overlap_s``: build plus run
phase minus the batch's wall time, the seconds the overlap saved.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace

from tunebench.errors import UserError
from tunebench.search_space import Config, TraceConfig
from tunebench.targets.base import static_invalid
from tunebench.targets.capabilities import StaticChecks
from tunebench.targets.tvm.messages import RunInput
from tunebench.targets.workers import TIMEOUT
from tunebench.task import Measurement, Outcome, Task


def failure_kind(error, otherwise: Outcome) -> Outcome:
    """The outcome of a build or run that failed with ``error``: a timeout, else ``otherwise``."""
    return Outcome.TIMEOUT if str(error).startswith(TIMEOUT) else otherwise


@dataclass
class BatchTimes:
    """Where one batch's time went. Times are seconds since the batch's start (``perf_counter`` ``t0``)."""

    t0: float
    overlap: bool
    build_ends: list[float] = field(default_factory=list)  # each build's end, in the order they finished
    runs: list[tuple[float, float]] = field(default_factory=list)  # each timing's (start, end) on the device
    wall_s: float = 0.0  # the batch's start to its last build's or timing's end

    def now(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def compile_s(self) -> float:
        """The build phase: the batch's start to its last build's end."""
        return max(self.build_ends, default=0.0)

    @property
    def run_s(self) -> float:
        """The device's busy seconds: the timings, one after another."""
        return sum(end - start for start, end in self.runs)

    @property
    def overlap_s(self) -> float:
        """Seconds saved by overlapping: build and run phase minus the wall time (0 one after the other)."""
        return max(0.0, self.compile_s + self.run_s - self.wall_s)


class BatchMeasure:
    """Mixin of :class:`~tunebench.targets.tvm.target.TVMTarget`: :meth:`measure` (module docstring)."""

    last_batch: BatchTimes | None = None

    @property
    def overlap(self) -> bool:
        """Time each config while the batch's others still compile (``builder.overlap``; null: on a GPU)."""
        chosen = self.settings.builder.overlap
        return bool(self.gpu if chosen is None else chosen)

    def measure(self, task: Task, configs: list[Config | TraceConfig], fidelity: str | None = None) -> list[Measurement]:
        """Build and time ``configs`` of ``task``; one :class:`Measurement` per config, in order.
        ``fidelity``: None or "hw" (the only one)."""
        if fidelity not in (None, "hw"):
            raise UserError(f"fidelity={fidelity!r} is unknown for target {self.name}; valid: hw")
        self.start()
        results: list[Measurement | None] = [None] * len(configs)
        to_build = []
        for i, config in enumerate(configs):  # the loop screened them; a caller outside it is screened here
            err = self.static_check(task, config) if isinstance(self, StaticChecks) else None
            if err:
                results[i] = static_invalid(task, config, err)
            else:
                to_build.append(i)
        built = self._build_and_time(task, configs, to_build, results)
        for i, path in built:  # the fastest stay for the re-timing (:mod:`~tunebench.targets.tvm.libraries`)
            self.libraries.offer(task.id, configs[i], path, results[i].latency_s if results[i].valid else None)
        return [replace(m, cost_s=m.build_s + m.run_s) for m in results]  # type: ignore[union-attr]

    def _build_and_time(self, task: Task, configs: list, to_build: list[int], results: list) -> list[tuple[int, str]]:
        """Build ``configs[i]`` for each ``i`` of ``to_build`` and time the built ones into ``results``
        (overlapped or one phase after the other); returns the built ``(i, library path)``."""
        requests = [self._build_input(task, configs[i], self._library_path(task, configs[i])) for i in to_build]
        overlap = self.overlap and bool(requests)
        built, waiting = [], []
        with contextlib.ExitStack() as held:
            if overlap:
                held.enter_context(self.lock)
            times = BatchTimes(time.perf_counter(), overlap)
            for pos, (ok, res, wall) in self._builders.completed("build", requests,
                                                                  float(self.settings.builder.timeout_s)):
                times.build_ends.append(times.now())
                i = to_build[pos]
                if not ok:
                    results[i] = Measurement(task.id, configs[i], failure_kind(res, Outcome.BUILD_ERROR),
                                             error=f"build: {res}", build_s=wall)
                    continue
                built.append((i, requests[pos].path))
                if overlap:  # timed now, while the others still compile
                    results[i] = self._timed_run(times, task, configs[i], requests[pos].path, res.build_s)
                else:
                    waiting.append((i, requests[pos].path, res.build_s))
            if not overlap:
                waiting.sort()  # one after the other: timed in the batch's order
                with self.lock:
                    for i, path, build_s in waiting:
                        results[i] = self._timed_run(times, task, configs[i], path, build_s)
            times.wall_s = times.now()
        self._add_batch(times)
        return built

    def _timed_run(self, times: BatchTimes, task: Task, config, path: str, build_s: float) -> Measurement:
        start = times.now()
        out = self._run_one(task, config, path, build_s)
        times.runs.append((start, times.now()))
        return out

    def _add_batch(self, times: BatchTimes) -> None:
        self.last_batch = times
        self._stats["build_phase_s"] += times.compile_s
        self._stats["run_phase_s"] += times.run_s
        self._stats["overlap_s"] += times.overlap_s

    def _run_one(self, task: Task, config, path: str, build_s: float) -> Measurement:
        rc = self.settings.runner
        request = RunInput(path=path, args=self._arg_specs(task), device=self.device_spec, number=int(rc.number),
                           repeat=int(rc.repeat), min_repeat_ms=int(rc.min_repeat_ms))
        ok, res, run_s = self.time_built(request, float(rc.timeout_s))
        if cooldown := float(rc.cooldown_s):
            time.sleep(cooldown)
        if not ok:
            return Measurement(task.id, config, failure_kind(res, Outcome.RUN_ERROR), error=f"run: {res}",
                               build_s=build_s, run_s=run_s, device=self.lock.server if self.rpc else "")
        stats, verdict, attempts, server = res
        lat = stats.median if rc.statistic == "median" else stats.mean
        return Measurement.timed(task.id, config, lat, latency_std_s=stats.std,
                                 gflops=task.flops / lat / 1e9, build_s=build_s, run_s=run_s,
                                 latency_min_s=stats.min, noisy=verdict.noisy,
                                 noise={**verdict.to_dict(), "attempts": attempts}, device=server)
