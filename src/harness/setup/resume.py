"""``resume=<run id>``: continue a run from its record file, with its own saved config.

Safe on a shared tracking server: the record file named by the run's tag must lie under this work
dir's records folder (``<workdir>/<records_dir>``; point ``records_dir`` at another folder to trust
it), and a worker handler module or checkpoint named in the saved config is used only when the same
value is given on the command line. Overrides other than :data:`RESUMABLE` must agree with the
saved config: a resumed run keeps its method, model, target and budget.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass

import yaml

from tunebench.config.experiment import ExperimentConfig
from tunebench.config.load import dotted_get, dotted_set
from tunebench.errors import UserError
from tunebench.harness.setup.load import load_experiment
from tunebench.harness.setup.store import GROUPS
from tunebench.run_lookup import RECORD_TAG, within

log = logging.getLogger(__name__)

# top-level keys a resume may change (e2e: the end-to-end step runs after the tuning)
RESUMABLE = ("resume", "tracking", "progress", "workdir", "records_dir", "e2e", "hydra")
# saved values that import code or load a file: used only when given again on the command line
TRUSTED_ONLY = ("target.handler", "method.pretrained")


@dataclass
class ResumePlan:
    cfg: ExperimentConfig  # the saved config with the allowed overrides applied
    record_path: str
    finished: bool  # the run already ended FINISHED: nothing to do
    tracker: object = None  # the tracker the plan was made with (set by the caller)


def override_keys(overrides: list[str] | None) -> list[str]:
    """The dotted keys of command-line overrides (``+a.b=1`` -> ``a.b``)."""
    return [o.split("=", 1)[0].lstrip("+~") for o in overrides or [] if "=" in o]


def _record_file(run, run_id: str, records_root: str) -> str:
    path = run.data.tags.get(RECORD_TAG)
    if not path:
        raise UserError(f"resume={run_id}: the run has no record file tag ({RECORD_TAG}); not a tunebench run")
    real = within(path, [records_root])
    if real is None:
        raise UserError(f"resume={run_id}: its record file {path} is not under {records_root}; resume from "
                        "the work dir that ran it, or set records_dir=<the folder holding its run folder>")
    if not os.path.isfile(real):
        raise UserError(f"resume={run_id}: its record file {path} is not on this machine")
    return real


def _saved_config(run_id: str, record_path: str) -> ExperimentConfig:
    cfg_path = os.path.join(os.path.dirname(record_path), "config.yaml")
    try:
        with open(cfg_path) as fh:
            saved = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"resume={run_id}: cannot read {cfg_path} ({type(exc).__name__})") from None
    if not isinstance(saved, dict) or not all(isinstance(saved.get(g), dict) for g in GROUPS):
        raise UserError(f"resume={run_id}: {cfg_path} is not a tunebench run config")
    try:
        return load_experiment(saved)
    except UserError as exc:
        raise UserError(f"resume={run_id}: {cfg_path}: {exc}") from None


def _check_overrides(run_id: str, saved: ExperimentConfig, cfg: ExperimentConfig, keys: list[str]) -> None:
    for key in keys:
        if key.split(".")[0] in RESUMABLE:
            continue
        new, old = dotted_get(cfg, key, None), dotted_get(saved, key, None)
        if key in GROUPS and key != "budget":
            new, old = getattr(new, "name", new), getattr(old, "name", old)
        if new != old:
            raise UserError(f"resume={run_id}: {key}={new!r} conflicts with the run's {key}={old!r}; a resumed run "
                            "keeps its config (may change: tracking.*, progress, workdir, records_dir, e2e.*)")
    for key in TRUSTED_ONLY:
        old = dotted_get(saved, key, None)
        if old and dotted_get(cfg, key, None) != old:
            raise UserError(f"resume={run_id}: the run's config sets {key}={old!r}; give {key}={old} on the "
                            "command line to allow it (a resumed config never imports or loads it on its own)")


def plan_resume(tracker, run_id: str, cfg: ExperimentConfig, overrides: list[str] | None) -> ResumePlan:
    """Check a resume request and build the config it runs with.

    Args:
        tracker: the open :class:`~tunebench.harness.tracking.Tracker`.
        run_id: the run to continue.
        cfg: the config composed from this command line (its ``workdir``/``records_dir`` locate the
            records; its tracking and e2e settings apply).
        overrides: the command line's overrides (None: none are checked; the saved config runs).
    """
    run = tracker.get_run(run_id)
    records_root = os.path.realpath(os.path.join(cfg.workdir, cfg.records_dir))
    record_path = _record_file(run, run_id, records_root)
    saved = _saved_config(run_id, record_path)
    keys = override_keys(overrides)
    _check_overrides(run_id, saved, cfg, keys)
    merged = dataclasses.replace(saved, resume=run_id, tracking=cfg.tracking, workdir=cfg.workdir,
                                 records_dir=cfg.records_dir, progress=cfg.progress)
    for key in keys:
        if key.split(".")[0] == "e2e":
            dotted_set(merged, key, dotted_get(cfg, key, None))
    return ResumePlan(cfg=merged, record_path=record_path, finished=run.info.status == "FINISHED")
