"""Stopping a run with a signal: SIGINT (Ctrl-C) and SIGTERM raise :class:`~tunebench.errors.RunStopped`
in the main thread, where the harness waits for its workers, so that the run's ``finally`` blocks end it
(worker processes stopped, temporary folders removed, the MLflow run marked KILLED) and the command line
prints one line with the ``resume=`` command. Without this, SIGTERM ends the process on the spot (the
MLflow run stays RUNNING, its build folder stays) and Ctrl-C prints a traceback per process.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from tunebench.errors import RunStopped

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFER = {"depth": 0, "pending": None}  # main thread only: open signals_deferred blocks, a stop they held back


@contextlib.contextmanager
def stop_on_signals():
    """While in the block, the first SIGINT or SIGTERM raises :class:`RunStopped` in the main thread;
    later ones are ignored while the run cleans up. Outside the main thread (a launcher's job thread)
    signals cannot be caught: nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = []

    def handler(signum, frame):
        if fired:
            return
        fired.append(signum)
        if _DEFER["depth"]:
            _DEFER["pending"] = signum
            return
        raise RunStopped(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred():
    """A block a stop must not cut in two: a write to the tracking store (an SQLite transaction
    interrupted by the signal can keep the database locked for the call that marks the run KILLED). A
    signal that arrives inside raises :class:`RunStopped` when the block ends. Outside the main thread
    nothing is deferred (the handler runs in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _DEFER["depth"] += 1
    try:
        yield
    finally:
        _DEFER["depth"] -= 1
    if _DEFER["depth"] == 0 and _DEFER["pending"] is not None:
        signum, _DEFER["pending"] = _DEFER["pending"], None
        raise RunStopped(signum)
