"""The numbers a run logs about its tasks and about itself: each task's final MLflow metrics and its
``tasks.json`` entry, and the run metrics its tasks add up to."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tunebench.harness.measurement import UNCHECKED_TAG, check_metrics
from tunebench.targets.capabilities import ReportsMetrics
from tunebench.task import Task

PHASES = ("build_phase_s", "run_phase_s", "check_s", "protocol_s", "lock_wait_s")
#: where the trials' time went (:func:`time_split`), logged per task (``<task_id>.time_*``) and per run
TIME_SPLIT = ("time_compile_s", "time_upload_s", "time_run_s", "time_protocol_s", "time_overlap_s")


@dataclass
class RunTotals:
    """What the tasks of one run add up to (run metrics)."""

    search_s: float = 0.0
    excluded_search_s: float = 0.0  # source-layer tuning and pre-training (transfer methods)
    latency_s: float = 0.0  # sum of weight x best latency
    flops: float = 0.0  # sum of weight x FLOPs of the tasks with a best
    n_meas: int = 0
    n_invalid: int = 0
    n_static_invalid: int = 0  # configs the target's static check rejected (with or without a trial)
    n_proposed: int = 0  # configs the methods proposed: the measurements and the rejections without a trial
    n_noisy: int = 0
    summaries: list = field(default_factory=list)
    best: dict = field(default_factory=dict)
    unchecked: list = field(default_factory=list)  # tasks whose reported best could not be checked

    def add(self, task: Task, result, best) -> None:
        """Count one tuned task: its measurements, clock and (when it has one) best config."""
        report = result.report
        self.search_s += result.search_s
        self.excluded_search_s += result.search_s if report.get("role") == "source" else float(report.get("pretrain_s", 0))
        self.n_meas += len(result.measurements)
        self.n_invalid += result.n_invalid
        self.n_static_invalid += result.n_static_invalid
        self.n_proposed += len(result.measurements) + len(result.static_rejected)
        self.n_noisy += sum(m.noisy for m in result.measurements)
        if best is not None:
            self.best[task.id] = best
            self.latency_s += task.weight * best.latency_s  # inf where the target measures no latency
            self.flops += task.weight * task.flops

    @property
    def all_tuned(self) -> bool:
        """Every task has a reported best (a valid, output-checked config)."""
        return all(s["best_trial"] is not None for s in self.summaries)


def task_metrics(task: Task, result, best, checks, check: bool, protocol, calib) -> dict:
    """The task's final metrics (logged as ``<task_id>.<key>``): the method's numbers, counts, clocks,
    output checks, best latency and the protocol's calibration values."""
    metrics = {k: v for k, v in result.report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(v)}
    metrics.update(trials=len(result.measurements), invalid=result.n_invalid, static_invalid=result.n_static_invalid,
                   static_invalid_fraction=result.static_invalid_fraction, search_s=result.search_s,
                   lock_wait_s=result.lock_wait_s, n_noisy=sum(m.noisy for m in result.measurements),
                   **check_metrics(best, checks, check))
    share = None
    if best is not None:
        if math.isfinite(best.latency_s):  # a target whose objective is no latency (memory) has none
            metrics.update(best_latency_ms=best.latency_s * 1e3, best_gflops=best.gflops)
        if isinstance(protocol.target, ReportsMetrics):
            metrics.update(protocol.target.best_metrics(task, best))
        metrics.update({f"best_{k}": float(v) for k, v in best.objectives.items() if k != "latency_s"})
        share = 100.0 * best.gflops / protocol.peak["fma_gflops"] if protocol.peak else None
    metrics.update(protocol.task_metrics(best, *calib, share))
    return metrics


def time_split(stats: dict, stats0: dict) -> dict:
    """Where the time between two snapshots of ``target.stats`` went: compiling (the build phases),
    uploading libraries to a remote device (0 locally), timing the candidates (the run phases less uploads and
    noisy timings timed again), the protocol (calibration, re-timing, output checks) and the overlap
    (seconds during which compiling and timing ran at once: the phases add up to the wall time plus it)."""
    d = {k: float(stats.get(k, 0.0)) - float(stats0.get(k, 0.0))
         for k in ("build_phase_s", "run_phase_s", "upload_s", "retiming_s", "protocol_s", "check_s", "overlap_s")}
    return dict(zip(TIME_SPLIT, (d["build_phase_s"], d["upload_s"], d["run_phase_s"] - d["upload_s"] - d["retiming_s"],
                                 d["protocol_s"] + d["check_s"] + d["retiming_s"], d["overlap_s"])))


def log_task_metrics(tracker, task: Task, metrics: dict, n_trials: int, totals: RunTotals) -> None:
    """Log a task's metrics (curves' last step for ``best_*``); a task whose best could not be checked
    joins the run's :data:`UNCHECKED_TAG` (never counted as passed)."""
    if metrics.get("unchecked"):
        note_unchecked(tracker, task, totals)
    for key, value in metrics.items():
        tracker.metric(f"{task.id}.{key}", value, n_trials if key.startswith("best_") else 0)
    tracker.flush()


def note_unchecked(tracker, task: Task, totals: RunTotals) -> None:
    """``task``'s reported best could not be checked: it joins the run's :data:`UNCHECKED_TAG`."""
    totals.unchecked.append(task.name)
    tracker.set_tags({UNCHECKED_TAG: ",".join(totals.unchecked)})


def task_summary(task: Task, result, best, checks, retimed, metrics: dict) -> dict:
    """One entry of ``tasks.json``."""
    search_best = best.noise.get("search_latency_s") if best is not None else None
    return {**task.summary(), "trials": len(result.measurements), "invalid": result.n_invalid,
            "static_invalid": result.n_static_invalid, "static_invalid_fraction": result.static_invalid_fraction,
            "search_s": result.search_s, "lock_wait_s": result.lock_wait_s, "stop_reason": result.stop_reason,
            "best_latency_ms": best.latency_s * 1e3 if best and math.isfinite(best.latency_s) else None,
            "best_latency_search_ms": search_best * 1e3 if search_best is not None else None,
            "best_latency_min_ms": best.latency_min_s * 1e3 if best and math.isfinite(best.latency_min_s) else None,
            "best_gflops": best.gflops if best else None,
            "best_objectives": dict(best.objectives) if best else None,
            "best_noisy": bool(metrics.get("best_noisy", 0.0)), "best_trial": best.trial if best else None,
            "best_config": best.config.to_dict() if best else None,
            "best_index": best.config.index if best else None, "retimed": retimed or None,
            "calibration": {k: metrics[k] for k in ("calib_pre_ms", "calib_post_ms", "calib_drift", "calib_noisy")
                            if k in metrics} or None,
            "check": checks[-1] if checks else None, "method_report": result.report or None}


def run_metrics(totals: RunTotals, target, protocol, wall: float, phase0: dict) -> dict:
    """The run's metrics: clocks, counts, phases, the harness's overhead share; and, where the target
    times kernels, noise counts and the tasks' throughput against the machine's peak."""
    phase = {k: target.stats[k] - phase0[k] for k in PHASES}
    split = time_split(target.stats, phase0)
    # overhead = wall time in none of the phases (waiting for another process's lock is no phase of ours);
    # the seconds during which building and timing overlapped count once
    busy = sum(phase.values()) - split["time_overlap_s"]
    out = {"search_time_s": totals.search_s, "n_measurements": totals.n_meas, "n_invalid": totals.n_invalid,
           "n_static_invalid": totals.n_static_invalid,
           "static_invalid_fraction": totals.n_static_invalid / totals.n_proposed if totals.n_proposed else 0.0,
           "n_tasks": len(totals.summaries), "wall_s": wall, **phase, **split,
           "harness_overhead_share": max(0.0, wall - busy) / max(wall, 1e-9)}
    if any(s["method_report"] for s in totals.summaries):  # search time without source tuning / pre-training
        out["search_time_excl_source_s"] = totals.search_s - totals.excluded_search_s
    if totals.all_tuned and math.isfinite(totals.latency_s):
        out["tasks_latency_ms"] = totals.latency_s * 1e3  # sum over tasks of weight x best latency
    if protocol.timed:
        out.update(_timed_metrics(totals, protocol))
    return out


def _timed_metrics(totals: RunTotals, protocol) -> dict:
    out = {"n_noisy_measurements": totals.n_noisy, "n_noisy_tasks": protocol.n_noisy_tasks}
    if protocol.max_slowdown > 0:  # known once the run has a calibration reference
        out["calib_max_slowdown"] = protocol.max_slowdown
    if protocol.max_host_slowdown > 0:  # against the machine's best day: reported beside the times, no mark
        out["calib_host_slowdown"] = protocol.max_host_slowdown
    if totals.all_tuned and totals.latency_s > 0:
        out["tasks_gflops"] = totals.flops / totals.latency_s / 1e9
        if protocol.peak:
            out["pct_peak"] = 100.0 * out["tasks_gflops"] / protocol.peak["fma_gflops"]
    return out
