"""A per-device lock so that measurements never overlap, also across concurrent Hydra jobs."""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager


def lock_path(device_key: str, lock_dir: str | None = None) -> str:
    lock_dir = lock_dir or os.path.join(tempfile.gettempdir(), "tunebench-locks")
    os.makedirs(lock_dir, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)
    return os.path.join(lock_dir, f"{safe}.lock")


@contextmanager
def device_lock(device_key: str, lock_dir: str | None = None):
    """Hold an exclusive ``flock`` on the device's lock file for the duration of the block."""
    path = lock_path(device_key, lock_dir)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
