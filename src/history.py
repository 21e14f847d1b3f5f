"""History: measurements of earlier tuning (any method, any task) that transfer methods learn from.

A :class:`History` holds raw record dicts (the record file's JSON lines: ``task_id``, ``task_kind``,
``shape``, ``flops``, ``config``, ``valid``, ``gflops``, ...) grouped by task. It is filled from

- an earlier run: :meth:`History.load` takes a record file path (``.../records.jsonl``) or an MLflow
  run id (its record file on this machine, else its ``records.jsonl`` artifact);
- the running experiment: after each task the harness adds the records it wrote for that task with
  :meth:`History.add_task`, labelled with the role the method reported (e.g. dgp's ``"source"``).

Methods receive the run's History in ``setup(..., history, ...)`` and must not modify records; they
may keep derived models in :attr:`History.models` (e.g. dgp's pre-trained DGP per layer group) so
that one run trains them once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tunebench.errors import UserError


@dataclass
class HistoryTask:
    """One task's records in a :class:`History`.

    Attributes:
        task_id, kind, shape, flops: as in :class:`tunebench.task.Task` (from the records).
        records: the record dicts, in file order.
        origin: ``"loaded"`` (from an earlier run) or ``"run"`` (tuned earlier in this run).
        role: the role the tuning method reported for the task in this run (``""`` when none).
    """

    task_id: str
    kind: str
    shape: dict
    flops: int
    records: list[dict] = field(default_factory=list)
    origin: str = "loaded"
    role: str = ""


class History:
    """Records of earlier tuning, by task. See the module docstring."""

    def __init__(self) -> None:
        self.tasks: dict[str, HistoryTask] = {}
        self.models: dict = {}
        self.sources: list[str] = []

    def __len__(self) -> int:
        return sum(len(t.records) for t in self.tasks.values())

    def add_records(self, records: Iterable[dict], origin: str = "loaded", role: str = "") -> None:
        """Add record dicts (each needs ``task_id``, ``task_kind``, ``shape``, ``config``, ``valid``)."""
        for rec in records:
            tid = rec["task_id"]
            entry = self.tasks.get(tid)
            if entry is None:
                entry = self.tasks[tid] = HistoryTask(tid, rec.get("task_kind", ""), dict(rec.get("shape") or {}),
                                                      int(rec.get("flops") or 0), origin=origin, role=role)
            entry.records.append(rec)

    def add_task(self, task, records: list[dict], role: str = "") -> None:
        """Add a task tuned in this run: ``task`` a :class:`~tunebench.task.Task`, ``records`` its
        measurements as the record file holds them (the lines the run wrote)."""
        recs = list(records)
        entry = self.tasks.get(task.id)
        if entry is None:
            self.tasks[task.id] = HistoryTask(task.id, task.kind, dict(task.shape), int(task.flops), recs, "run", role)
        else:
            entry.records.extend(recs)
            entry.role = role or entry.role

    def select(self, keep: Callable[[HistoryTask], bool]) -> list[HistoryTask]:
        """The tasks for which ``keep(task)`` is true, in insertion order."""
        return [t for t in self.tasks.values() if keep(t)]

    @classmethod
    def load(cls, source: str | list | None, client=None, workdir: str | None = None) -> History:
        """A History from record files and/or MLflow run ids (one, or a list; None = empty).

        Args:
            source: a path to a record file (``records.jsonl``), a run folder holding one, or an
                MLflow run id; a list of these; or a comma-separated string of these.
            client: an ``MlflowClient`` used for run ids (None: run ids are an error).
            workdir: where artifacts of runs not on this machine are downloaded.

        Raises:
            UserError: naming the source when it is neither an existing file nor a known run.
        """
        from tunebench.record_file import read_records
        from tunebench.run_lookup import record_file

        hist = cls()
        if source is None:
            return hist
        items = source.split(",") if isinstance(source, str) else list(source)
        for item in (str(s).strip() for s in items):
            if not item:
                continue
            path = record_file(item, client, workdir or os.getcwd(), "method.history")
            recs = read_records(path)
            if not recs:
                raise UserError(f"method.history={item}: {path} holds no records")
            missing = [k for k in ("task_id", "task_kind", "shape", "config", "valid") if k not in recs[0]]
            if missing:
                raise UserError(f"method.history={item}: {path} is not a tunebench record file "
                                f"(no {', '.join(missing)})")
            hist.add_records(recs, origin="loaded")
            hist.sources.append(path)
        return hist

