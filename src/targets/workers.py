"""Persistent worker processes that build and run candidates outside the harness process.

A config that crashes its worker (segfault, abort), hangs past the timeout or raises becomes an
error result; the worker is killed and a fresh one started on the next request, and the run goes
on. Workers are started with the ``spawn`` method (no forked TVM state) and stay alive between
requests, so TVM is imported once per worker, not once per candidate. A worker imports its
handler module (and runs its ``prepare`` function, e.g. ``import tvm``) *before* it reports ready:
start-up never counts against a request's timeout. ``env`` (e.g. ``TVM_NUM_THREADS``) is set in
the worker before anything is imported.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

_CTX = mp.get_context("spawn")


def _serve(conn, handler_path: str, env: dict | None = None, prepare: str | None = None) -> None:
    """Worker main loop: receive ``(name, payload)``, reply ``("ok", result)`` or ``("error", text)``."""
    import importlib
    import os

    os.environ.update(env or {})
    module_name, func_name = handler_path.rsplit(":", 1)
    module = importlib.import_module(module_name)
    handler = getattr(module, func_name)
    if prepare:
        prep_module, prep_name = prepare.rsplit(":", 1)
        getattr(importlib.import_module(prep_module), prep_name)()
    elif callable(getattr(module, "prepare", None)):
        module.prepare()
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        name, payload = msg
        try:
            conn.send(("ok", handler(name, payload)))
        except Exception as exc:  # reported to the parent as the measurement's error text
            text = f"{type(exc).__name__}: {exc}".strip().splitlines()
            detail = traceback.format_exc(limit=3).strip().splitlines()[-1]
            conn.send(("error", (text[0] if text else detail)[:2000]))


class Worker:
    """One worker process running ``handler(name, payload)`` for each request.

    Args:
        handler_path: ``"module:function"`` of the request handler, importable in a fresh process.
        start_timeout_s: seconds to wait for the worker to import and report ready.
        env: environment variables set in the worker before it imports anything.
        prepare: ``"module:function"`` run once at start-up, before the worker reports ready
            (None: the handler module's ``prepare`` if it has one).
    """

    def __init__(self, handler_path: str, start_timeout_s: float = 120.0, env: dict | None = None,
                 prepare: str | None = None):
        self.handler_path = handler_path
        self.start_timeout_s = start_timeout_s
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.prepare = prepare
        self._proc = None
        self._conn = None

    def start(self) -> None:
        if mp.get_start_method(allow_none=True) not in (None, "fork", "spawn", "forkserver"):
            # inside a joblib/loky job process the default method is "loky", which a spawned child
            # cannot restore; our children only need the standard "spawn"
            mp.set_start_method("spawn", force=True)
        parent, child = _CTX.Pipe()
        proc = _CTX.Process(target=_serve, args=(child, self.handler_path, self.env, self.prepare), daemon=True)
        proc.start()
        child.close()
        if not parent.poll(self.start_timeout_s):
            proc.kill()
            raise RuntimeError(f"worker for {self.handler_path} did not start in {self.start_timeout_s:.0f} s")
        parent.recv()
        self._proc, self._conn = proc, parent

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def call(self, name: str, payload: Any, timeout_s: float) -> tuple[bool, Any]:
        """Run one request; returns ``(True, result)`` or ``(False, error_text)``; never raises."""
        if not self.alive:
            self.start()
        try:
            self._conn.send((name, payload))
            if not self._conn.poll(timeout_s):
                self.kill()
                return False, f"timeout: no result after {timeout_s:g} s (worker killed)"
            status, result = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = None
            if self._proc is not None:
                self._proc.join(2)
                code = self._proc.exitcode
            self.kill()
            return False, f"worker crashed (exit code {code})"
        return status == "ok", result

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None

    def close(self) -> None:
        if self.alive:
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (OSError, BrokenPipeError):
                pass
        self.kill()


class WorkerPool:
    """``n`` workers serving requests in parallel (one request per worker at a time)."""

    def __init__(self, handler_path: str, n: int, env: dict | None = None, prepare: str | None = None):
        self.workers = [Worker(handler_path, env=env, prepare=prepare) for _ in range(max(1, n))]
        self._idle: queue.Queue[Worker] = queue.Queue()
        for w in self.workers:
            self._idle.put(w)
        self._executor = ThreadPoolExecutor(max_workers=len(self.workers))

    def start(self) -> None:
        """Start every worker now (in parallel), so that the first batch does not pay for it."""
        list(self._executor.map(lambda w: w.start() if not w.alive else None, self.workers))

    def _one(self, name: str, payload: Any, timeout_s: float) -> tuple[bool, Any, float]:
        worker = self._idle.get()
        try:
            t0 = time.perf_counter()
            ok, result = worker.call(name, payload, timeout_s)
            return ok, result, time.perf_counter() - t0
        finally:
            self._idle.put(worker)

    def map(self, name: str, payloads: list, timeout_s: float) -> list[tuple[bool, Any, float]]:
        """Run ``name`` on every payload; results in order as ``(ok, result_or_error, wall_s)``."""
        futures = [self._executor.submit(self._one, name, p, timeout_s) for p in payloads]
        return [f.result() for f in futures]

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid is not None]

    def close(self) -> None:
        for w in self.workers:
            w.close()
        self._executor.shutdown(wait=False)

