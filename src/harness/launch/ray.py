"""Hydra sweeps on Ray (``hydra/launcher=tunebench_ray``): one Ray task per job.

The driver (``python run.py -m ...``) composes every job's config as Hydra's own launchers do, then
submits each job as a Ray task that reserves ``num_cpus_per_job`` CPUs (and ``num_gpus_per_job``
GPUs). A task runs the job in the driver's working directory with the driver's resolved sweep
folder, so records, the embedded MLflow store and the Hydra job folders land where the driver (and
the leaderboard) find them: nodes must see the driver's folders at the same paths (one machine, or
a shared file system). Measurements of jobs on one node never overlap: the per-device file lock of
the targets holds across processes; on different nodes they are different devices.

A job whose worker or node dies is *lost*, not failed: it is submitted again as
``resume=<its run id>`` (the run id it left in its job folder, :mod:`tunebench.harness.launch.job_state`)
up to ``max_resumes`` times, on whatever node has room. A job lost before its run existed is
simply run again. Jobs that fail (bad config, a wrong kernel) are reported like Hydra's other
launchers report them, and are never resubmitted. Ray never retries a task by itself
(``max_retries=0``): a blind retry would start a second run of the same job.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunebench.config.knobs import NONNEG_INT, NONNEG_NUM, POS_INT, Settings, is_int, knob, opt, rule
from tunebench.config.load import typed
from tunebench.errors import UserError
from tunebench.harness.launch.job_state import read_run_file

log = logging.getLogger(__name__)

ADDRESS = re.compile(r"^(auto|(ray://)?[A-Za-z0-9_.\-]+:\d{1,5})$")


def _address(v) -> bool:
    return v is None or bool(ADDRESS.match(str(v)))


@dataclass
class RaySettings(Settings):
    """``hydra/launcher=tunebench_ray``: every job of a ``python run.py -m ...`` sweep as one Ray task
    (docs/USAGE.md §Scale out). Needs the ``scale`` extra (``make install EXTRAS=test,scale``)."""

    _target_: str = knob("hydra_plugins.tunebench_launchers.ray_launcher.RayLauncher", None,
                         "Hydra's launcher class (the plugin in hydra_plugins/tunebench_launchers/)")
    address: str | None = knob(None, rule(_address, "is not a Ray address; valid: null (a local instance), auto, "
                                                     "host:port or ray://host:port"),
                               'null: start a Ray instance on this machine for the sweep; "auto" or host:port: '
                               "join that running cluster")
    num_cpus: int | None = knob(None, opt(POS_INT), "the local instance's CPUs (null: all of this machine's); "
                                                    "ignored when joining a cluster")
    num_cpus_per_job: float = knob(1.0, NONNEG_NUM, "Ray CPUs a job reserves: at most (cluster CPUs / this) jobs "
                                                    "run at once; set target.num_cores to match")
    num_gpus_per_job: float = knob(0.0, NONNEG_NUM, "Ray GPUs a job reserves (target=cuda: 1)")
    object_store_memory_mb: int = knob(200, rule(lambda v: is_int(v) and v >= 75, "must be an integer >= 75"),
                                       "the local instance's object store; jobs pass only configs and results "
                                       "through it")
    max_resumes: int = knob(1, NONNEG_INT, "a job lost with its worker or node is submitted again as "
                                           "resume=<its run id>, at most this many times")

    @classmethod
    def load(cls, settings) -> RaySettings:
        """The launcher's settings as Hydra gives them (a mapping), typed and checked."""
        return typed(cls, dict(settings), "hydra.launcher")


@dataclass
class _Job:
    idx: int
    overrides: list[str]
    config: Any  # the job's composed config (DictConfig)
    job_dir: str
    resumes: int = 0


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("hydra/launcher=tunebench_ray needs Ray, which is not installed; install the "
                        "scale extra: pip install -e '.[scale]'") from None
    return ray


def launch(settings: dict, hydra_context, task_function, config, job_overrides: Sequence[Sequence[str]],
           initial_job_idx: int) -> list:
    """Run the jobs ``job_overrides`` (numbered from ``initial_job_idx``) on Ray; their
    ``JobReturn`` s in order. Bad settings, a missing Ray or an unreachable cluster end the sweep
    with one ``error:`` line (exit 2) before any job starts."""
    from hydra.core.utils import configure_log, setup_globals

    from tunebench.harness.commands.cli import fail

    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    try:
        opts = RaySettings.load(settings)
        ray = _import_ray()
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        jobs = [_compose(hydra_context, config, list(o), initial_job_idx + i, str(sweep_dir))
                for i, o in enumerate(job_overrides)]
        _connect(ray, opts)
    except UserError as exc:
        fail(str(exc))
    try:
        log.info("Ray: %d jobs on %s; %s CPUs per job; results in %s", len(jobs), _describe_cluster(ray),
                 opts.num_cpus_per_job, sweep_dir)
        return _run_all(ray, opts, hydra_context, task_function, config, jobs)
    finally:
        ray.shutdown()


def _compose(hydra_context, config, overrides: list[str], idx: int, sweep_dir: str) -> _Job:
    """The job's config as Hydra's launchers compose it, with the sweep folder fixed to the driver's
    (``${now:...}`` would resolve again, differently, in the worker)."""
    from omegaconf import OmegaConf, open_dict

    cfg = hydra_context.config_loader.load_sweep_config(config, overrides)
    with open_dict(cfg):
        cfg.hydra.job.id = f"{cfg.hydra.job.name}_{idx}"
        cfg.hydra.job.num = idx
        cfg.hydra.sweep.dir = sweep_dir
        cfg.hydra.sweep.subdir = str(OmegaConf.select(cfg, "hydra.sweep.subdir"))
    return _Job(idx, overrides, cfg, os.path.join(sweep_dir, str(cfg.hydra.sweep.subdir)))


def _connect(ray, opts: RaySettings) -> None:
    kwargs: dict = {"log_to_driver": True, "configure_logging": False}
    if opts.address is None:  # "local": a new instance, never the cluster last started on this machine
        kwargs.update(address="local", num_cpus=opts.num_cpus, include_dashboard=False,
                      object_store_memory=opts.object_store_memory_mb * 1024 * 1024)
    else:
        _check_reachable(opts.address)
        kwargs["address"] = opts.address
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        hint = ("; a cluster started with `ray start` wants token authentication: export RAY_AUTH_MODE=token "
                "(the token: ~/.ray/auth_token or RAY_AUTH_TOKEN_PATH)" if opts.address else "")
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"hydra.launcher.address={opts.address!r}: cannot start or join Ray ({why}){hint}") from None


def _check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """Fail fast on a host:port nothing listens on (Ray itself would retry for minutes)."""
    if address == "auto":
        return
    host, port = address.removeprefix("ray://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UserError(f"hydra.launcher.address={address!r}: nothing answers there ({exc.strerror or exc}); "
                        "start the cluster first (ray start --head) or leave address null for a local "
                        "instance") from None


def _describe_cluster(ray) -> str:
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)
    return f"{len(nodes)} node(s), {cpus:g} CPUs"


def _run_all(ray, opts: RaySettings, hydra_context, task_function, config, jobs: list[_Job]) -> list:
    """Submit every job, wait for them, resubmit lost ones as resumes; the returns in job order."""
    from hydra.core.singleton import Singleton

    remote = ray.remote(_run_job).options(num_cpus=opts.num_cpus_per_job, num_gpus=opts.num_gpus_per_job,
                                          max_retries=0)
    state, cwd = Singleton.get_state(), os.getcwd()

    def submit(job: _Job):
        return remote.remote(job.config, hydra_context, task_function, state, cwd)

    pending = {submit(job): job for job in jobs}
    returns: dict[int, Any] = {}
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        job = pending.pop(ref)
        try:
            ret, node = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # raised outside the job (unpickling, set-up)
            returns[job.idx] = _failed_return(job, exc)
            log.error("job %d (%s) failed outside the job: %s", job.idx, " ".join(job.overrides), exc)
            continue
        except ray.exceptions.RayError as exc:  # the worker or its node died
            retry = _lost(hydra_context, config, job, opts, exc)
            if retry is None:
                returns[job.idx] = _failed_return(job, exc)
            else:
                pending[submit(retry)] = retry
            continue
        returns[job.idx] = ret
        log.info("job %d (%s) %s on node %s", job.idx, " ".join(job.overrides), ret.status.name.lower(), node[:8])
    return [returns[job.idx] for job in jobs]


def _lost(hydra_context, config, job: _Job, opts: RaySettings, exc: Exception) -> _Job | None:
    """The job to submit in place of ``job``, lost with its worker or node: a resume of its run (or
    the job again when its run never started); None once ``max_resumes`` is used up."""
    why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    run = read_run_file(job.job_dir)
    if job.resumes >= opts.max_resumes:
        hint = f"; resume it with: python run.py resume={run['run_id']}" if run else ""
        log.error("job %d (%s) lost with its worker or node (%s); max_resumes=%d used up%s", job.idx,
                  " ".join(job.overrides), why, opts.max_resumes, hint)
        return None
    overrides = [o for o in job.overrides if not o.startswith("resume=")]
    if run:
        overrides.append(f"resume={run['run_id']}")
    log.warning("job %d lost with its worker or node (%s); %s (attempt %d of %d)", job.idx, why,
                f"resuming run {run['run_id']}" if run else "its run had not started: running it again",
                job.resumes + 1, opts.max_resumes)
    again = _compose(hydra_context, config, overrides, job.idx, str(Path(job.job_dir).parent))
    again.resumes = job.resumes + 1
    return again


def _failed_return(job: _Job, exc: BaseException):
    from hydra.core.utils import JobReturn, JobStatus

    return JobReturn(overrides=job.overrides, cfg=job.config, working_dir=job.job_dir,
                     task_name=str(job.config.hydra.job.name), status=JobStatus.FAILED, _return_value=exc)


def _run_job(sweep_config, hydra_context, task_function, singleton_state, cwd: str):
    """One job, inside a Ray worker: in the driver's working directory, with the driver's Hydra
    state. A job that exits (``run.py`` ends bad input with exit code 2) is a failed return, not a
    dead worker."""
    import ray
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals

    os.chdir(cwd)
    setup_globals()
    Singleton.set_state(singleton_state)
    node = ray.get_runtime_context().get_node_id()
    try:
        ret = run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_config,
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as exc:
        error = RuntimeError(f"the job exited with code {exc.code} (its error line is in the log above)")
        ret = JobReturn(overrides=list(sweep_config.hydra.overrides.task), cfg=sweep_config,
                        working_dir=cwd, task_name=str(sweep_config.hydra.job.name),
                        status=JobStatus.FAILED, _return_value=error)
    return ret, node
