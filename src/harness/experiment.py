"""One experiment = one Hydra job = one MLflow run: tune every task of a model with one method.

Order of work, so that bad input fails before anything is written: validate the config, check the
tracking store, probe the target (no GPU -> error), load the model's tasks, and only then open the
MLflow run and the record file. Any failure after that marks the run FAILED; its records stay, and
``resume=<run id>`` continues it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import yaml

from tunebench.errors import DeviceUnavailable, UserError
from tunebench.harness.loop import tune_task
from tunebench.harness.progress import TuningProgress
from tunebench.harness.tracking import Tracker, check_reachable, discard_store, new_store_path, resolve_uri
from tunebench.history import History
from tunebench.methods import METHODS, Budget, make_method
from tunebench.records import RecordFile, read_records
from tunebench.run_store import RECORD_TAG
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)



def git_commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha or "unknown") + ("-dirty" if dirty else "")


def make_budget(b: dict) -> Budget:
    """A :class:`Budget` from ``cfg["budget"]``; bad values raise :class:`UserError`."""
    trials = b.get("trials_per_task")
    if not isinstance(trials, int) or isinstance(trials, bool) or trials <= 0:
        raise UserError(f"budget.trials_per_task={trials!r}: must be a positive integer")
    secs = b.get("seconds_per_task")
    if secs is not None and (not isinstance(secs, (int, float)) or secs <= 0):
        raise UserError(f"budget.seconds_per_task={secs!r}: must be a positive number of seconds or null")
    stop = b.get("early_stopping")
    if stop is not None and (not isinstance(stop, int) or isinstance(stop, bool) or stop <= 0):
        raise UserError(f"budget.early_stopping={stop!r}: must be a positive number of trials or null")
    return Budget(trials_per_task=trials, seconds_per_task=float(secs) if secs is not None else None,
                  early_stopping=stop)


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def apply_method_overrides(cfg: dict) -> dict:
    """``budget.method_overrides.<method name>`` merged into ``cfg["method"]`` (a budget preset can scale
    each method's sample sizes, e.g. AutoTVM's plan size or dgp's tuning set, together with the trial
    budget, so that one sweep over methods stays fair). Returns a new config; the input is unchanged."""
    budget = cfg.get("budget") or {}
    overrides = budget.get("method_overrides") or {}
    if not isinstance(overrides, dict):
        raise UserError(f"budget.method_overrides={overrides!r}: must map method names to settings")
    extra = overrides.get((cfg.get("method") or {}).get("name"))
    if not extra:
        return cfg
    if not isinstance(extra, dict):
        raise UserError(f"budget.method_overrides.{cfg['method']['name']}={extra!r}: must be a mapping of settings")
    return {**cfg, "method": _deep_merge(cfg["method"], extra)}


def task_rng(seed: int, task: Task) -> np.random.Generator:
    """Each task gets its own generator from (seed, task id): repeatable, independent of task order."""
    return np.random.default_rng([int(seed), int(task.id[:8], 16)])


def _attach_spaces(tasks: list[Task], target_kind: str, template: str, own_schedules: bool = False) -> None:
    """Each task's space from its kind's template of the target's variant (``target.template``). A task
    kind without a template in that variant is an error, unless the method makes its own schedules
    (``needs.compiles``: metaschedule, gat): then its task gets the template-free ``flex`` space, whose
    checks (GPU limits) its candidates go through; the method does not search the space."""
    from tunebench.targets.tvm.templates import get_template, missing_template

    for t in tasks:
        problem = missing_template(t.kind, target_kind, template)
        if problem and not own_schedules:
            raise UserError(f"task {t.name}: {problem}")
        t.template = "flex" if problem else template
        t.space = get_template(t.kind, target_kind, t.template).make_space(t.mod)


def run_conditions(target) -> dict:
    """Run tags every table must state: precision and thread count (targets that time kernels)."""
    if not target.times_kernels:
        return {}
    return {"precision": "float32 (TF32 off)" if target.kind == "cuda" else "float32",
            "threads": "GPU" if target.kind == "cuda" else str(target.threads)}


def _check_model_target(cfg: dict) -> None:
    from tunebench.targets.fpga.kernels import KERNELS
    from tunebench.targets.fpga.tasks import FPGA_TARGETS, is_fpga_model

    if is_fpga_model(cfg["model"]) != (cfg["target"].get("kind") in FPGA_TARGETS):
        raise UserError(f"model={cfg['model'].get('name')} and target={cfg['target'].get('name')} do not go "
                        f"together: FPGA kernels ({', '.join('hls_' + k for k in KERNELS)}) need target "
                        "fpga_open/table/vivado, DNN models need llvm/cuda")


def _load_tasks(cfg: dict, target) -> tuple[list[Task], object]:
    """The model's tasks (with their search spaces) and the imported model (None for FPGA kernels)."""
    from tunebench.datasets import model_tasks
    from tunebench.targets.fpga.tasks import fpga_tasks, is_fpga_model

    if is_fpga_model(cfg["model"]):
        tasks, imported = fpga_tasks(cfg["model"], target.kind), None
    else:
        tasks, imported = model_tasks(cfg["model"], target.kind)
        own_schedules = METHODS[cfg["method"]["name"]].needs.compiles
        _attach_spaces(tasks, target.kind, target.info.details["template"], own_schedules)
    if not tasks:
        raise UserError(f"model={cfg['model'].get('name')}: no conv2d/depthwise/dense tasks found")
    return tasks, imported


def _open_tracker(cfg: dict) -> Tracker:
    tracking = cfg.get("tracking") or {}
    return Tracker(tracking.get("uri"), cfg.get("experiment", "tunebench"), cfg["workdir"],
                   tracking.get("artifact_root"), outage_wait_s=tracking.get("outage_wait_s", 60))


def _new_run_dir(cfg: dict, run_id: str, target, tracker: Tracker) -> str:
    """The run's records folder with its config; returns the record file's path."""
    run_dir = os.path.join(cfg["workdir"], cfg.get("records_dir") or "records", run_id)
    os.makedirs(run_dir, exist_ok=True)
    tracker.attach_spool(run_dir)  # a tracking server that goes down: its calls are spooled here
    with open(os.path.join(run_dir, "config.yaml"), "w") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)
    record_path = os.path.join(run_dir, "records.jsonl")
    tracker.set_tags({RECORD_TAG: record_path, "device_info": json.dumps(target.describe())})
    return record_path


def _prepare(cfg: dict, tracker: Tracker | None):
    """Everything a run needs, checked before the run exists: target, compatibility, tasks, store,
    history. A failure closes the target and removes a tracking store this call created."""
    from tunebench.methods import check_compatible
    from tunebench.targets import make_target

    _check_model_target(cfg)
    target = make_target(cfg["target"], cfg.get("measure"))
    created_store = None
    try:
        check_compatible(cfg["method"], target.info)
        tasks, imported = _load_tasks(cfg, target)
        target.validate_tasks(tasks)
        if tracker is None:
            created_store = new_store_path((cfg.get("tracking") or {}).get("uri"), cfg["workdir"])
            tracker = _open_tracker(cfg)
        # records of earlier runs for transfer methods (method.history=...): read before the run starts
        history = History.load(cfg["method"].get("history"), tracker.client, cfg["workdir"])
    except BaseException:
        target.close()
        discard_store(created_store)
        raise
    if len(history):
        log.info("history: %d records of %d tasks from %s", len(history), len(history.tasks),
                 ", ".join(history.sources))
    return target, tasks, imported, tracker, history


def run_experiment(cfg: dict, overrides: list[str] | None = None,
                   on_start: Sequence[Callable[[str, str], None]] = ()) -> str:
    """Run one experiment from a resolved config dict; returns the MLflow run id.

    ``overrides``: the command line's overrides (``resume=`` refuses those that conflict with the
    run's saved config). Every check runs before the MLflow run or its records folder exists.
    ``on_start``: callbacks called with ``(run id, record file)`` once the run and its records
    folder exist, before anything is measured (new and resumed runs; e.g. ``run.py`` leaves the run id
    in the Hydra job folder, where a launcher that lost the job finds what to resume).
    """
    from tunebench.harness.config_check import validate_config
    from tunebench.harness.resume import plan_resume

    cfg = {**cfg, "workdir": os.path.abspath(cfg.get("workdir") or os.getcwd())}
    resume_id, tracker, record_path = cfg.get("resume"), None, None
    if resume_id:
        created_store = new_store_path((cfg.get("tracking") or {}).get("uri"), cfg["workdir"])
        tracker = _open_tracker(cfg)
        try:
            plan = plan_resume(tracker, resume_id, cfg, overrides)
        except UserError:
            discard_store(created_store)
            raise
        if plan.finished:
            log.info("resume=%s: the run is FINISHED; nothing to do", resume_id)
            return resume_id
        cfg, record_path = plan.cfg, plan.record_path
    # a bad value fails before anything else, and a method's one-time imports (MetaSchedule's
    # TVMScript intrinsics) run before MLflow's thousands of modules make TVMScript parsing 2-3x
    # slower (inspect.getmodule scans sys.modules)
    validate_config(cfg)
    check_reachable(resolve_uri((cfg.get("tracking") or {}).get("uri"), cfg["workdir"]))
    cfg = apply_method_overrides(cfg)
    budget, seed = make_budget(cfg.get("budget") or {}), int(cfg.get("seed", 0))
    target, tasks, imported, tracker, history = _prepare(cfg, tracker)
    names = {"method": cfg["method"]["name"], "model": cfg["model"]["name"], "target": cfg["target"]["name"]}
    if resume_id:
        tracker.attach_spool(os.path.dirname(record_path))  # tracking calls an outage kept: replayed first
        tracker.reopen(resume_id)
        run_id = resume_id
    else:
        run_id = tracker.start(run_name=f"{names['method']}-{names['model']}-{names['target']}-s{seed}",
                               params=cfg, tags={**names, "seed": seed, "device": target.info.device_name,
                                                 "git_commit": git_commit(), **run_conditions(target)})
    status = "FAILED"
    try:
        record_path = record_path or _new_run_dir(cfg, run_id, target, tracker)
        for callback in on_start:
            callback(run_id, record_path)
        _tune_all(RunPlan(cfg, tasks, imported, target, budget, seed, tracker, run_id, record_path, history))
        status = "FINISHED"
    except DeviceUnavailable as exc:
        raise DeviceUnavailable(f"{exc}; run {run_id} is FAILED with its measurements kept: resume={run_id} "
                                "continues it") from None
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        target.close()
        tracker.end(status)
    return run_id


@dataclass
class RunTotals:
    """What the tasks of one run add up to (run metrics)."""

    search_s: float = 0.0
    excluded_search_s: float = 0.0  # source-layer tuning and pre-training (transfer methods)
    latency_s: float = 0.0  # sum of weight x best latency
    flops: float = 0.0  # sum of weight x FLOPs of the tasks with a best
    n_meas: int = 0
    n_invalid: int = 0
    n_noisy: int = 0
    summaries: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    best: dict = field(default_factory=dict)

    def add(self, task: Task, result, best, checks: list) -> None:
        """Count one tuned task: its measurements, clock, checks and (when it has one) best config."""
        self.search_s += result.search_s
        self.n_meas += len(result.measurements)
        self.n_invalid += result.n_invalid
        self.n_noisy += sum(m.noisy for m in result.measurements)
        self.checks += checks
        if best is not None:
            self.best[task.id] = best
            self.latency_s += task.weight * best.latency_s
            self.flops += task.weight * task.flops


def _observers(ctx: dict, task: Task, method, row, prior_recs: list[dict]) -> tuple[list, object]:
    """What watches a task's loop, in call order: its records, the run's history (when the task ends),
    the best-so-far curve (one objective) or the Pareto curves and final FPGA values (several), and
    its progress row. Returns the list and the curve observer."""
    from tunebench.harness.observers import HistoryFeed, ProgressRow, RecordWriter, SearchCurve

    tracker = ctx["tracker"]
    fpga = ctx["fpga"]
    writer = RecordWriter(ctx["records"], task, prior_recs)
    curve = (fpga.observer(task, tracker, ctx["run_dir"], method.learned_set) if fpga is not None
             else SearchCurve(tracker, task))
    return [writer, HistoryFeed(ctx["history"], task, writer), curve, ProgressRow(ctx["progress"], row)], curve


def _prior_measurements(task: Task, recs: list[dict]) -> tuple[list[Measurement], list[dict]]:
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


def _tune_one(ctx: dict, task: Task, prior_recs: list, totals: RunTotals) -> None:
    """Tune one task, then its protocol steps (calibration, re-timing, checks) and metrics."""
    cfg, protocol = ctx["cfg"], ctx["protocol"]
    prior, prior_recs = _prior_measurements(task, prior_recs)
    row = ctx["progress"].start_task(task, ctx["budget"].trials_per_task, prior)
    method = make_method(cfg["method"])
    observers, curve = _observers(ctx, task, method, row, prior_recs)
    pre = protocol.before_task(f"task {task.name}")
    result = tune_task(task, method, ctx["target"], ctx["budget"], task_rng(ctx["seed"], task), prior=prior,
                       history=ctx["history"], observers=observers)
    after = protocol.after_task(pre)
    report = result.report
    totals.excluded_search_s += result.search_s if report.get("role") == "source" else float(report.get("pretrain_s", 0))
    best, checks, retimed = protocol.final_best(result, ctx["check"])
    protocol.warn_if_noisy(task, best, after)
    metrics = _task_metrics(ctx, task, result, report, best, checks, (pre, after))
    ctx["progress"].finish_task(row, result, best)
    totals.add(task, result, best, checks)
    fpga_summary = curve.summary if ctx["fpga"] is not None else None
    totals.summaries.append(_task_summary(task, result, best, checks, report, retimed, metrics, fpga_summary))


def _task_metrics(ctx: dict, task: Task, result, report: dict, best, checks, calib) -> dict:
    """The task's final MLflow metrics (``<task_id>.<key>``): the method's numbers, counts, clocks,
    output checks, best latency and the protocol's calibration values."""
    from tunebench.harness.measurement import UNCHECKED_TAG, check_metrics

    protocol, tracker = ctx["protocol"], ctx["tracker"]
    metrics = {k: v for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(v)}
    n = len(result.measurements)
    metrics.update(trials=n, invalid=result.n_invalid, search_s=result.search_s, lock_wait_s=result.lock_wait_s,
                   n_noisy=sum(m.noisy for m in result.measurements), **check_metrics(best, checks, ctx["check"]))
    if metrics.get("unchecked"):  # a check that could not be performed: never counted as passed
        ctx.setdefault("unchecked", []).append(task.name)
        tracker.set_tags({UNCHECKED_TAG: ",".join(ctx["unchecked"])})
    share = None
    if best is not None:
        metrics.update(best_latency_ms=best.latency_s * 1e3, best_gflops=best.gflops)
        share = 100.0 * best.gflops / protocol.peak["fma_gflops"] if protocol.peak else None
    metrics.update(protocol.task_metrics(best, *calib, share))
    for key, value in metrics.items():
        tracker.metric(f"{task.id}.{key}", value, n if key.startswith("best_") else 0)
    tracker.flush()
    return metrics


def _task_summary(task, result, best, checks, report, retimed, metrics, fpga_summary) -> dict:
    """One entry of ``tasks.json``."""
    search_best = best.noise.get("search_latency_s") if best is not None else None
    return {**task.summary(), "trials": len(result.measurements), "invalid": result.n_invalid,
            "search_s": result.search_s, "lock_wait_s": result.lock_wait_s, "stop_reason": result.stop_reason,
            "best_latency_ms": best.latency_s * 1e3 if best else None,
            "best_latency_search_ms": search_best * 1e3 if search_best is not None else None,
            "best_latency_min_ms": best.latency_min_s * 1e3 if best and math.isfinite(best.latency_min_s) else None,
            "best_gflops": best.gflops if best else None,
            "best_noisy": bool(metrics.get("best_noisy", 0.0)), "best_trial": best.trial if best else None,
            "best_config": best.config.to_dict() if best else None,
            "best_index": best.config.index if best else None, "retimed": retimed or None,
            "calibration": {k: metrics[k] for k in ("calib_pre_ms", "calib_post_ms", "calib_drift", "calib_noisy")
                            if k in metrics} or None,
            "check": checks[-1] if checks else None, "method_report": report or None,
            **({"fpga": fpga_summary} if fpga_summary is not None else {})}


def _run_metrics(totals: RunTotals, target, protocol, wall: float, phase0: dict) -> dict:
    phase = {k: target.stats[k] - phase0[k]
             for k in ("build_phase_s", "run_phase_s", "check_s", "protocol_s", "lock_wait_s")}
    all_ok = all(s["best_latency_ms"] is not None for s in totals.summaries)
    # overhead = wall time in none of the phases (waiting for another process's lock is no phase of ours)
    out = {"search_time_s": totals.search_s, "n_measurements": totals.n_meas, "n_invalid": totals.n_invalid,
           "n_tasks": len(totals.summaries), "wall_s": wall, **phase,
           "harness_overhead_share": max(0.0, wall - sum(phase.values())) / max(wall, 1e-9)}
    if any(s["method_report"] for s in totals.summaries):  # search time without source tuning / pre-training
        out["search_time_excl_source_s"] = totals.search_s - totals.excluded_search_s
    if all_ok:
        out["tasks_latency_ms"] = totals.latency_s * 1e3  # sum over tasks of weight x best latency
    if protocol.timed:
        out.update(n_noisy_measurements=totals.n_noisy, n_noisy_tasks=protocol.n_noisy_tasks)
        if protocol.max_slowdown > 0:  # known once the machine has a calibration reference
            out["calib_max_slowdown"] = protocol.max_slowdown
        if all_ok and totals.latency_s > 0:
            out["tasks_gflops"] = totals.flops / totals.latency_s / 1e9
            if protocol.peak:
                out["pct_peak"] = 100.0 * out["tasks_gflops"] / protocol.peak["fma_gflops"]
    return out


@dataclass
class RunPlan:
    """Everything one run tunes with, checked and built before the run started."""

    cfg: dict
    tasks: list[Task]
    imported: object  # the imported model (None for FPGA kernels)
    target: object
    budget: Budget
    seed: int
    tracker: Tracker
    run_id: str
    record_path: str
    history: History


def _tune_all(plan: RunPlan) -> None:
    """Tune every task of the run, then the run metrics, the end-to-end step and the run files."""
    from tunebench.harness.measurement import MeasurementProtocol, ProtocolSettings

    cfg, tasks, target, tracker, record_path = plan.cfg, plan.tasks, plan.target, plan.tracker, plan.record_path

    run_dir = os.path.dirname(record_path)
    prior_by_task: dict[str, list[dict]] = {}
    for rec in read_records(record_path):
        prior_by_task.setdefault(rec["task_id"], []).append(rec)
    context = {"run_id": plan.run_id, "method": cfg["method"]["name"], "model": cfg["model"]["name"],
               "target": cfg["target"]["name"]}
    settings = ProtocolSettings.from_cfg(cfg.get("measure"))
    protocol = MeasurementProtocol(target, settings, run_dir)
    multi = len(target.objectives) > 1  # FPGA: ADRS / hypervolume metrics
    fpga = None
    if multi:
        from tunebench.harness.fpga_metrics import FPGAMetrics

        fpga = FPGAMetrics(target)
    target.start()  # worker processes start before the clock: a one-time cost, not a per-trial one
    for key, value in protocol.start_run().items():
        tracker.metric(key, value)
    t_start = time.perf_counter()
    phase0 = dict(target.stats)
    totals = RunTotals()
    records = RecordFile(record_path, context)
    with TuningProgress(len(tasks), enabled=bool(cfg.get("progress", True))) as progress:
        ctx = {"cfg": cfg, "target": target, "tracker": tracker, "protocol": protocol, "progress": progress,
               "records": records, "budget": plan.budget, "seed": plan.seed, "history": plan.history, "fpga": fpga,
               "run_dir": run_dir, "check": bool(cfg.get("check_correctness", True))}
        for task in tasks:
            _tune_one(ctx, task, prior_by_task.get(task.id, []), totals)
    records.close()
    for k, v in _run_metrics(totals, target, protocol, time.perf_counter() - t_start, phase0).items():
        tracker.metric(k, v)
    tracker.flush()
    e2e_error = None
    if multi:
        fpga.log_run(tracker)
        tracker.flush()
    if (cfg.get("e2e") or {}).get("enabled", True) and not multi:
        from tunebench.harness.e2e_step import model_latency, operator_latencies

        protocol.wait_if_busy("the end-to-end step")
        e2e_error = (operator_latencies(cfg, tasks, totals.best, target, tracker) if plan.imported is None
                     else model_latency(cfg, plan.imported, tasks, totals.best, target, tracker))
        tracker.flush()
    _write_run_files(run_dir, totals, tracker, fpga.artifacts if multi else ())
    if e2e_error:
        from tunebench.harness.e2e import E2EError

        raise E2EError(e2e_error)


def _write_run_files(run_dir: str, totals: RunTotals, tracker: Tracker, extra_artifacts) -> None:
    with open(os.path.join(run_dir, "tasks.json"), "w") as fh:
        json.dump(totals.summaries, fh, indent=1)
    with open(os.path.join(run_dir, "checks.jsonl"), "a") as fh:
        for c in totals.checks:
            fh.write(json.dumps(c) + "\n")
    names = ("records.jsonl", "config.yaml", "tasks.json", "checks.jsonl", "retimed.jsonl") + tuple(extra_artifacts)
    for name in names:
        if os.path.exists(os.path.join(run_dir, name)):
            tracker.artifact(os.path.join(run_dir, name))
    if not all(s["best_latency_ms"] is not None for s in totals.summaries):
        bad = [s["name"] for s in totals.summaries if s["best_latency_ms"] is None]
        tracker.set_tags({"tunebench.tasks_without_result": ",".join(bad)})
        log.warning("no valid, output-checked config for task(s) %s", ", ".join(bad))
