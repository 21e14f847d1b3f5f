"""Kernel timing of the TVM targets (the measurement protocol's steps on the runner): noise-checked
timing, calibration, re-timing, the peak.

Everything here runs on the target's runner worker while the device lock is held:

- :meth:`KernelTiming.time_built`: one candidate, timed with the runner settings; a noisy
  timing (:func:`tunebench.protocol.noise.judge`: CV of the repeats, CPU used by other
  processes meanwhile) is timed again up to ``measure.noise.remeasure`` times; the first clean
  timing is kept, else the fastest, marked ``noisy``.
- :meth:`KernelTiming.calibrate`: the fixed calibration kernel, compared with the machine's quiet
  reference (``slowdown``).
- :meth:`KernelTiming.retime`: the final interleaved re-timing of a task's best candidates.
- :meth:`KernelTiming.peak`: the machine's FMA and memory-bandwidth peak, measured once and cached.
"""

from __future__ import annotations

import logging
import time

from tunebench.protocol.noise import Verdict, judge, loadavg
from tunebench.protocol.stats import SampleStats, summarize
from tunebench.targets.tvm.messages import CalibrateInput, PeakInput, RetimeInput, RunInput

log = logging.getLogger(__name__)


class KernelTiming:
    """Mixin of :class:`~tunebench.targets.tvm.target.TVMTarget` (uses its runner, lock, monitor,
    machine cache, noise policy and runner settings)."""

    def _foreign(self, mark) -> float | None:
        """Foreign CPU since ``mark`` (local CPU targets only: it says nothing about a GPU's load or a
        remote machine's)."""
        foreign = self.monitor.foreign(mark)
        return foreign if self.sees_device_load else None

    def _timed(self, name: str, request, timeout_s: float):
        """One runner request under the lock: ``(ok, result, wall seconds, foreign CPU)``; its wall
        time, without any wait for the lock, counts as protocol time."""
        with self.lock:
            t0 = time.perf_counter()
            mark = self.monitor.start()
            ok, res, wall = self.runner_call(name, request, timeout_s)
            foreign = self._foreign(mark)
            self._stats["protocol_s"] += time.perf_counter() - t0
        return ok, res, wall, foreign

    def time_built(self, request: RunInput, timeout_s: float) -> tuple[bool, object, float]:
        """Time one built candidate (the lock must be held). Returns ``(ok, error text or
        (stats, verdict, attempts, device), device seconds)``; ``device`` names a remote device ("" locally)."""
        attempts: list[tuple[SampleStats, Verdict]] = []
        run_s = 0.0
        for attempt in range(1 + self.policy.remeasure):
            mark = self.monitor.start()
            ok, res, wall = self.runner_call("run", request, timeout_s)
            foreign = self._foreign(mark)
            self._stats["retiming_s"] += wall if attempt else 0.0  # a noisy timing timed again: protocol work
            if not ok:
                return False, res, run_s + wall
            self._stats["upload_s"] += res.upload_s
            run_s += res.run_s
            stats = summarize(res.results_s)
            attempts.append((stats, judge(self.policy, rcv=stats.rcv, foreign_cpu=foreign, cv=stats.cv)))
            if not attempts[-1][1].noisy:
                break
        clean = [a for a in attempts if not a[1].noisy]
        stats, verdict = clean[0] if clean else min(attempts, key=lambda a: a[0].median)
        return True, (stats, verdict, len(attempts), res.server or ""), run_s

    # ---- calibration ------------------------------------------------------------------------
    def calibrate(self) -> dict:
        """Time the calibration kernel now; returns ``median_s``, ``min_s``, ``cv``, ``slowdown`` (vs the run's
        quiet reference, :mod:`tunebench.protocol.reference`; None before one exists), ``host_slowdown`` (vs the
        fastest calibration cached for this machine), ``foreign_cpu``, ``loadavg``, ``noisy`` and ``reasons``.
        A clean calibration (robust CV and foreign CPU within ``measure.noise``) is offered as the reference."""
        self.start()
        request = CalibrateInput(target=self.tvm_target, device=self.device_spec, repeat=5,
                                 min_repeat_ms=int(self.settings.runner.min_repeat_ms))
        ok, res, _, foreign = self._timed("calibrate", request, float(self.settings.runner.timeout_s))
        if not ok:
            raise RuntimeError(f"calibration kernel failed: {res}")
        stats = summarize(res.samples)
        host = self.reference.host_slowdown(stats.median)  # before this calibration joins the cache
        if not judge(self.policy, rcv=stats.rcv, foreign_cpu=foreign).noisy:
            self.reference.offer(stats.median)
        slowdown = self.reference.slowdown(stats.median)
        verdict = judge(self.policy, rcv=stats.rcv, foreign_cpu=foreign, cv=stats.cv, slowdown=slowdown)
        return {"median_s": stats.median, "min_s": stats.min, "cv": stats.cv, "slowdown": slowdown,
                "host_slowdown": host, "foreign_cpu": foreign, "loadavg": loadavg(), "noisy": verdict.noisy,
                "reasons": verdict.reasons}

    # ---- final re-timing ----------------------------------------------------------------------
    def retime(self, task, configs: list, rounds: int, repeat: int) -> list[dict | None]:
        """Time ``configs`` in ``rounds`` interleaved rounds of ``repeat`` repeats each, with the
        calibration kernel after every round; a config whose library the search kept
        (:mod:`~tunebench.targets.tvm.libraries`) is not built again.

        Returns one dict per config (None where the build failed): ``stats`` (:class:`SampleStats`
        of all its samples, seconds), ``verdict`` (robust CV, foreign CPU, calibration slowdown and
        drift over the rounds), ``calibration`` (per-round calibration medians), ``round_medians``
        (its median in each round: paired with another config's, they give interleaved ratios).
        """
        if not configs:
            return []
        self.start()
        built = [self.libraries.take(task.id, c) for c in configs]  # kept from the search, else built again
        missing = [i for i, path in enumerate(built) if path is None]
        for i, path in zip(missing, self._build_all(task, [configs[i] for i in missing], phase="protocol_s")[0]):
            built[i] = path
        self.libraries.drop(task.id)
        paths = [path for path in built if path]
        rc = self.settings.runner
        request = RetimeInput(paths=paths, args=self._arg_specs(task), device=self.device_spec,
                              target=self.tvm_target, rounds=int(rounds), repeat=int(repeat),
                              min_repeat_ms=int(rc.min_repeat_ms))
        timeout = float(rc.timeout_s) * (1 + rounds * (len(paths) + 1))
        ok, res, _, foreign = self._timed("retime", request, timeout)
        self._remove(paths)
        if not ok:
            raise RuntimeError(f"re-timing failed: {res}")
        cal = res.calibration
        slowdown = self.reference.slowdown(max(cal)) if cal else None
        drift = max(cal) / min(cal) - 1.0 if cal and min(cal) > 0 else None
        samples = iter(res.samples)
        out = []
        for path in built:
            if not path:
                out.append(None)
                continue
            mine = next(samples)
            stats = summarize(mine)
            verdict = judge(self.policy, rcv=stats.rcv, foreign_cpu=foreign, slowdown=slowdown, drift=drift,
                            cv=stats.cv)
            rounds_ = [summarize(mine[i:i + repeat]).median for i in range(0, len(mine), repeat)]
            out.append({"stats": stats, "verdict": verdict, "calibration": list(cal), "round_medians": rounds_})
        return out

    # ---- the machine's peak -----------------------------------------------------------------
    def peak(self) -> dict:
        """The device's measured peak (``fma_gflops``, ``mem_gbps``, ``threads``), from the machine
        cache, or measured now (then cached unless the machine was noisy: ``noisy`` is set)."""
        cached = self.machine.peak()
        if cached:
            return cached
        self.start()
        log.info("measuring this machine's peak (FMA throughput, memory bandwidth; once per machine)")
        request = PeakInput(target=self.tvm_target, device=self.device_spec, threads=self.threads)
        ok, res, _, foreign = self._timed("peak", request, 600.0)
        if not ok:
            raise RuntimeError(f"peak microbenchmark failed: {res}")
        peak = res.measured()
        verdict = judge(self.policy, foreign_cpu=foreign)
        if verdict.noisy:
            log.warning("peak measured on a busy machine (%s): not cached; it will be measured again",
                        "; ".join(verdict.reasons))
            return {**peak, "noisy": True}
        self.machine.store_peak(peak)
        return self.machine.peak() or peak
