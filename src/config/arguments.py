"""The command-line tools' argument checks, for a command at any layer (the harness's, a method family's,
a backend's): an output path that can be written (:func:`check_out`), an integer in a range (:func:`count`)."""

from __future__ import annotations

import argparse
import os

from tunebench.errors import UserError


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


def parse_part(text) -> tuple[int, int] | None:
    """``"K/N"`` with whole numbers 1 <= K <= N -> (K, N); anything else -> None."""
    k, sep, n = str(text).partition("/")
    if not (sep and k.strip().isdigit() and n.strip().isdigit()):
        return None
    k, n = int(k), int(n)
    return (k, n) if 1 <= k <= n else None
