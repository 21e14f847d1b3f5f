"""The built libraries of a task's fastest candidates, kept from the search for the protocol's re-timing.

A candidate the search built and timed is built again by the final re-timing unless its library is still
here. On a GPU a build is seconds of NVRTC (2-15 s per task at 2 trials on an H100), so building the
re-timed candidates again cost about as much as the search itself. The cache keeps, per task, the
libraries of the ``keep`` fastest candidates timed so far (``keep`` = ``measure.retime.top_k``, the number
re-timed) and deletes every other library as soon as it is out of that set. The re-timing takes the
libraries it finds (:meth:`LibraryCache.take`) and builds only the others; afterwards the task's entries
are dropped (:meth:`LibraryCache.drop`). A build is deterministic for a given candidate, template and TVM
target, so a kept library is the one a rebuild would give.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from tunebench.targets.tvm.scheduling import trace_of

Key = tuple  # ("index", i) for a knob config, ("trace", json) for a schedule trace


def candidate_key(config) -> Key:
    """The cache key of a knob config (its index) or of a trace config (its trace)."""
    trace = trace_of(config)
    return ("trace", trace) if trace is not None else ("index", int(config.index))


class LibraryCache:
    """Per task id, up to ``keep`` ``(latency, key, path)`` entries, the fastest timed so far.

    ``remove`` deletes a library's files (the target's, which also deletes the noted parameters of a
    kernel that takes packed weights).
    """

    def __init__(self, keep: int, remove: Callable[[Iterable[str]], None]):
        self.keep = int(keep)
        self._remove = remove
        self._tasks: dict[str, list[tuple[float, Key, str]]] = {}
        self.hits = 0  # libraries taken instead of built again

    def offer(self, task_id: str, config, path: str, latency_s: float | None) -> None:
        """Keep ``path`` (the library of ``config``, timed at ``latency_s``) if it is among the task's
        ``keep`` fastest, else delete it; a failed timing (None) is deleted at once."""
        if latency_s is None or self.keep <= 0:
            self._remove([path])
            return
        key = candidate_key(config)
        entries = self._tasks.setdefault(task_id, [])
        old = [e for e in entries if e[1] == key]
        if old:  # timed again: the newer library replaces the older one
            entries.remove(old[0])
            self._remove([old[0][2]])
        entries.append((float(latency_s), key, path))
        entries.sort(key=lambda e: e[0])
        self._remove([e[2] for e in entries[self.keep:]])
        del entries[self.keep:]

    def take(self, task_id: str, config) -> str | None:
        """The kept library of ``config`` (now the caller's to delete), or None."""
        entries = self._tasks.get(task_id, [])
        key = candidate_key(config)
        for entry in entries:
            if entry[1] == key and os.path.exists(entry[2]):
                entries.remove(entry)
                self.hits += 1
                return entry[2]
        return None

    def drop(self, task_id: str | None = None) -> None:
        """Delete the libraries kept for ``task_id`` (None: for every task)."""
        ids = list(self._tasks) if task_id is None else [task_id]
        for tid in ids:
            self._remove([e[2] for e in self._tasks.pop(tid, [])])

    def paths(self) -> list[str]:
        """Every kept library (for tests and the log)."""
        return [e[2] for entries in self._tasks.values() for e in entries]
