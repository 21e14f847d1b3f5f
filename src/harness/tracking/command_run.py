"""The MLflow run of a command that is not an experiment (``glimpse train``, ``gat train``, ``dataset
build``): it ends FINISHED when the command's work is done, KILLED when SIGINT or SIGTERM stops it, and
FAILED on any error, never left RUNNING."""

from __future__ import annotations

import contextlib
import signal

from tunebench.errors import RunStopped
from tunebench.harness.stopping import stop_on_signals


@contextlib.contextmanager
def command_run(tracker, run_name: str, params: dict, what: str):
    """Start ``tracker``'s run; yield it; end it FINISHED, KILLED or FAILED as the block ends. A signal
    raises :class:`RunStopped` with one line naming ``what`` (the command), the run and its status."""
    with stop_on_signals():
        tracker.start(run_name=run_name, params=params, tags={})
        status = "FAILED"
        try:
            yield tracker
            status = "FINISHED"
        except KeyboardInterrupt as exc:  # RunStopped (SIGINT, SIGTERM), or Ctrl-C outside the main thread
            status = "KILLED"
            signum = exc.signum if isinstance(exc, RunStopped) else signal.SIGINT
            raise RunStopped(signum, f"{what} stopped by {signal.Signals(signum).name}: MLflow run "
                                     f"{tracker.run_id} KILLED, nothing written; run the command again",
                             run_id=tracker.run_id) from None
        finally:
            tracker.end(status)
