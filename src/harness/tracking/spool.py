"""What a :class:`~tunebench.harness.tracking.Tracker` needs when its server goes down: MLflow's HTTP
calls bounded to seconds, telling an outage from an error the server answered with, and the spool of
calls the server has not received (``<run dir>/tracking_spool.jsonl``)."""

from __future__ import annotations

import json
import logging
import os
import re
from contextlib import contextmanager

from tunebench.safe_files import atomic_write_bytes

SPOOL_NAME = "tracking_spool.jsonl"
# MLflow's HTTP client retries a failed call for minutes (7 retries, back-off factor 2, 120 s timeout);
# around our calls one call gives up after one retry, or 5 s without an answer.
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}


@contextmanager
def bounded_http():
    """Within this block MLflow's HTTP calls fail within seconds (:data:`HTTP_BOUNDS`) and urllib3's
    per-retry warning is muted. MLflow reads these variables on every request
    (``mlflow.utils.rest_utils.http_request``), so setting them around our own calls bounds our client
    only; a value the user exported is left as it is."""
    ours = [k for k in HTTP_BOUNDS if k not in os.environ]
    pool_log = logging.getLogger("urllib3.connectionpool")
    level = pool_log.level
    os.environ.update({k: HTTP_BOUNDS[k] for k in ours})
    pool_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for k in ours:
            os.environ.pop(k, None)
        pool_log.setLevel(level)


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says the server could not be reached:
    no connection, no answer in time, or only 5xx answers. An error the server answered with
    (``RestException``: a bad value, an unknown run) is not an outage."""
    import requests
    from mlflow.exceptions import RestException

    net = (requests.exceptions.ConnectionError, requests.exceptions.Timeout, requests.exceptions.RetryError,
           ConnectionError, TimeoutError)
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, RestException):
            return False
        if isinstance(e, net):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _reason(exc: BaseException) -> str:
    """A short, one-line reason: ``[Errno 111] Connection refused``, ``timed out``, or the message's start."""
    text = " ".join(str(exc).split())
    m = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    if m:
        return m.group(0).strip()
    if "timed out" in text.lower() or "timeout" in text.lower():
        return "timed out"
    return text[:160] or type(exc).__name__


def _read_ops(path: str) -> list[dict]:
    """The calls spooled in ``path`` (none if it is not there); a line cut off by a kill is skipped."""
    if not os.path.exists(path):
        return []
    ops = []
    with open(path) as fh:
        for line in fh:
            try:
                ops.append(json.loads(line))
            except ValueError:
                continue
    return ops


class TrackingSpool:
    """Tracker calls the server has not received, in call order: one JSON object a line in
    ``<run dir>/tracking_spool.jsonl``; held in memory until the run's folder is known."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._ops: list[dict] = []

    def attach(self, run_dir: str) -> int:
        """Keep the spool in ``run_dir`` from now on; returns how many calls an earlier attempt left there."""
        path = os.path.join(run_dir, SPOOL_NAME)
        earlier = _read_ops(path)
        pending, self._ops, self.path = self._ops, earlier, path
        for op in pending:
            self.append(op)
        return len(earlier)

    def append(self, op: dict) -> None:
        self._ops.append(op)
        if self.path:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(op) + "\n")

    def ops(self) -> list[dict]:
        return list(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def drop(self, n: int) -> None:
        """Forget the first ``n`` calls (delivered); the file is removed once nothing is left."""
        if n <= 0:
            return
        self._ops = self._ops[n:]
        if not self.path:
            return
        if not self._ops:
            if os.path.exists(self.path):
                os.remove(self.path)
            return
        atomic_write_bytes(self.path, "".join(json.dumps(op) + "\n" for op in self._ops).encode())
