"""The run's record file: JSON Lines, one line per measurement, appended and flushed as it arrives.

A process killed mid-write can leave a truncated last line; :func:`read_records` skips it and
:class:`RecordFile` cuts it off before appending, so a resumed run continues from complete lines.
"""

from __future__ import annotations

import json
import os

from tunebench.task import Measurement, Task


def record_line(m: Measurement, task: Task) -> dict:
    """One record: the measurement's fields plus what identifies its task (name, kind, shape, FLOPs)."""
    return {**m.to_record(), "task_name": task.name, "task_kind": task.kind, "shape": task.shape,
            "flops": task.flops}


def read_records(path: str) -> list[dict]:
    """All complete records in ``path`` (a missing file has none)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # truncated final line of a killed run
            line = raw.strip()
            if line:
                out.append(json.loads(line))
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

    def append(self, m: Measurement, task: Task) -> None:
        rec = {**record_line(m, task), **self.context}
        self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
