"""The run's record file: JSON Lines, one line per measurement, appended and flushed as it arrives.

A process killed mid-write can leave a half-written last line; :func:`read_records` skips it and
:class:`RecordFile` cuts it off before appending (each with a log line), so a resumed run continues
from complete lines. A last line that is a complete record and lacks only its newline is kept (the
reader reads it; the writer adds the newline).
"""

from __future__ import annotations

import json
import logging
import os

from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)


def record_line(m: Measurement, task: Task) -> dict:
    """One record: the measurement's fields plus what identifies its task (name, kind, shape, FLOPs)."""
    return {**m.to_record(), "task_name": task.name, "task_kind": task.kind, "shape": task.shape,
            "flops": task.flops}


REQUIRED = ("task_id", "trial")  # what every reader needs; a resumed task also checks config and index


def _problem(rec) -> str | None:
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not a record"
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        return f"misses {', '.join(missing)}"
    if not isinstance(rec["trial"], int) or not isinstance(rec.get("config", {}), dict):
        return "trial or config of the wrong type"
    return None


def _last_line(raw: bytes) -> dict | None:
    """The record on a last line without its newline: complete JSON and a record, else None (half-written)."""
    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return rec if _problem(rec) is None else None


def read_records(path: str) -> list[dict]:
    """All complete, readable records in ``path`` (a missing file has none).

    A line that is not a record (garbage, a half-written line in the middle, a missing field) is
    skipped and logged with ``path:line``; a half-written final line of a killed run is dropped (and
    logged); a final line that is a complete record without its newline is kept.
    """
    if not os.path.exists(path):
        return []
    out, skipped = [], 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                last = _last_line(raw)
                if last is None:
                    log.warning("%s:%d: half-written last line dropped (%d bytes)", path, lineno, len(raw))
                else:
                    out.append(last)
                break
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                problem = _problem(rec)
            except (ValueError, UnicodeDecodeError) as exc:
                problem = f"not JSON ({type(exc).__name__})"
            if problem:
                skipped += 1
                log.warning("%s:%d: unreadable record skipped (%s)", path, lineno, problem)
                continue
            out.append(rec)
    if skipped:
        log.warning("%s: %d unreadable line(s) skipped, %d records read", path, skipped, len(out))
    return out


class RecordFile:
    """Append-only JSON Lines writer; every line is flushed to the OS before ``append`` returns.

    Args:
        path: the file; created with its folder when missing.
        context: fields added to every line (method, target, model, run id, ...).
    """

    def __init__(self, path: str, context: dict | None = None):
        self.path = path
        self.context = dict(context or {})
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._end_last_line()
        self._fh = open(path, "a", encoding="utf-8")

    def _end_last_line(self) -> None:
        """A last line without its newline: a complete record gets the newline, a half-written one is cut off."""
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            if not data or data.endswith(b"\n"):
                return
            start = data.rfind(b"\n") + 1
            if _last_line(data[start:]) is not None:
                fh.write(b"\n")
            else:
                fh.truncate(start)

    def append(self, m: Measurement, task: Task) -> dict:
        """Write ``m`` as one line (its :func:`record_line` plus the context) and return that record."""
        rec = {**record_line(m, task), **self.context}
        self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._fh.flush()
        return rec

    def close(self) -> None:
        self._fh.close()
