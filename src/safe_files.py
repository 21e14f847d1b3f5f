"""Files that tunebench keeps between runs, safe on a machine shared by several users.

- :func:`user_dir`: a per-user folder under the user's cache home (``$XDG_CACHE_HOME`` or
  ``~/.cache``)``/tunebench/...``, created with mode 0700; a folder owned by another user, or
  writable by the group or by everyone, is refused with a one-line :class:`UserError`.
- :func:`private_dir`: the same checks for a folder the user named (``target.check.reference_cache``,
  ``measure.cache_dir``); :func:`shared_dir` the weaker ones for a folder several users share on
  purpose (``target.lock_dir``).
- :func:`atomic_write_bytes`: a temporary file from :func:`tempfile.mkstemp` (a fresh random name,
  created exclusively, so a symlink planted at a guessable name is never followed) in the target's
  folder, then :func:`os.replace`: readers see the old file or the new one, never half of one.
- :func:`read_nofollow`: reads a file opened with ``O_NOFOLLOW`` (a symlink at the name is an error).
- :func:`write_hashed` / :func:`read_hashed`: a payload with a JSON header that carries the sha256
  of header and payload; a file whose bytes were changed afterwards raises :class:`IntegrityError`.
- :func:`private_torch_caches`: PyTorch's compile caches (Inductor, Triton) in :func:`user_dir`, not
  under their fixed names in the shared temp folder.
- :func:`run_temp_dir`: a fresh temporary folder of this process (mode 0700, a random name carrying
  the pid); :func:`remove_dead_run_dirs` removes this user's such folders whose process is gone.

Standard library only (plus :mod:`tunebench.errors`), so every layer can use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile

from tunebench.errors import UserError

HASHED_FORMAT = "tunebench-hashed-v1"


class IntegrityError(ValueError):
    """A hashed file whose content does not match its recorded sha256 (corrupt or tampered with)."""


def cache_home() -> str:
    """The user's cache home: ``$XDG_CACHE_HOME``, else ``~/.cache``."""
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def user_dir(*parts: str) -> str:
    """``<cache home>/tunebench/<parts...>``, created (mode 0700) and checked at every level
    from ``tunebench`` down: owned by this user and not writable by group or others."""
    path = os.path.join(os.path.abspath(cache_home()), "tunebench")
    private_dir(path)
    for part in parts:
        path = private_dir(os.path.join(path, part))
    return path


PRIVATE_ADVICE = "choose a private folder, one only you can write (e.g. made with `mkdir -m 700 <folder>`)"


def private_dir(path: str) -> str:
    """``path`` (``~`` expanded, made absolute), created with mode 0700 if missing; raises
    :class:`UserError` naming the folder when it belongs to another user or is group/world-writable.
    The advice never asks to change a folder shared on purpose (another user's, or one with the
    sticky bit such as ``/tmp``): it says to choose a private folder."""
    path = os.path.abspath(os.path.expanduser(str(path)))
    _makedirs(path, 0o700)
    st = _stat_dir(path)
    if st.st_uid != os.getuid():
        raise UserError(f"{path}: folder owned by uid {st.st_uid}, not by you (uid {os.getuid()}); another "
                        f"user could change its files: {PRIVATE_ADVICE}")
    if st.st_mode & 0o022:
        shared = st.st_mode & stat.S_ISVTX  # /tmp, /var/tmp: shared by design, never to be chmod-ed
        advice = PRIVATE_ADVICE if shared else f"run `chmod 700 {path}` or {PRIVATE_ADVICE}"
        raise UserError(f"{path}: folder is writable by {_who_writes(st.st_mode)} (mode {_mode(st)}"
                        f"{', a shared folder' if shared else ''}); {advice}")
    return path


def shared_dir(path: str) -> str:
    """A folder several users may share on purpose (created with mode 0700 when missing). Refused
    (one-line :class:`UserError`) when everyone may write to it without the sticky bit: anyone could
    then delete or replace the files of others. Group-writable folders are accepted."""
    path = os.path.abspath(os.path.expanduser(str(path)))
    _makedirs(path, 0o700)
    st = _stat_dir(path)
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise UserError(f"{path}: folder is writable by everyone without the sticky bit (mode {_mode(st)}): "
                        f"anyone could replace its files; run `chmod 1777 {path}` (or use a group-writable folder)")
    return path


def private_torch_caches() -> None:
    """Point ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR`` at ``<user_dir>/torchinductor`` and
    ``/triton`` (mode 0700). Inductor's default is the fixed name ``$TMPDIR/torchinductor_<user>`` in the
    shared temp folder, which another user can create first (it would be used as it is); ``torch.export``
    (task extraction) and ``torch.compile`` (the end-to-end step's worker) both write there. Set always,
    not only when unset: PyTorch itself exports its default into the environment on first use. Call
    before they run (PyTorch reads the variables when it compiles)."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = user_dir("torchinductor")
    os.environ["TRITON_CACHE_DIR"] = user_dir("triton")


RUN_TEMP_KINDS = ("build", "e2e")  # the temporary folders of a run: compiled candidates, whole-model builds


def run_temp_dir(kind: str) -> str:
    """A fresh temporary folder ``$TMPDIR/tunebench-<kind>-<pid>-<random>`` (mode 0700, made by
    :func:`tempfile.mkdtemp`). The process removes it when it ends; the pid in its name lets a later
    run remove it when the process could not (:func:`remove_dead_run_dirs`)."""
    return tempfile.mkdtemp(prefix=f"tunebench-{kind}-{os.getpid()}-")


def remove_dead_run_dirs(kinds=RUN_TEMP_KINDS) -> list[str]:
    """Remove the folders of :func:`run_temp_dir` in the temp folder that this user owns and whose
    process is gone (a run killed with SIGKILL); returns their paths. Another user's folders and those
    of live processes are left alone; a symlink at such a name is never followed."""
    pattern = re.compile(rf"tunebench-(?:{'|'.join(map(re.escape, kinds))})-(\d+)-")
    root, removed = tempfile.gettempdir(), []
    for name in os.listdir(root):
        match = pattern.match(name)
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if match and stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:  # a zombie (killed, not yet reaped) is gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def is_private(path: str) -> bool:
    """Whether folder ``path`` is owned by this user and not writable by group or others."""
    st = os.stat(path)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def atomic_write_bytes(path: str, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` through a fresh temporary file in the same folder and
    :func:`os.replace` (atomic; never follows a symlink at the temporary name)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


def read_nofollow(path: str) -> bytes:
    """The bytes of the regular file ``path``, opened with ``O_NOFOLLOW`` (a symlink raises OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path}: not a regular file")
        return fh.read()


def _digest(meta: dict, payload: bytes) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode() + b"\n" + payload).hexdigest()


def write_hashed(path: str, meta: dict, payload: bytes) -> None:
    """Atomically write ``payload`` behind a one-line JSON header holding ``meta`` and the sha256 of
    both (see :func:`read_hashed`)."""
    header = {"format": HASHED_FORMAT, "meta": meta, "sha256": _digest(meta, payload)}
    atomic_write_bytes(path, json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def read_hashed(path: str) -> tuple[dict, bytes]:
    """``(meta, payload)`` of a file from :func:`write_hashed`. Raises :class:`IntegrityError` when the
    file is not in that format or its content does not match the recorded hash; OSError when it
    cannot be read (or is a symlink)."""
    data = read_nofollow(path)
    line, sep, payload = data.partition(b"\n")
    try:
        header = json.loads(line) if sep else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != HASHED_FORMAT or not isinstance(header.get("meta"), dict):
        raise IntegrityError(f"{path}: not a {HASHED_FORMAT} file")
    if header.get("sha256") != _digest(header["meta"], payload):
        raise IntegrityError(f"{path}: content does not match its sha256")
    return header["meta"], payload


def _makedirs(path: str, mode: int) -> None:
    try:
        os.makedirs(path, mode=mode, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot create the folder ({exc.strerror or exc})") from None


def _stat_dir(path: str) -> os.stat_result:
    """``stat`` of folder ``path``; a symlink owned by another user is refused (it could be re-pointed)."""
    lst = os.lstat(path)
    if stat.S_ISLNK(lst.st_mode) and lst.st_uid not in (os.getuid(), 0):
        raise UserError(f"{path}: a symbolic link owned by uid {lst.st_uid}; use a real folder")
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: not a folder")
    return st


def _who_writes(mode: int) -> str:
    return " and ".join(w for w, bit in (("the group", stat.S_IWGRP), ("everyone", stat.S_IWOTH)) if mode & bit)


def _mode(st: os.stat_result) -> str:
    return oct(stat.S_IMODE(st.st_mode))[2:].rjust(4, "0")
