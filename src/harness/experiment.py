"""One experiment = one Hydra job = one MLflow run: tune every task of a model with one method.

Order of work, so that bad input fails before anything is written: check the typed config, check the
tracking store, build the target (no GPU -> error), load the model's tasks, and only then open the
MLflow run and the record file. Any failure after that marks the run FAILED; its records stay, and
``resume=<run id>`` continues it. SIGINT (Ctrl-C) and SIGTERM stop it KILLED, the same way
(:mod:`tunebench.harness.stopping`): workers stopped, temporary folders removed, records kept.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence

from tunebench.config.experiment import ExperimentConfig
from tunebench.config.load import plain
from tunebench.errors import DeviceUnavailable, E2EError, RunStopped
from tunebench.harness.measurement import ProtocolRunner
from tunebench.harness.metrics import run_metrics
from tunebench.harness.prepare import Prepared, open_tracker, prepare
from tunebench.harness.progress import TuningProgress
from tunebench.harness.run_folder import git_commit, new_run_dir, read_tasks_json, write_run_files
from tunebench.harness.setup.resume import plan_resume
from tunebench.harness.setup.validate import validate_config
from tunebench.harness.steps import run_steps
from tunebench.harness.stopping import stop_on_signals
from tunebench.harness.tracking.tracker import check_reachable, discard_store, new_store_path, resolve_uri
from tunebench.harness.tuning import RunContext, run_task
from tunebench.record_file import RecordFile, read_records
from tunebench.safe_files import remove_dead_run_dirs
from tunebench.targets.capabilities import TimesKernels

log = logging.getLogger(__name__)


def run_experiment(cfg: ExperimentConfig, overrides: list[str] | None = None,
                   on_start: Sequence[Callable[[str, str], None]] = ()) -> str:
    """Run one experiment from its typed config; returns the MLflow run id.

    ``overrides``: the command line's overrides (``resume=`` refuses those that conflict with the
    run's saved config). Every check runs before the MLflow run or its records folder exists.
    ``on_start``: callbacks called with ``(run id, record file)`` once the run and its records
    folder exist, before anything is measured (new and resumed runs; e.g. ``run.py`` leaves the run id
    in the Hydra job folder, where a launcher that lost the job finds what to resume).
    """
    cfg = dataclasses.replace(cfg, workdir=os.path.abspath(cfg.workdir or os.getcwd()))
    with stop_on_signals():
        try:
            return _experiment(cfg, overrides, on_start)
        except RunStopped as exc:
            if exc.run_id is not None:
                raise
            then = f"; resume with: {resume_command(cfg, cfg.resume)}" if cfg.resume else "; nothing to resume"
            raise RunStopped(exc.signum, f"stopped by {exc.signal_name} before the run started{then}") from None


def _experiment(cfg: ExperimentConfig, overrides, on_start) -> str:
    tracker, record_path = None, None
    if cfg.resume:
        plan = _resume(cfg, overrides)
        if plan.finished:
            log.info("resume=%s: the run is FINISHED; nothing to do", cfg.resume)
            return cfg.resume
        cfg, tracker, record_path = plan.cfg, plan.tracker, plan.record_path
    # a bad value fails before anything else, and a method's one-time imports (MetaSchedule's
    # TVMScript intrinsics) run before MLflow's thousands of modules make TVMScript parsing 2-3x
    # slower (inspect.getmodule scans sys.modules)
    validate_config(cfg)
    check_reachable(resolve_uri(cfg.tracking.uri, cfg.workdir))
    run = prepare(cfg, tracker)
    run_id = _start_run(cfg, run, record_path)
    _run(cfg, run, run_id, record_path, on_start)
    return run_id


def resume_command(cfg: ExperimentConfig, run_id: str) -> str:
    """``python run.py resume=<run id>`` with the overrides that find the run from the current folder
    (``workdir``, ``records_dir``, ``tracking.uri``) where they are not the defaults."""
    parts = [f"python run.py resume={run_id}"]
    if cfg.workdir != os.path.abspath(os.getcwd()):
        parts.append(f"workdir={cfg.workdir}")
    if cfg.records_dir != "records":
        parts.append(f"records_dir={cfg.records_dir}")
    if cfg.tracking.uri:
        parts.append(f"tracking.uri={cfg.tracking.uri}")
    return " ".join(parts)


def _run(cfg: ExperimentConfig, run: Prepared, run_id: str, record_path: str | None, on_start) -> None:
    """Tune the run; the MLflow run ends FINISHED, KILLED (a signal: :class:`RunStopped` with the
    ``resume=`` command) or FAILED (anything else); the target's workers and folders go either way."""
    status = "FAILED"
    try:
        record_path = record_path or new_run_dir(cfg, run_id, run.target, run.tracker)
        for callback in on_start:
            callback(run_id, record_path)
        _tune_all(cfg, run, record_path)
        status = "FINISHED"
    except DeviceUnavailable as exc:
        raise DeviceUnavailable(f"{exc}; run {run_id} is FAILED with its measurements kept: resume={run_id} "
                                "continues it") from None
    except KeyboardInterrupt as exc:  # RunStopped (SIGINT, SIGTERM), or Ctrl-C outside the main thread
        status = "KILLED"
        signum = exc.signum if isinstance(exc, RunStopped) else signal.SIGINT
        raise RunStopped(signum, f"run {run_id} stopped by {signal.Signals(signum).name} (MLflow status KILLED, "
                                 f"every measurement kept); resume with: {resume_command(cfg, run_id)}",
                         run_id=run_id) from None
    finally:
        run.target.close()
        run.tracker.end(status)


def _resume(cfg: ExperimentConfig, overrides):
    """The resume plan, with the tracker it opened (a store this call created is removed on error)."""
    created_store = new_store_path(cfg.tracking.uri, cfg.workdir)
    tracker = open_tracker(cfg)
    try:
        plan = plan_resume(tracker, cfg.resume, cfg, overrides)
    except BaseException:
        discard_store(created_store)
        raise
    plan.tracker = tracker
    return plan


def _start_run(cfg: ExperimentConfig, run: Prepared, record_path: str | None) -> str:
    """The MLflow run: reopened (``resume=``: after the calls an outage spooled in its folder are
    replayed) or created with the config as params and the run's tags."""
    if cfg.resume:
        run.tracker.attach_spool(os.path.dirname(record_path))
        run.tracker.reopen(cfg.resume)
        return cfg.resume
    names = {"method": cfg.method.name, "model": cfg.model.run_label(), "target": cfg.target.name}
    tags = {**names, "seed": cfg.seed, "device": run.target.info.device_name, "git_commit": git_commit(),
            **(run.target.run_tags() if isinstance(run.target, TimesKernels) else {})}
    return run.tracker.start(run_name=f"{names['method']}-{names['model']}-{names['target']}-s{cfg.seed}",
                             params=plain(cfg), tags=tags)


def _tune_all(cfg: ExperimentConfig, prepared: Prepared, record_path: str) -> None:
    """Tune every task of the run, then the run metrics, the run steps and the run files."""
    target, tracker = prepared.target, prepared.tracker
    run_dir = os.path.dirname(record_path)
    prior: dict[str, list[dict]] = {}
    for rec in read_records(record_path):
        prior.setdefault(rec["task_id"], []).append(rec)
    run = RunContext(cfg, target, prepared.tasks, tracker, prepared.history, run_dir=run_dir,
                     protocol=ProtocolRunner(target, cfg.measure, run_dir),
                     steps=run_steps(cfg, target, prepared.imported), entries=read_tasks_json(run_dir))
    removed = remove_dead_run_dirs()  # what runs killed with SIGKILL left behind
    if removed:
        log.info("removed %d temporary folder(s) of runs that are gone: %s", len(removed), ", ".join(removed))
    target.start()  # worker processes start before the clock: a one-time cost, not a per-trial one
    for key, value in run.protocol.start_run().items():
        tracker.metric(key, value)
    t_start, phase0 = time.perf_counter(), dict(target.stats)
    run.records = RecordFile(record_path, {"run_id": tracker.run_id, "method": cfg.method.name,
                                           "model": cfg.model.name, "target": cfg.target.name})
    with TuningProgress(len(run.tasks), enabled=cfg.progress) as run.progress:
        for task in run.tasks:
            run_task(run, task, prior.get(task.id, []))
    run.records.close()
    for k, v in run_metrics(run.totals, target, run.protocol, time.perf_counter() - t_start, phase0).items():
        tracker.metric(k, v)
    tracker.flush()
    errors = [e for e in (step.finish(run) for step in run.steps) if e]
    write_run_files(run_dir, run.totals, tracker, [a for step in run.steps for a in step.artifacts])
    if errors:
        raise E2EError("; ".join(errors))
