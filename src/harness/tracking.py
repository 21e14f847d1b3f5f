"""MLflow tracking: one MLflow run per Hydra job (DESIGN.md §Tracking layout).

The default store is an embedded SQLite database in the working directory; ``tracking.uri`` may
name an MLflow server (``http(s)://...``) instead, which is checked for reachability before any
work starts.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from contextlib import contextmanager
import urllib.error
import urllib.request

from tunebench.errors import UserError

log = logging.getLogger(__name__)
logging.getLogger("mlflow").setLevel(logging.WARNING)
logging.getLogger("alembic").setLevel(logging.WARNING)

MAX_PARAM_LEN = 6000


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}``; lists become JSON text."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            text = json.dumps(v) if isinstance(v, (list, tuple)) else str(v)
            out[key] = text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."
    return out


def resolve_uri(uri: str | None, workdir: str) -> str:
    return uri or f"sqlite:///{os.path.join(os.path.abspath(workdir), 'mlflow.db')}"


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    """Raise :class:`UserError` when the tracking store at ``uri`` cannot be used."""
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as resp:
                if resp.status != 200:
                    raise UserError(f"tracking.uri={uri}: MLflow server answered HTTP {resp.status} on /health")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UserError(f"tracking.uri={uri}: MLflow server unreachable ({reason}); start it or use the "
                            "default embedded store (tracking.uri=null)") from None
    elif uri.startswith("sqlite:///"):
        folder = os.path.dirname(uri[len("sqlite:///"):]) or "."
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise UserError(f"tracking.uri={uri}: folder {folder} does not exist or is not writable")
    elif uri.startswith(("file:", "/")):
        folder = uri[len("file://"):] if uri.startswith("file://") else uri
        parent = os.path.dirname(os.path.abspath(folder))
        if not os.path.isdir(parent):
            raise UserError(f"tracking.uri={uri}: folder {parent} does not exist")
    else:
        raise UserError(f"tracking.uri={uri}: unsupported scheme; valid: sqlite:///path, file:/path, http(s)://host")


@contextmanager
def _store_lock(uri: str):
    """Serialize creating/migrating an embedded SQLite store (and its experiments) across the
    processes of a parallel sweep; a no-op for servers, which serialize themselves."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    with open(uri[len("sqlite:///"):] + ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Tracker:
    """Writes one MLflow run.

    Args:
        uri: tracking URI (None: ``sqlite:///<workdir>/mlflow.db``).
        experiment: MLflow experiment name.
        workdir: where the embedded store and its artifacts live.
        artifact_root: artifact location for a new experiment (None: ``<workdir>/mlartifacts``
            for the embedded store, the server's default otherwise).
    """

    def __init__(self, uri: str | None, experiment: str, workdir: str, artifact_root: str | None = None):
        from mlflow.tracking import MlflowClient

        self.uri = resolve_uri(uri, workdir)
        check_reachable(self.uri)
        with _store_lock(self.uri):
            self.client = MlflowClient(self.uri)
            self.client.search_experiments(max_results=1)  # creates / migrates the store now
        self.experiment = experiment
        if artifact_root is None and self.uri.startswith("sqlite:///"):
            artifact_root = os.path.join(os.path.abspath(workdir), "mlartifacts")
        self.artifact_root = artifact_root
        self.run_id: str | None = None
        self._pending: list = []

    def _experiment_id(self) -> str:
        with _store_lock(self.uri):
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is not None:
                return exp.experiment_id
            return self.client.create_experiment(self.experiment, artifact_location=self.artifact_root)

    def start(self, run_name: str, params: dict, tags: dict) -> str:
        run = self.client.create_run(self._experiment_id(), run_name=run_name,
                                     tags={k: str(v) for k, v in tags.items()})
        self.run_id = run.info.run_id
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])
        return self.run_id

    def reopen(self, run_id: str) -> None:
        """Continue an existing run (``resume=<run id>``)."""
        self.run_id = run_id
        self.client.update_run(run_id, status="RUNNING")

    def get_run(self, run_id: str):
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_run(run_id)
        except MlflowException:
            raise UserError(f"resume={run_id}: no such run in {self.uri}") from None

    def set_tags(self, tags: dict) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, str(v))

    def metric(self, key: str, value: float, step: int = 0) -> None:
        """Queue one metric value; written by :meth:`flush` (batched: one database write per batch)."""
        from mlflow.entities import Metric

        self._pending.append(Metric(key, float(value), int(time.time() * 1000), int(step)))

    def flush(self) -> None:
        for i in range(0, len(self._pending), 1000):
            self.client.log_batch(self.run_id, metrics=self._pending[i:i + 1000])
        self._pending = []

    def artifact(self, path: str) -> None:
        self.client.log_artifact(self.run_id, path)

    def end(self, status: str = "FINISHED") -> None:
        if self.run_id is None:
            return
        try:
            self.flush()
        finally:
            self.client.set_terminated(self.run_id, status=status)
