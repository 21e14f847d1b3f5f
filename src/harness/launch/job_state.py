"""What a Hydra job leaves in its own folder for whoever launched it: ``run.json``, the MLflow run id
and record file of the job's run, written as soon as the run exists (before anything is measured).

A launcher that lost a job (its worker or node died) reads it to resubmit the job as
``resume=<run id>``; a job lost before its run existed has no ``run.json`` and is simply run again.
"""

from __future__ import annotations

import json
import os

from tunebench.safe_files import atomic_write_bytes

RUN_FILE = "run.json"


def write_run_file(job_dir: str, run_id: str, record_path: str) -> None:
    """Leave ``<job_dir>/run.json`` naming the job's run (replaced atomically)."""
    data = json.dumps({"run_id": run_id, "records": record_path}).encode()
    atomic_write_bytes(os.path.join(job_dir, RUN_FILE), data, mode=0o644)


def read_run_file(job_dir: str) -> dict | None:
    """The ``run.json`` a job left in ``job_dir``, or None when it has none (or an unreadable one)."""
    try:
        with open(os.path.join(job_dir, RUN_FILE)) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("run_id"), str) else None
