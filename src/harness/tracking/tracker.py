"""MLflow tracking: one MLflow run per Hydra job (what it logs: docs/USAGE.md §Metrics (MLflow)).

The default store is an embedded SQLite database in the working directory; ``tracking.uri`` may
name an MLflow server (``http(s)://...``) instead, which is checked for reachability before any
work starts.

A server that goes down in the middle of a run does not stop the measuring: the record file, which
the harness writes itself, stays the source of truth. The first call that cannot reach the server
logs one warning line; that call and every later one are appended to ``tracking_spool.jsonl`` in the
run's folder (artifacts by path). While the server is down a call goes to the network only when the
back-off interval (1 s, doubling up to 60 s) has passed; when one gets through, the spool is replayed
in order and the run goes on as before. At :meth:`Tracker.end` the spool is delivered within
``tracking.outage_wait_s`` seconds, or :class:`~tunebench.errors.TrackingOutage` says how to deliver
it later: ``resume=<run id>`` replays the spool first (:meth:`Tracker.reopen`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import urllib.error
import urllib.request
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from tunebench.errors import TrackingOutage, UserError
from tunebench.harness.stopping import signals_deferred
from tunebench.harness.tracking.spool import TrackingSpool, _reason, bounded_http, unreachable
from tunebench.run_lookup import quiet_mlflow

log = logging.getLogger(__name__)


quiet_mlflow()

MAX_PARAM_LEN = 6000
BACKOFF_START_S, BACKOFF_MAX_S = 1.0, 60.0
END_RETRY_S = 5.0  # at the end of a run: the longest pause between two delivery attempts
FLUSH_EVERY_S = 2.0  # per-trial metrics (search curves) reach the store at most this often (Tracker.flush_due)
_now, _sleep = time.monotonic, time.sleep  # the back-off clock (tests replace them)


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


def new_store_path(uri: str | None, workdir: str) -> str | None:
    """The embedded store's database file when opening ``uri`` would create it (else None)."""
    uri = resolve_uri(uri, workdir)
    path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
    return path if path and not os.path.exists(path) else None


def discard_store(path: str | None) -> None:
    """Remove an embedded store created by a run that then failed a check (no empty ``mlflow.db``);
    kept if it holds a run (another job of a parallel sweep may have started one meanwhile)."""
    import sqlite3

    if not path or not os.path.exists(path):
        return
    db = sqlite3.connect(path)
    try:
        if db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]:
            return
    except sqlite3.Error:
        return
    finally:
        db.close()
    for p in (path, f"{path}.lock"):
        if os.path.exists(p):
            os.remove(p)


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


@dataclass
class Outage:
    """The tracking server is down: since when, why, and when the next call may try the network."""

    since: float  # time.time() of the first failed call
    reason: str
    interval: float = BACKOFF_START_S
    next_try: float = 0.0  # on the monotonic clock

    def __post_init__(self) -> None:
        self.next_try = _now() + self.interval

    def failed_again(self, reason: str) -> None:
        """One more failed attempt: wait twice as long (at most :data:`BACKOFF_MAX_S`) before the next."""
        self.reason = reason
        self.interval = min(2 * self.interval, BACKOFF_MAX_S)
        self.next_try = _now() + self.interval


def _wait_s(value) -> float:
    try:
        wait = 60.0 if value is None else float(value)
    except (TypeError, ValueError):
        wait = -1.0
    if not wait >= 0:
        raise UserError(f"tracking.outage_wait_s={value}: must be a number >= 0 (seconds)")
    return wait


class Tracker:
    """Writes one MLflow run.

    Args:
        uri: tracking URI (None: ``sqlite:///<workdir>/mlflow.db``).
        experiment: MLflow experiment name.
        workdir: where the embedded store and its artifacts live.
        artifact_root: artifact location for a new experiment (None: ``<workdir>/mlartifacts``
            for the embedded store, the server's default otherwise).
        outage_wait_s: a server that went down during the run: how long :meth:`end` keeps trying
            to deliver the spooled calls before it raises :class:`TrackingOutage`.
        client: an ``MlflowClient``-like object to use instead of connecting (tests).
    """

    def __init__(self, uri: str | None, experiment: str, workdir: str, artifact_root: str | None = None,
                 outage_wait_s: float | None = 60.0, client=None):
        self.uri = resolve_uri(uri, workdir)
        self.remote = self.uri.startswith(("http://", "https://"))
        self.outage_wait_s = _wait_s(outage_wait_s)
        self.client = client if client is not None else self._connect()
        self.experiment = experiment
        if artifact_root is None and self.uri.startswith("sqlite:///"):
            artifact_root = os.path.join(os.path.abspath(workdir), "mlartifacts")
        self.artifact_root = artifact_root
        self.run_id: str | None = None
        self._pending: list = []
        self._flushed_at = time.monotonic()
        self.spool = TrackingSpool()
        self.outage: Outage | None = None
        self.record_path: str | None = None

    def _connect(self):
        from mlflow.tracking import MlflowClient

        quiet_mlflow()  # mlflow sets its loggers to INFO on import: no store-migration lines
        check_reachable(self.uri)
        with _store_lock(self.uri), self._net():
            client = MlflowClient(self.uri)
            client.search_experiments(max_results=1)  # creates / migrates the store now
        return client

    def _net(self):
        """:func:`bounded_http` for a server, nothing for a local store."""
        return bounded_http() if self.remote else nullcontext()

    def _experiment_id(self) -> str:
        with _store_lock(self.uri):
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is not None:
                return exp.experiment_id
            return self.client.create_experiment(self.experiment, artifact_location=self.artifact_root)

    def start(self, run_name: str, params: dict, tags: dict) -> str:
        """Create the run (a server that cannot be reached now: :class:`UserError`) and log ``params``."""
        try:
            with self._net():
                run = self.client.create_run(self._experiment_id(), run_name=run_name,
                                             tags={k: str(v) for k, v in tags.items()})
        except Exception as exc:
            if self.remote and unreachable(exc):
                raise UserError(f"tracking.uri={self.uri}: MLflow server unreachable ({_reason(exc)}); start it "
                                "or use the default embedded store (tracking.uri=null)") from None
            raise
        self.run_id = run.info.run_id
        items = [list(kv) for kv in flatten(params).items()]
        for i in range(0, len(items), 100):
            self._call({"op": "params", "run_id": self.run_id, "params": items[i:i + 100]})
        return self.run_id

    def attach_spool(self, run_dir: str) -> None:
        """Spool undelivered calls in ``run_dir`` (the folder of the run's ``records.jsonl``) from now on;
        call it as soon as the folder is known, for a new run and before :meth:`reopen` on a resume."""
        self.record_path = os.path.join(run_dir, "records.jsonl")
        self.spool.attach(run_dir)

    def reopen(self, run_id: str) -> None:
        """Continue an existing run (``resume=<run id>``): deliver what an earlier attempt spooled
        (see :meth:`attach_spool`), then mark the run RUNNING."""
        self.run_id = run_id
        if len(self.spool):
            self._recover()
        self._call({"op": "status", "run_id": run_id, "status": "RUNNING"})

    def get_run(self, run_id: str):
        from mlflow.exceptions import MlflowException

        try:
            with self._net():
                return self.client.get_run(run_id)
        except MlflowException as exc:
            if self.remote and unreachable(exc):
                raise UserError(f"tracking.uri={self.uri}: MLflow server unreachable ({_reason(exc)})") from None
            raise UserError(f"resume={run_id}: no such run in {self.uri}") from None

    def set_tags(self, tags: dict) -> None:
        self._call({"op": "tags", "run_id": self.run_id, "tags": {k: str(v) for k, v in tags.items()}})

    def metric(self, key: str, value: float, step: int = 0) -> None:
        """Queue one metric value; written by :meth:`flush` (batched: one database write per batch)."""
        self._pending.append([key, float(value), int(time.time() * 1000), int(step)])

    def flush(self) -> None:
        for i in range(0, len(self._pending), 1000):
            self._call({"op": "metrics", "run_id": self.run_id, "metrics": self._pending[i:i + 1000]})
        self._pending = []
        self._flushed_at = time.monotonic()

    def flush_due(self) -> None:
        """:meth:`flush` if :data:`FLUSH_EVERY_S` have passed since the last one: what a search logs per
        trial reaches the store in batches (a store write costs ~7 ms on SQLite, a replayed trial well under
        1 ms); every value keeps its own timestamp and step, and :meth:`end` writes what is left."""
        if time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
            self.flush()

    def artifact(self, path: str) -> None:
        self._call({"op": "artifact", "run_id": self.run_id, "path": os.path.abspath(path)})

    def end(self, status: str = "FINISHED") -> None:
        """End the run. Calls still spooled (the server went down) get ``tracking.outage_wait_s`` seconds
        to be delivered (none unless ``status`` is FINISHED: an error is already on its way).

        Raises:
            TrackingOutage: a FINISHED run whose spool could not be delivered.
        """
        if self.run_id is None:
            return
        try:
            self.flush()
        finally:
            self._call({"op": "end", "run_id": self.run_id, "status": status, "end_time": int(time.time() * 1000)})
        if len(self.spool) and not self._deliver(self.outage_wait_s if status == "FINISHED" else 0.0):
            if status == "FINISHED":
                raise TrackingOutage(self.outage_message())
            log.warning("%s", self.outage_message())

    def outage_message(self) -> str:
        """One line: the server, since when, how many calls are spooled where, and how to deliver them."""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.outage.since)) if self.outage else "?"
        reason = f" ({self.outage.reason})" if self.outage else ""
        where = self.spool.path or "memory (no run folder yet; lost at exit)"
        kept = f"; every measurement is in {self.record_path}" if self.record_path else ""
        return (f"tracking server {self.uri} unreachable since {since}{reason}; {len(self.spool)} tracking calls "
                f"spooled in {where}{kept}; resume with: python run.py resume={self.run_id} tracking.uri={self.uri}")

    # -- calls, spooling and replay -------------------------------------------------------------

    def _call(self, op: dict) -> None:
        """Make one tracker call; one that cannot reach the server is spooled instead, and while the
        server is down nothing goes to the network before the back-off interval has passed."""
        if not self.remote:
            with signals_deferred():
                self._apply(op)
            return
        if self.outage is not None and (_now() < self.outage.next_try or not self._recover()):
            self.spool.append(op)
            return
        try:
            with bounded_http():
                self._apply(op)
        except Exception as exc:
            if not unreachable(exc):
                raise
            self._went_down(exc)
            self.spool.append(op)

    def _apply(self, op: dict) -> None:
        """Send one call (a dict, as spooled) to the store."""
        from mlflow.entities import Metric, Param

        kind, run_id, c = op["op"], op["run_id"], self.client
        if kind == "metrics":
            c.log_batch(run_id, metrics=[Metric(k, v, ts, step) for k, v, ts, step in op["metrics"]])
        elif kind == "params":
            c.log_batch(run_id, params=[Param(k, v) for k, v in op["params"]])
        elif kind == "tags":
            for k, v in op["tags"].items():
                c.set_tag(run_id, k, v)
        elif kind == "artifact":
            c.log_artifact(run_id, op["path"])
        elif kind == "status":
            c.update_run(run_id, status=op["status"])
        elif kind == "end":
            c.set_terminated(run_id, status=op["status"], end_time=op["end_time"])
        else:
            raise ValueError(f"unknown tracking call {kind!r}")

    def _went_down(self, exc: BaseException) -> None:
        """A call could not reach the server: the first time, one warning line; later, a longer back-off."""
        if self.outage is not None:
            self.outage.failed_again(_reason(exc))
            return
        self.outage = Outage(since=time.time(), reason=_reason(exc))
        records = self.record_path or "the run's records.jsonl"
        log.warning("tracking server %s unreachable (%s); measuring on into %s; tracking calls spooled in %s; "
                    "retrying every ≤%d s", self.uri, self.outage.reason, records,
                    self.spool.path or "the run folder", BACKOFF_MAX_S)

    def _replay(self) -> bool:
        """Send the spooled calls in order; False (and the rest kept) when the server cannot be reached.
        A call the server rejects (its answer is an error) is dropped with one warning line."""
        done, rejected = 0, []
        try:
            with self._net():
                for op in self.spool.ops():
                    try:
                        self._apply(op)
                    except Exception as exc:
                        if unreachable(exc):
                            self._went_down(exc)
                            return False
                        rejected.append(f"{op.get('op')}: {_reason(exc)}")
                    done += 1
        finally:
            self.spool.drop(done)
        if rejected:
            log.warning("tracking: %d spooled calls rejected by the server and dropped (first: %s)",
                        len(rejected), rejected[0])
        return True

    def _recover(self) -> bool:
        """Try to deliver the spool now; True (and the outage over) when it all got through."""
        n = len(self.spool)
        if not self._replay():
            return False
        if self.outage is not None:
            log.info("tracking server back; %d spooled calls replayed", n)
            self.outage = None
        elif n:
            log.info("tracking: %d spooled calls of an earlier attempt replayed", n)
        return True

    def _deliver(self, wait_s: float) -> bool:
        """Try to deliver the spool for at most ``wait_s`` seconds (one attempt at least)."""
        deadline = _now() + wait_s
        while not self._recover():
            left = deadline - _now()
            if left <= 0:
                return False
            pause = self.outage.interval if self.outage else BACKOFF_START_S
            _sleep(min(pause, END_RETRY_S, left))
        return True
