"""The run's record file: JSON Lines, one line per measurement, appended and flushed as it arrives.

A process killed mid-write can leave a truncated last line; :func:`read_records` skips it and
:class:`RecordFile` cuts it off before appending, so a resumed run continues from complete lines.
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


def read_records(path: str) -> list[dict]:
    """All complete, readable records in ``path`` (a missing file has none).

    A line that is not a record (garbage, a half-written line in the middle, a missing field) is
    skipped and logged with ``path:line``; the truncated final line of a killed run is dropped.
    """
    if not os.path.exists(path):
        return []
    out, skipped = [], 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                break  # truncated final line of a killed run
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
        self._truncate_partial_line()
        self._fh = open(path, "a", encoding="utf-8")

    def _truncate_partial_line(self) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            if data and not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)

    def append(self, m: Measurement, task: Task) -> dict:
        """Write ``m`` as one line (its :func:`record_line` plus the context) and return that record."""
        rec = {**record_line(m, task), **self.context}
        self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._fh.flush()
        return rec

    def close(self) -> None:
        self._fh.close()
