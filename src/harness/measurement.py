"""What the harness does around each task so that its numbers carry evidence of their quality.

For a target that times kernels (:class:`~tunebench.targets.capabilities.TimesKernels`: llvm, cuda), with the ``measure``
settings (:class:`~tunebench.config.experiment.MeasureSettings`):

- once per run: the machine's peak (FMA GFLOP/s and memory GB/s; measured once per machine and
  cached), so "% of peak" is measured, not assumed;
- before each task: optionally wait for a quiet machine (``measure.wait_for_quiet``), then time
  the calibration kernel; after the task, time it again: the drift and the slowdown against the
  machine's quiet reference say whether the task ran on a busy machine;
- after each task: the ``retime.top_k`` fastest distinct configs are re-timed in interleaved
  rounds (:meth:`~tunebench.targets.tvm.timing.KernelTiming.retime`); the reported best is the
  fastest re-timed config whose output matches the reference. The record file keeps the search
  timings; ``retimed.jsonl`` the re-timings.

None of this is charged to the task's search clock: it happens before the clock starts or after it
stops. FPGA targets report tool results, not timings; for them only the output-free best choice
remains (:func:`best_of_fidelity`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os

from tunebench.config.experiment import MeasureSettings
from tunebench.protocol.noise import NOISE_TASKS_TAG, CpuMonitor, NoisePolicy, fired, judge, wait_for_quiet
from tunebench.targets.capabilities import ChecksOutputs, TimesKernels
from tunebench.task import Measurement

log = logging.getLogger(__name__)

CHECK_OK, CHECK_WRONG, CHECK_UNCHECKED = "ok", "wrong", "unchecked"  # the ``status`` of a check entry
UNCHECKED_TAG = "tunebench.unchecked_tasks"  # run tag: the tasks whose reported best could not be checked


def best_of_fidelity(result, target, check: bool, max_tries: int = 3) -> tuple[Measurement | None, list]:
    """The fastest valid config whose output matches the reference (tries the next on a mismatch).
    On a multi-fidelity target only the highest fidelity's measurements rank (a cheap estimate is
    no result)."""
    ranked = result.ranked(target.fidelities[-1])
    return _first_checked(ranked[:max_tries] if check else ranked[:1], result.task, target, check)


def _first_checked(candidates: list[Measurement], task, target, check: bool) -> tuple[Measurement | None, list]:
    """The first candidate whose output check passes, trying the next after a wrong output. A check
    that could not be performed (``target.check`` gives ``ok`` None) ends the search: that candidate
    is the result, its check entry has ``"status": "unchecked"`` and the reason, and a warning says so."""
    if not check:
        return (candidates[0] if candidates else None), []
    checks = []
    for m in candidates:
        ok, detail = output_check(target, task, m.config)
        status = CHECK_OK if ok is True else (CHECK_WRONG if ok is False else CHECK_UNCHECKED)
        checks.append({"task_id": m.task_id, "trial": m.trial, "index": m.config.index, "ok": status == CHECK_OK,
                       "status": status, "detail": detail})
        if status == CHECK_OK:
            return m, checks
        if status == CHECK_UNCHECKED:
            log.warning("task %s: the output of config %d could not be checked (%s); its result is reported "
                        "UNCHECKED (check_ok 0, %s tag)", task.name, m.config.index, detail, UNCHECKED_TAG)
            return m, checks
        log.error("task %s: config %d gives a wrong output (%s); it is not a result", task.name,
                  m.config.index, detail)
    return None, checks


def output_check(target, task, config) -> tuple[bool | None, str]:
    """``target.check`` of ``config`` where the target checks outputs; else not performed (``ok`` None)."""
    if isinstance(target, ChecksOutputs):
        return target.check(task, config)
    return None, f"check not performed: target {target.name} has no output check"


def check_metrics(best: Measurement | None, checks: list, check: bool) -> dict:
    """A task's check metrics: ``check_ok`` (1 only when the reported best passed its check, or
    checks are off) and ``unchecked`` = 1 when its check could not be performed."""
    last = checks[-1] if checks else {}
    passed = last.get("ok") is True and last.get("status", CHECK_OK) == CHECK_OK
    out = {"check_ok": float(best is not None and (not check or passed))}
    if best is not None and last.get("status") == CHECK_UNCHECKED:
        out["unchecked"] = 1.0
    return out


def _distinct(ranked: list[Measurement], k: int) -> list[Measurement]:
    """The first ``k`` measurements of different configs (a config may have been measured twice)."""
    seen, out = set(), []
    for m in ranked:
        key = json.dumps(m.config.to_dict(), sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(m)
        if len(out) == k:
            break
    return out


class ProtocolRunner:
    """Runs the measurement protocol's per-run and per-task steps for one run (module docstring).

    Args:
        target: the run's target; settings: the ``measure`` config; run_dir: the run's folder
            (``retimed.jsonl`` goes there).
    """

    def __init__(self, target, settings: MeasureSettings, run_dir: str):
        self.target = target
        self.s = settings
        self.policy = NoisePolicy.from_settings(settings.noise)
        self.timed = isinstance(target, TimesKernels)
        self.retime_path = os.path.join(run_dir, "retimed.jsonl")
        self.peak: dict | None = None
        self.n_noisy_tasks = 0
        self.max_slowdown = 0.0
        self.max_host_slowdown = 0.0
        self.task_signals: dict[str, None] = {}  # signals that marked a task noisy, in order (NOISE_TASKS_TAG)

    # ---- run ---------------------------------------------------------------------------------
    def start_run(self) -> dict:
        """The peak (once per machine, then cached); returns run metrics."""
        if not (self.timed and self.s.peak):
            return {}
        self.peak = self.target.peak()
        log.info("machine peak (%d threads): %.1f GFLOP/s FMA, %.1f GB/s memory%s", self.peak["threads"],
                 self.peak["fma_gflops"], self.peak["mem_gbps"], " (measured on a busy machine)"
                 if self.peak.get("noisy") else "")
        return {"peak_gflops": self.peak["fma_gflops"], "peak_mem_gbps": self.peak["mem_gbps"]}

    # ---- around a task -----------------------------------------------------------------------
    def wait_if_busy(self, what: str) -> None:
        """With ``measure.wait_for_quiet.enabled``: wait until other processes leave the CPU (this
        machine's: a remote device's machine cannot be seen from here, so ``target.rpc`` never waits)."""
        if self.timed and self.s.wait_for_quiet.enabled and not getattr(self.target, "rpc", None):
            monitor = CpuMonitor(self.target.worker_pids)
            wait_for_quiet(monitor, self.policy.foreign_cpu_max, self.s.wait_for_quiet.max_wait_s, what)

    def before_task(self, what: str) -> dict | None:
        """Wait for a quiet machine (when configured) and time the calibration kernel."""
        if not self.timed:
            return None
        self.wait_if_busy(what)
        return self.target.calibrate() if self.s.calibrate else None

    def after_task(self, pre: dict | None) -> dict | None:
        """The calibration after a task and its verdict (drift from ``pre``, slowdown)."""
        if pre is None:
            return None
        post = self.target.calibrate()
        slowdowns = [c["slowdown"] for c in (pre, post) if c["slowdown"] is not None]
        drift = post["median_s"] / pre["median_s"] - 1.0
        verdict = judge(self.policy, slowdown=max(slowdowns) if slowdowns else None, drift=drift)
        self.max_slowdown = max([self.max_slowdown, *slowdowns])
        self.max_host_slowdown = max([self.max_host_slowdown, *(c.get("host_slowdown") or 0.0 for c in (pre, post))])
        return {"post": post, "drift": drift, "verdict": verdict}

    # ---- the reported best -------------------------------------------------------------------
    def final_best(self, result, check: bool) -> tuple[Measurement | None, list, list]:
        """The task's reported best: ``(measurement with the re-timed latency, output checks,
        re-timing rows)``. Targets that do not time kernels: :func:`best_of_fidelity`."""
        if not self.timed:
            best, checks = best_of_fidelity(result, self.target, check)
            return best, checks, []
        cands = _distinct(result.ranked(), self.s.retime.top_k)
        retimed = self.target.retime(result.task, [m.config for m in cands], self.s.retime.rounds,
                                      self.s.retime.repeat)
        pairs = [(m, r) for m, r in zip(cands, retimed) if r is not None]
        if cands and not pairs:  # no candidate built again: the search timings are all there is
            log.warning("task %s: re-timing failed for all %d candidates; reporting the search timing",
                        result.task.name, len(cands))
            best, checks = _first_checked(cands, result.task, self.target, check)
            return best, checks, []
        pairs.sort(key=lambda p: p[1]["stats"].median)
        finals = [_with_retime(m, r, result.task.flops) for m, r in pairs]
        best, checks = _first_checked(finals, result.task, self.target, check)
        rows = [_retime_row(m, r, best) for m, r in pairs]
        with open(self.retime_path, "a") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in rows)
        return best, checks, rows

    def task_metrics(self, best: Measurement | None, pre: dict | None, after: dict | None, peak_share) -> dict:
        """Per-task protocol metrics (the harness prefixes them with the task id)."""
        out = {}
        if pre is not None and after is not None:
            out.update(calib_pre_ms=pre["median_s"] * 1e3, calib_post_ms=after["post"]["median_s"] * 1e3,
                       calib_drift=after["drift"], calib_noisy=float(after["verdict"].noisy))
            if pre["loadavg"] is not None:
                out["loadavg"] = pre["loadavg"]
        if best is not None and self.timed:
            noisy = best.noisy or bool(after and after["verdict"].noisy)
            self.n_noisy_tasks += noisy
            out.update(best_latency_min_ms=best.latency_min_s * 1e3, best_cv=best.noise.get("cv", math.nan),
                       best_noisy=float(noisy))
            if self.peak and peak_share is not None:
                out["pct_peak"] = peak_share
        return out

    def warn_if_noisy(self, task, best: Measurement | None, after: dict | None) -> dict[str, str]:
        """Log a task whose best or calibration is noisy, naming the signals; returns the run tags that say
        which signals have marked a task of the run so far (none when this task is clean)."""
        reasons = list(best.noise.get("reasons", [])) if best is not None and best.noisy else []
        reasons += after["verdict"].reasons if after and after["verdict"].noisy else []
        reasons = list(dict.fromkeys(reasons))
        if not reasons:
            return {}
        log.warning("task %s: NOISY -- its best latency was timed on a busy machine (%s); it is "
                    "marked noisy in the records, metrics and leaderboard", task.name, "; ".join(reasons))
        self.task_signals.update(dict.fromkeys(fired(reasons)))
        return {NOISE_TASKS_TAG: ", ".join(self.task_signals)}


def _with_retime(m: Measurement, r: dict, flops: int) -> Measurement:
    """The search measurement ``m`` with its latency replaced by the re-timing ``r``."""
    stats, verdict = r["stats"], r["verdict"]
    return dataclasses.replace(m, latency_std_s=stats.std, latency_min_s=stats.min,
                               gflops=flops / stats.median / 1e9, objectives={"latency_s": stats.median},
                               noisy=verdict.noisy, noise={**verdict.to_dict(), "retimed_n": stats.n,
                                                           "search_latency_s": m.latency_s})


def _retime_row(m: Measurement, r: dict, best: Measurement | None) -> dict:
    stats = r["stats"]
    return {"task_id": m.task_id, "trial": m.trial, "index": m.config.index, "config": m.config.to_dict(),
            "search_latency_s": m.latency_s, "search_noisy": m.noisy, "latency_s": stats.median,
            "latency_min_s": stats.min, "latency_mean_s": stats.mean, "latency_std_s": stats.std, "cv": stats.cv,
            "n": stats.n, "calibration_s": r["calibration"], **r["verdict"].to_dict(),
            "chosen": best is not None and best.trial == m.trial}
