"""A run's folder ``<workdir>/<records_dir>/<run id>/``: created with the run's config before anything
is measured; ``tasks.json`` and ``checks.jsonl`` as each task ends; when the run ends, every file as an
MLflow artifact. Also the run's ``git_commit`` tag."""

from __future__ import annotations

import json
import logging
import os
import subprocess

import yaml

from tunebench.config.load import plain
from tunebench.run_lookup import RECORD_TAG
from tunebench.safe_files import atomic_write_bytes

log = logging.getLogger(__name__)

RUN_FILES = ("records.jsonl", "config.yaml", "tasks.json", "checks.jsonl", "retimed.jsonl")


def git_commit() -> str:
    """The commit of tunebench's checkout (``-dirty`` with uncommitted changes), or ``unknown``."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha or "unknown") + ("-dirty" if dirty else "")


def new_run_dir(cfg, run_id: str, target, tracker) -> str:
    """The run's records folder with its config; returns the record file's path."""
    run_dir = os.path.join(cfg.workdir, cfg.records_dir, run_id)
    os.makedirs(run_dir, exist_ok=True)
    tracker.attach_spool(run_dir)  # a tracking server that goes down: its calls are spooled here
    with open(os.path.join(run_dir, "config.yaml"), "w") as fh:
        yaml.safe_dump(plain(cfg), fh, sort_keys=False)
    record_path = os.path.join(run_dir, "records.jsonl")
    tracker.set_tags({RECORD_TAG: record_path, "device_info": json.dumps(target.describe())})
    return record_path


def write_tasks_json(run_dir: str, summaries: list[dict]) -> None:
    """``tasks.json``: one entry per tuned task (written whole, through a temporary file)."""
    atomic_write_bytes(os.path.join(run_dir, "tasks.json"), json.dumps(summaries, indent=1).encode(), mode=0o644)


def append_checks(run_dir: str, checks: list[dict]) -> None:
    """A task's output checks, appended to ``checks.jsonl``."""
    if checks:
        with open(os.path.join(run_dir, "checks.jsonl"), "a") as fh:
            fh.writelines(json.dumps(c) + "\n" for c in checks)


def read_tasks_json(run_dir: str) -> dict[str, dict]:
    """The ``tasks.json`` entries of an earlier attempt, by task id (none when missing or unreadable)."""
    path = os.path.join(run_dir, "tasks.json")
    try:
        with open(path) as fh:
            entries = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s); every task is re-timed", path, type(exc).__name__)
        return {}
    return {e["id"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)} \
        if isinstance(entries, list) else {}


def write_run_files(run_dir: str, totals, tracker, extra_artifacts=()) -> None:
    """``tasks.json``, every run file as an artifact; the tasks without a valid, output-checked config
    are tagged and named in a warning."""
    write_tasks_json(run_dir, totals.summaries)
    for name in RUN_FILES + tuple(extra_artifacts):
        if os.path.exists(os.path.join(run_dir, name)):
            tracker.artifact(os.path.join(run_dir, name))
    if not totals.all_tuned:
        bad = [s["name"] for s in totals.summaries if s["best_trial"] is None]
        tracker.set_tags({"tunebench.tasks_without_result": ",".join(bad)})
        log.warning("no valid, output-checked config for task(s) %s", ", ".join(bad))
