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

import numpy as np
import yaml

from tunebench.errors import UserError
from tunebench.harness.loop import TaskResult, tune_task
from tunebench.history import History
from tunebench.harness.progress import TuningProgress
from tunebench.harness.records import RecordFile, read_records
from tunebench.harness.tracking import Tracker
from tunebench.methods import Budget, make_method
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)

RECORD_TAG = "tunebench.record_file"


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


def _attach_spaces(tasks: list[Task], target_kind: str) -> None:
    from tunebench.targets.templates import get_template

    for t in tasks:
        t.space = get_template(t.kind, target_kind).make_space(t.mod)


def _load_resume(tracker: Tracker, run_id: str) -> tuple[dict, str]:
    run = tracker.get_run(run_id)
    path = run.data.tags.get(RECORD_TAG)
    if not path or not os.path.exists(path):
        raise UserError(f"resume={run_id}: its record file {path!r} is not on this machine")
    cfg_path = os.path.join(os.path.dirname(path), "config.yaml")
    with open(cfg_path) as fh:
        return yaml.safe_load(fh), path


def _best_checked(result: TaskResult, target, check: bool, max_tries: int = 3) -> tuple[Measurement | None, list]:
    """The fastest valid config whose output matches the reference (tries the next on a mismatch).
    On a multi-fidelity target only the highest fidelity's measurements rank (a cheap estimate is
    no result)."""
    fidelities = getattr(target, "fidelities", None)
    ranked = result.ranked(fidelities[-1] if fidelities else None)
    if not check:
        return (ranked[0] if ranked else None), []
    checks = []
    for m in ranked[:max_tries]:
        ok, detail = target.check(result.task, m.config)
        checks.append({"task_id": m.task_id, "trial": m.trial, "index": m.config.index, "ok": ok, "detail": detail})
        if ok:
            return m, checks
        log.error("task %s: config %d gives a wrong output (%s); it is not a result", result.task.name,
                  m.config.index, detail)
    return None, checks


def run_experiment(cfg: dict) -> str:
    """Run one experiment from a resolved config dict; returns the MLflow run id."""
    workdir = os.path.abspath(cfg.get("workdir") or os.getcwd())
    tracking = cfg.get("tracking") or {}
    resume_id = cfg.get("resume")
    budget = None
    cfg = apply_method_overrides(cfg)
    if not resume_id:
        # validate the budget and build the method first: a bad value fails before anything else,
        # and a method's one-time imports (MetaSchedule's TVMScript intrinsics) run before MLflow's
        # thousands of modules make TVMScript parsing 2-3x slower (inspect.getmodule scans sys.modules)
        budget = make_budget(cfg.get("budget") or {})
        make_method(cfg["method"])
    tracker = Tracker(tracking.get("uri"), cfg.get("experiment", "tunebench"), workdir,
                      tracking.get("artifact_root"))
    record_path = None
    if resume_id:  # the run's own saved config, validated the same way
        saved, record_path = _load_resume(tracker, resume_id)
        saved["resume"], saved["tracking"] = resume_id, tracking
        cfg = saved
        budget = make_budget(cfg.get("budget") or {})
        make_method(cfg["method"])
    seed = int(cfg.get("seed", 0))
    # records of earlier runs for transfer methods (method.history=...): read before the run starts
    history = History.load(cfg["method"].get("history"), tracker.client, workdir)
    if len(history):
        log.info("history: %d records of %d tasks from %s", len(history), len(history.tasks),
                 ", ".join(history.sources))

    from tunebench.datasets import model_tasks
    from tunebench.targets import make_target

    from tunebench.fpga.kernels import KERNELS
    from tunebench.fpga.tasks import FPGA_TARGETS, fpga_tasks, is_fpga_model

    if is_fpga_model(cfg["model"]) != (cfg["target"].get("kind") in FPGA_TARGETS):
        raise UserError(f"model={cfg['model'].get('name')} and target={cfg['target'].get('name')} do not go "
                        f"together: FPGA kernels ({', '.join('hls_' + k for k in KERNELS)}) need target fpga_open/table/vivado, "
                        f"DNN models need llvm/cuda")
    target = make_target(cfg["target"])
    if is_fpga_model(cfg["model"]):
        tasks, _imported = fpga_tasks(cfg["model"], target.kind), None
    else:
        tasks, _imported = model_tasks(cfg["model"], target.kind)
        _attach_spaces(tasks, target.kind)
    if not tasks:
        raise UserError(f"model={cfg['model'].get('name')}: no conv2d/depthwise/dense tasks found")

    names = {"method": cfg["method"]["name"], "model": cfg["model"]["name"], "target": cfg["target"]["name"]}
    if resume_id:
        tracker.reopen(resume_id)
        run_id = resume_id
    else:
        run_id = tracker.start(run_name=f"{names['method']}-{names['model']}-{names['target']}-s{seed}",
                               params=cfg, tags={**names, "seed": seed, "device": target.describe()["name"],
                                                 "git_commit": git_commit()})
        run_dir = os.path.join(workdir, cfg.get("records_dir", "records"), run_id)
        record_path = os.path.join(run_dir, "records.jsonl")
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "config.yaml"), "w") as fh:
            yaml.safe_dump(cfg, fh, sort_keys=False)
        tracker.set_tags({RECORD_TAG: record_path, "device_info": json.dumps(target.describe())})
    status = "FAILED"
    try:
        _tune_all(cfg, tasks, _imported, target, budget, seed, tracker, run_id, record_path, history)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        target.close()
        tracker.end(status)
    return run_id


def _model_latency(cfg: dict, imported, tasks: list[Task], best: dict, target, tracker: Tracker) -> str | None:
    """End-to-end latency of the model with each task's best schedule, TVM's default build and
    PyTorch eager (DESIGN.md §Metrics); logged as run metrics. Returns the error text of a failed
    build or a wrong output (then no tuned latency is logged), else None."""
    from tunebench.harness.e2e import E2EError, model_latencies
    from tunebench.targets.scheduling import schedule

    e2e = cfg.get("e2e") or {}
    schedules = {t.id: schedule(t.mod, t.kind, target.kind, best[t.id].config) for t in tasks if t.id in best}
    log.info("end-to-end latency of %s: %d tuned tasks, %d runs", cfg["model"]["name"], len(schedules),
             int(e2e.get("n_runs", 10)))
    try:
        lat = model_latencies(imported, tasks, schedules, target, n_runs=int(e2e.get("n_runs", 10)),
                              warmup=int(e2e.get("warmup", 2)), tolerance=float(e2e.get("tolerance", 1e-4)),
                              name=cfg["model"]["name"], default_n_runs=e2e.get("default_n_runs"))
    except E2EError as exc:
        log.error("%s", exc)
        tracker.set_tags({"tunebench.e2e_error": str(exc)[:5000]})
        return str(exc)
    for row, prefix in (("tuned", "e2e"), ("tvm_default", "tvm_default"), ("torch", "torch")):
        for key in ("latency_ms", "latency_std_ms", "latency_median_ms", "rel_err", "compile_s"):
            if key in lat[row]:
                tracker.metric(f"{prefix}_{key}", lat[row][key])
    if lat["tuned"]["untuned_tasks"]:
        tracker.set_tags({"tunebench.e2e_untuned_tasks": ",".join(lat["tuned"]["untuned_tasks"])})
    log.info("end-to-end: tuned %.3f ms, TVM default %.3f ms, PyTorch %.3f ms (mean of runs)",
             lat["tuned"]["latency_ms"], lat["tvm_default"]["latency_ms"], lat["torch"]["latency_ms"])
    return None


def _tune_all(cfg, tasks, imported, target, budget, seed, tracker: Tracker, run_id: str, record_path: str,
              history: History) -> None:
    run_dir = os.path.dirname(record_path)
    prior_by_task: dict[str, list[dict]] = {}
    for rec in read_records(record_path):
        prior_by_task.setdefault(rec["task_id"], []).append(rec)
    context = {"run_id": run_id, "method": cfg["method"]["name"], "model": cfg["model"]["name"],
               "target": cfg["target"]["name"]}
    records = RecordFile(record_path, context)
    check = bool(cfg.get("check_correctness", True))
    target.start()  # worker processes start before the clock: a one-time cost, not a per-trial one
    t_start = time.perf_counter()
    phase0 = dict(target.stats)
    summaries, checks_all, best_by_task = [], [], {}
    multi = len(getattr(target, "objectives", ["latency_s"])) > 1  # FPGA: ADRS / hypervolume metrics
    fpga_curves = fpga_summary = None
    if multi:
        from tunebench.harness.fpga_metrics import FPGAMetrics

        fpga_curves = FPGAMetrics(target)
    total_search = total_latency = excluded_search = 0.0
    n_meas = n_invalid = 0
    with TuningProgress(len(tasks), enabled=bool(cfg.get("progress", True))) as progress:
        for ti, task in enumerate(tasks):
            prior = [Measurement.from_record(r, task.space) for r in prior_by_task.get(task.id, [])]
            row = progress.start_task(task, budget.trials_per_task, prior)
            best_so_far = [min((m.latency_s for m in prior if m.valid), default=math.inf)]

            def on_batch(batch, result, row=row, task=task, best=best_so_far):
                for m in batch:
                    records.append(m, task)
                    if m.valid and m.latency_s < best[0]:
                        best[0] = m.latency_s
                    if math.isfinite(best[0]):
                        tracker.metric(f"{task.id}.best_latency_ms", best[0] * 1e3, m.trial)
                        tracker.metric(f"{task.id}.best_gflops", task.flops / best[0] / 1e9, m.trial)
                tracker.flush()
                progress.update(row, result)

            method = make_method(cfg["method"])
            if multi:
                on_batch = fpga_curves.on_batch_for(task, records, tracker, progress, row, prior)
            result = tune_task(task, method, target, budget, task_rng(seed, task), prior=prior, history=history,
                               on_batch=on_batch)
            report = method.report()
            history.add_task(task, result.measurements, role=str(report.get("role", "")))
            excluded_search += result.search_s if report.get("role") == "source" else float(report.get("pretrain_s", 0))
            for key, value in report.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    tracker.metric(f"{task.id}.{key}", value)
            if multi:
                fpga_summary = fpga_curves.finish_task(task, result, run_dir)
            best, checks = _best_checked(result, target, check)
            checks_all += checks
            n = len(result.measurements)
            tracker.metric(f"{task.id}.trials", n)
            tracker.metric(f"{task.id}.invalid", result.n_invalid)
            tracker.metric(f"{task.id}.search_s", result.search_s)
            if best is not None:
                best_by_task[task.id] = best
                tracker.metric(f"{task.id}.best_latency_ms", best.latency_s * 1e3, n)
                tracker.metric(f"{task.id}.best_gflops", best.gflops, n)
                total_latency += task.weight * best.latency_s
            tracker.metric(f"{task.id}.check_ok", float(best is not None and (not check or checks[-1]["ok"])))
            tracker.flush()
            progress.finish_task(row, result, best)
            total_search += result.search_s
            n_meas += n
            n_invalid += result.n_invalid
            summaries.append({**task.summary(), "trials": n, "invalid": result.n_invalid,
                              "search_s": result.search_s, "stop_reason": result.stop_reason,
                              "best_latency_ms": best.latency_s * 1e3 if best else None,
                              "best_gflops": best.gflops if best else None,
                              "best_config": best.config.to_dict() if best else None,
                              "best_index": best.config.index if best else None,
                              "check": checks[-1] if checks else None, "method_report": report or None,
                              **({"fpga": fpga_summary} if multi else {})})
    records.close()
    wall = time.perf_counter() - t_start
    build_phase = target.stats["build_phase_s"] - phase0["build_phase_s"]
    run_phase = target.stats["run_phase_s"] - phase0["run_phase_s"]
    check_s = target.stats["check_s"] - phase0["check_s"]
    all_ok = all(s["best_latency_ms"] is not None for s in summaries)
    run_metrics = {"search_time_s": total_search, "n_measurements": n_meas, "n_invalid": n_invalid,
                   "n_tasks": len(tasks), "wall_s": wall, "build_phase_s": build_phase, "run_phase_s": run_phase,
                   "check_s": check_s,
                   "harness_overhead_share": max(0.0, wall - build_phase - run_phase - check_s) / max(wall, 1e-9)}
    if any(s["method_report"] for s in summaries):  # search time without source tuning / pre-training
        run_metrics["search_time_excl_source_s"] = total_search - excluded_search
    if all_ok:
        run_metrics["tasks_latency_ms"] = total_latency * 1e3  # sum over tasks of weight x best latency
    for k, v in run_metrics.items():
        tracker.metric(k, v)
    tracker.flush()
    e2e_error = None
    if multi:
        fpga_curves.log_run(tracker)
        tracker.flush()
    if (cfg.get("e2e") or {}).get("enabled", True) and not multi:
        e2e_error = _model_latency(cfg, imported, tasks, best_by_task, target, tracker)
        tracker.flush()
    with open(os.path.join(run_dir, "tasks.json"), "w") as fh:
        json.dump(summaries, fh, indent=1)
    with open(os.path.join(run_dir, "checks.jsonl"), "a") as fh:
        for c in checks_all:
            fh.write(json.dumps(c) + "\n")
    for name in ("records.jsonl", "config.yaml", "tasks.json", "checks.jsonl") + \
            (tuple(fpga_curves.artifacts) if multi else ()):
        tracker.artifact(os.path.join(run_dir, name))
    if not all_ok:
        bad = [s["name"] for s in summaries if s["best_latency_ms"] is None]
        tracker.set_tags({"tunebench.tasks_without_result": ",".join(bad)})
        log.warning("no valid, output-checked config for task(s) %s", ", ".join(bad))
    if e2e_error:
        from tunebench.harness.e2e import E2EError

        raise E2EError(e2e_error)
