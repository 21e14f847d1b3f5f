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
        if not fired:
            fired.append(signum)
            raise RunStopped(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
