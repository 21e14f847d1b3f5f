"""Where a run's files are: one place that turns a run id, a run folder or a record file into paths.

A run writes ``<workdir>/<records_dir>/<run id>/`` (``records.jsonl``, ``config.yaml``, ``tasks.json``,
``checks.jsonl``, ``retimed.jsonl``) and tags its MLflow run with the record file's path
(:data:`RECORD_TAG`); the files are also logged as artifacts. A reader on another machine gets them
from the tracking server. History loading (``method.history``), GAT training sets, the leaderboard and
resume all resolve runs here.
"""

from __future__ import annotations

import logging
import os

from tunebench.errors import UserError

RECORD_TAG = "tunebench.record_file"  # MLflow run tag: the path of the run's record file
RECORDS = "records.jsonl"


def quiet_mlflow() -> None:
    """MLflow's and alembic's INFO lines (store creation, migrations) are not shown."""
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def within(path: str, roots) -> str | None:
    """The real path of ``path`` (symlinks resolved) when it lies under one of the folders ``roots``,
    else None: a run's tag names a file, and a tracking store shared with others may name any file."""
    real = os.path.realpath(path)
    for root in roots:
        root = os.path.realpath(root)
        if os.path.commonpath([real, root]) == root:
            return real
    return None


def local_run_folder(ref: str, workdir: str, records_dir: str = "records") -> str | None:
    """The run folder for ``ref`` on this machine: a folder, a ``records.jsonl`` inside one, or a run
    id under ``<workdir>/<records_dir>``; None when there is none."""
    if os.path.isfile(ref) and ref.endswith(".jsonl"):
        return os.path.dirname(os.path.abspath(ref))
    if os.path.isdir(ref):
        return os.path.abspath(ref)
    cand = os.path.join(workdir, records_dir, ref)
    return cand if os.path.isdir(cand) else None


def run_file(client, run_id: str, name: str, cache_dir: str, record_file: str | None = None) -> str | None:
    """A file of MLflow run ``run_id`` (``records.jsonl``, ``tasks.json``, ...): beside its tagged
    record file when that is on this machine, else the run's artifact downloaded into
    ``<cache_dir>/<run id>/``; None when neither can be had.

    ``record_file``: the run's :data:`RECORD_TAG` value when the caller has it (None: read from the run).
    """
    if record_file is None and client is not None:
        try:
            record_file = client.get_run(run_id).data.tags.get(RECORD_TAG)
        except Exception:
            return None
    if record_file:
        local = os.path.join(os.path.dirname(record_file), name)
        if os.path.isfile(local):
            return local
    if client is None:
        return None
    dst = os.path.join(cache_dir, run_id)
    os.makedirs(dst, exist_ok=True)
    try:
        return client.download_artifacts(run_id, name, dst)
    except Exception:
        return None


def record_file(ref: str, client, workdir: str, what: str) -> str:
    """The record file for ``ref``: a record file, a run folder holding one, a run id under
    ``<workdir>/records``, or an MLflow run id (its tagged file, else its artifact, downloaded into
    ``<workdir>/history/<run id>/``).

    Args:
        what: how the user gave ``ref`` (e.g. ``method.history``), for the error message.

    Raises:
        UserError: ``ref`` is neither a file, a folder, nor a run with readable records.
    """
    if os.path.isfile(ref):
        return ref
    folder = local_run_folder(ref, workdir)
    if folder and os.path.isfile(os.path.join(folder, RECORDS)):
        return os.path.join(folder, RECORDS)
    hint = "a record file (records.jsonl), a run folder, or an MLflow run id"
    if client is None:
        raise UserError(f"{what}={ref}: no such file; valid: {hint}")
    from mlflow.exceptions import MlflowException

    try:
        client.get_run(ref)
    except MlflowException:
        raise UserError(f"{what}={ref}: neither a file nor a run in the tracking store; valid: {hint}") from None
    path = run_file(client, ref, RECORDS, os.path.join(workdir or os.getcwd(), "history"))
    if path is None:
        raise UserError(f"{what}={ref}: the run's {RECORDS} is not available")
    return path
