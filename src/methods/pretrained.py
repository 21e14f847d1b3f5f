"""The check of a method's ``pretrained`` file (gat, glimpse) in the preflight: a readable regular file,
then its content, read once per file version (a config is typed several times on its way to the run)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable


def file_problem(path: str, hint: str) -> str | None:
    """Why ``path`` is not a readable regular file (one line, with ``hint``: how to make one), or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"no such file ({hint})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"not a regular file ({hint})"
    try:
        open(path, "rb").close()
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None



def pretrained_problem(path: str, hint: str, content: Callable[[str, tuple], str | None]) -> str | None:
    """Why ``path`` cannot be a pretrained model, in one line (``hint``: how to make one), or None: first
    :func:`file_problem`, then ``content(path, stamp)`` (``stamp`` = real path, inode, size, mtime: the key of
    a cache per file version)."""
    problem = file_problem(path, hint)
    if problem is not None:
        return problem
    st = os.stat(path)
    return content(path, (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns))
