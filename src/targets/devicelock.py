"""A per-device lock so that measurements never overlap, also across concurrent Hydra jobs.

The lock is an exclusive ``flock`` on ``<lock_dir>/<device key>.lock``. The holder writes its pid,
command line and the time it took the lock into the file, so that a process that has to wait can
say who it waits for: after ``notice_s`` seconds of waiting it logs one line naming the holder, and
one more when it gets the lock. The seconds spent waiting are added up in ``wait_s``; the harness
leaves them out of the task's search clock (they measure the neighbours, not the method).

Within one process the lock is re-entrant: a block that holds it (the end-to-end timing) can call
code that takes it again (the calibration kernel).

Where the lock files live: by default in the user's own folder ``user_dir("locks")``
(``~/.cache/tunebench/locks``, mode 0700), so runs of one user never overlap. Runs of *different*
users on one device only exclude each other when an admin sets ``target.lock_dir`` to a folder they
share: created with mode 1777 (sticky: nobody can delete another user's lock file) or a folder
writable by their common group; a world-writable folder without the sticky bit is refused. Lock
files are opened with ``O_NOFOLLOW`` (a symlink planted at the name is never followed) and, in a
shared folder, made readable and writable by everyone (they hold only the holder's pid and command);
a lock file this user cannot open is a one-line :class:`UserError` naming it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
import time

from tunebench.errors import UserError
from tunebench.safe_files import is_private, read_nofollow, shared_dir, user_dir

log = logging.getLogger(__name__)


def resolve_lock_dir(lock_dir: str | None = None) -> str:
    """The lock folder: ``lock_dir`` (checked by :func:`~tunebench.safe_files.shared_dir`) or,
    when None, this user's ``user_dir("locks")``."""
    return shared_dir(lock_dir) if lock_dir else user_dir("locks")


def _lock_file(device_key: str, folder: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)
    return os.path.join(folder, f"{safe}.lock")


def open_lock_file(path: str):
    """The lock file at ``path`` opened for reading and writing (created if missing), never through a
    symlink. In a folder other users share, a file this user owns is made writable by all; one it
    cannot write is opened read-only (flock still works; the holder line is then not written). A file
    it cannot open at all raises a one-line :class:`UserError` naming the file."""
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | nofollow, 0o600)
    except PermissionError as exc:
        try:
            fd = os.open(path, os.O_RDONLY | nofollow)
        except OSError:
            raise _lock_error(path, exc) from None
    except OSError as exc:
        raise _lock_error(path, exc) from None
    if os.fstat(fd).st_uid == os.getuid() and not is_private(os.path.dirname(path)):
        os.fchmod(fd, 0o666)  # the other users of the shared folder must be able to open it too
    writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
    return os.fdopen(fd, "r+" if writable else "r")


def _lock_error(path: str, exc: OSError) -> UserError:
    why = "is a symbolic link (not followed)" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror})"
    return UserError(f"device lock file {path} {why}; remove it or set target.lock_dir to another folder")


def _command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return " ".join(fh.read().replace(b"\0", b" ").decode(errors="replace").split())[:200]
    except OSError:
        return "?"


def holder_of(path: str) -> str:
    """Who holds the lock file at ``path``, as written by the holder: ``pid N (command), held for S s``."""
    try:
        pid_text, since_text, *_ = (read_nofollow(path).decode(errors="replace").splitlines() + ["", ""])
        pid, since = int(pid_text), float(since_text)
    except (OSError, ValueError):
        return "an unknown process"
    return f"pid {pid} ({_command_of(pid)}), held for {time.time() - since:.0f} s"


def _write_holder(fh) -> None:
    """Write this process's holder line (pid, time, command) into a lock file it holds."""
    if fh.writable():
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n{time.time()}\n{_command_of(os.getpid())}\n")
        fh.flush()


def lock_now(path: str):
    """Take the lock file at ``path`` without waiting: the open file, holding the lock with this process's
    holder line written (close it to release), or None when another process holds it (:func:`holder_of`)."""
    fh = open_lock_file(path)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    _write_holder(fh)
    return fh


class _Held:
    """A lock file this process holds: the open file, the in-process mutex and the nesting depth."""

    def __init__(self):
        self.mutex = threading.RLock()
        self.fh = None
        self.depth = 0


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def _held(path: str) -> _Held:
    with _HELD_GUARD:
        return _HELD.setdefault(path, _Held())


class DeviceLock:
    """The lock of one device.

    Args:
        device_key: names the device (e.g. ``cpu-<host>``); one lock file per key.
        lock_dir: folder of the lock files (None: this user's ``user_dir("locks")``; a folder shared
            between users must be set up by an admin, see the module docstring). Checked here: a bad
            folder is a one-line UserError before anything runs.
        notice_s: seconds of waiting after which one line names the holder.
        poll_s: how often a waiting process tries again.

    Attributes:
        wait_s: seconds spent waiting for other processes through this object, in all.

    Re-entrant per process and thread: every object for the same lock file shares one ``flock``;
    other threads of the process wait on an in-process mutex.
    """

    def __init__(self, device_key: str, lock_dir: str | None = None, notice_s: float = 3.0, poll_s: float = 0.05):
        self.device_key = device_key
        self.lock_dir = resolve_lock_dir(lock_dir)
        open_lock_file(self.path).close()  # an unusable lock file fails now, before any work
        self.notice_s = notice_s
        self.poll_s = poll_s
        self.wait_s = 0.0
        self._state: _Held | None = None

    @property
    def path(self) -> str:
        return _lock_file(self.device_key, self.lock_dir)

    def _acquire(self, path: str):
        fh = open_lock_file(path)
        t0, noticed = time.perf_counter(), False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.perf_counter() - t0
                if not noticed and waited >= self.notice_s:
                    log.warning("waiting for the %s device lock (%s): held by %s; waited %.0f s so far "
                                "(not charged to the search clock)", self.device_key, path, holder_of(path), waited)
                    noticed = True
                time.sleep(self.poll_s)
        waited = time.perf_counter() - t0
        self.wait_s += waited
        if noticed:
            log.warning("got the %s device lock after waiting %.1f s", self.device_key, waited)
        _write_holder(fh)
        return fh

    def __enter__(self) -> DeviceLock:
        path = self.path
        state = _held(path)
        t0 = time.perf_counter()
        state.mutex.acquire()
        if state.depth == 0:
            self.wait_s += time.perf_counter() - t0  # another thread of this process held it
            try:
                state.fh = self._acquire(path)
            except BaseException:
                state.mutex.release()
                raise
        state.depth += 1
        self._state = state
        return self

    def __exit__(self, *exc) -> None:
        state = self._state
        state.depth -= 1
        if state.depth == 0:
            fh, state.fh = state.fh, None
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()
        state.mutex.release()


def device_lock(device_key: str, lock_dir: str | None = None) -> DeviceLock:
    """A :class:`DeviceLock` for a ``with`` block (for callers that keep no lock object)."""
    return DeviceLock(device_key, lock_dir)
