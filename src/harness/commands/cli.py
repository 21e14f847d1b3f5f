"""Command-line glue: one-line errors and logging set-up."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from tunebench.errors import UserError


def fail(msg: str, code: int = 2) -> None:
    """Print a one-line error and exit."""
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def stopped(exc) -> None:
    """Print the one line of a run stopped by a signal (:class:`~tunebench.errors.RunStopped`: which run,
    how to resume it) and exit with 128 + the signal's number, as a shell reports a process ended by it."""
    print(str(exc), file=sys.stderr, flush=True)
    raise SystemExit(exc.exit_code)


def check_out(path: str, flag: str = "--out", folder: bool = False) -> None:
    """Fail now, before any long work and creating nothing, where ``path`` cannot be written: for a file, a
    folder; for a ``folder``, a file or a folder this user cannot write; for either, one whose nearest
    existing folder above is a file or not writable (UserError naming ``flag``)."""
    full = os.path.abspath(path)
    if folder and os.path.exists(full):
        if not os.path.isdir(full):
            raise UserError(f"{flag}={path}: is a file; give a folder")
        if not os.access(full, os.W_OK | os.X_OK):
            raise UserError(f"{flag}={path}: cannot be written (not a writable folder)")
        return
    if not folder and os.path.isdir(full):
        raise UserError(f"{flag}={path}: is a folder; give a file name")
    above = os.path.dirname(full)
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above) or not os.access(above, os.W_OK | os.X_OK):
        raise UserError(f"{flag}={path}: cannot be written ({above} is not a writable folder)")


def count(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi], else one line naming the value and the range."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}: must be an integer in [{lo}, {hi}]")
        return value
    return parse


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s %(levelname)s %(name)s] %(message)s",
                        datefmt="%H:%M:%S", force=True)
    for noisy in ("mlflow", "alembic", "urllib3", "git"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
