"""Command-line glue: one-line errors and logging set-up."""

from __future__ import annotations

import logging
import sys


def fail(msg: str, code: int = 2) -> None:
    """Print a one-line error and exit."""
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def stopped(exc) -> None:
    """Print the one line of a run stopped by a signal (:class:`~tunebench.errors.RunStopped`: which run,
    how to resume it) and exit with 128 + the signal's number, as a shell reports a process ended by it."""
    print(str(exc), file=sys.stderr, flush=True)
    raise SystemExit(exc.exit_code)


def command_tracking(workdir: str):
    """``track(experiment, run_name, params, what)``: the MLflow run of a command that is not an experiment,
    in ``workdir``'s store (:func:`~tunebench.harness.tracking.command_run.command_run`, a context manager
    yielding the tracker). What the command line gives a method family's command (``gat train``, ``glimpse
    train``) to log its work, which the family, below the harness, cannot import."""
    def track(experiment: str, run_name: str, params: dict, what: str):
        from tunebench.harness.tracking.command_run import command_run
        from tunebench.harness.tracking.tracker import Tracker

        return command_run(Tracker(None, experiment, workdir), run_name, params, what)
    return track


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s %(levelname)s %(name)s] %(message)s",
                        datefmt="%H:%M:%S", force=True)
    for noisy in ("mlflow", "alembic", "urllib3", "git"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
