"""Persistent worker processes that build and run candidates outside the harness process.

A config that crashes its worker (segfault, abort), hangs past the timeout or raises becomes an
error result; the worker is killed and a fresh one started on the next request, and the run goes
on. Workers are started with the ``spawn`` method (no forked TVM state) and stay alive between
requests, so TVM is imported once per worker, not once per candidate. A worker imports its
handler module (and runs its ``prepare`` function, e.g. ``import tvm``) *before* it reports ready:
start-up never counts against a request's timeout. ``env`` (e.g. ``TVM_NUM_THREADS``) is set in
the worker before anything is imported.

Stopping: a worker ignores SIGINT (a terminal's Ctrl-C reaches the whole process group; the harness
stops its workers itself), exits quietly as soon as the process that started it is gone (a watchdog
thread: a harness killed with SIGKILL cannot stop them), and a closed worker or pool never starts a
new process; a worker busy with a request when it is closed is killed at once.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed
from typing import Any

log = logging.getLogger(__name__)

_CTX = mp.get_context("spawn")


PARENT_POLL_S = 0.2  # how often a worker checks that the process that started it is still there


def _exit_with_parent(parent_pid: int) -> None:
    """Exit this process at once, without a word, when its parent is no longer ``parent_pid``."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _serve(conn, handler_path: str, env: dict | None = None, prepare: str | None = None,
           parent_pid: int | None = None) -> None:
    """Worker main loop: receive ``(name, payload)``, reply ``("ok", result)`` or ``("error", text)``;
    a parent that is gone ends it quietly."""
    import importlib

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent_pid is not None:
        _exit_with_parent(parent_pid)
    os.environ.update(env or {})
    module_name, func_name = handler_path.rsplit(":", 1)
    module = importlib.import_module(module_name)
    handler = getattr(module, func_name)
    if prepare:
        prep_module, prep_name = prepare.rsplit(":", 1)
        getattr(importlib.import_module(prep_module), prep_name)()
    elif callable(getattr(module, "prepare", None)):
        module.prepare()
    try:
        conn.send(("ready", None))
        while True:
            msg = conn.recv()
            if msg is None:
                return
            conn.send(_answer(handler, *msg))
    except (EOFError, OSError):  # the parent closed the pipe or is gone
        return


def _answer(handler, name: str, payload) -> tuple[str, Any]:
    try:
        return "ok", handler(name, payload)
    except Exception as exc:  # reported to the parent as the measurement's error text
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        detail = traceback.format_exc(limit=3).strip().splitlines()[-1]
        return "error", (text[0] if text else detail)[:2000]


#: the error text of a request that ran past its timeout starts with this
TIMEOUT = "timeout: "


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
        self._busy = False  # a request is in flight
        self._closed = False  # closed: call() never starts a new process

    def start(self) -> None:
        if mp.get_start_method(allow_none=True) not in (None, "fork", "spawn", "forkserver"):
            # inside a joblib/loky job process the default method is "loky", which a spawned child
            # cannot restore; our children only need the standard "spawn"
            mp.set_start_method("spawn", force=True)
        self._closed = False
        parent, child = _CTX.Pipe()
        proc = _CTX.Process(target=_serve, args=(child, self.handler_path, self.env, self.prepare, os.getpid()),
                            daemon=True)
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
        proc = self._proc
        return proc is not None and proc.is_alive()

    def call(self, name: str, payload: Any, timeout_s: float) -> tuple[bool, Any]:
        """Run one request; returns ``(True, result)`` or ``(False, error_text)``; never raises."""
        if self._closed:
            return False, "worker closed"
        if not self.alive:
            self.start()
        conn, proc = self._conn, self._proc  # close() from another thread may clear them meanwhile
        self._busy = True
        try:
            conn.send((name, payload))
            if not conn.poll(timeout_s):
                self.kill()
                return False, f"{TIMEOUT}no result after {timeout_s:g} s (worker killed)"
            status, result = conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            proc.join(2)
            self.kill()
            return False, f"worker crashed (exit code {proc.exitcode})"
        finally:
            self._busy = False
        return status == "ok", result

    def kill(self) -> None:
        proc, conn = self._proc, self._conn  # another thread may kill it too
        self._proc, self._conn = None, None
        if proc is not None:
            proc.kill()
            proc.join(5)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Stop the worker: an idle one is asked to exit (2 s), a busy one is killed at once."""
        self._closed = True
        if self.alive and not self._busy:
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
        worker = self._idle.get()  # after close(): its call() answers "worker closed" without starting one
        try:
            t0 = time.perf_counter()
            ok, result = worker.call(name, payload, timeout_s)
            return ok, result, time.perf_counter() - t0
        finally:
            self._idle.put(worker)

    def map(self, name: str, payloads: list, timeout_s: float) -> list[tuple[bool, Any, float]]:
        """Run ``name`` on every payload; results in order as ``(ok, result_or_error, wall_s)``."""
        futures = [self._executor.submit(self._one, name, p, timeout_s) for p in payloads]
        return [_result(f) for f in futures]

    def completed(self, name: str, payloads: list, timeout_s: float) -> Iterator[tuple[int, tuple[bool, Any, float]]]:
        """Run ``name`` on every payload like :meth:`map`, but yield ``(position, (ok, result_or_error,
        wall_s))`` as each request finishes (in the order they finish), so that a caller can use the first
        results while the others still run. Every request is submitted at once; the iterator ends when
        all have been yielded (one the pool's close cancelled is yielded as an error)."""
        futures = {self._executor.submit(self._one, name, p, timeout_s): i for i, p in enumerate(payloads)}
        for future in as_completed(futures):
            yield futures[future], _result(future)

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid is not None]

    def close(self) -> None:
        """Close every worker (busy ones are killed); requests not started yet are cancelled."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        for w in self.workers:
            w.close()


def _result(future) -> tuple[bool, Any, float]:
    """A request's ``(ok, result or error, wall s)``; one the pool's close cancelled is an error."""
    try:
        return future.result()
    except CancelledError:
        return False, "worker closed", 0.0
