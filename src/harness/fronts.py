"""Per-task and per-run metrics of multi-objective (FPGA) runs (docs/METHODS.md §Metrics).

Curves, logged as MLflow metric histories after every measurement:

- ``<task>.hypervolume`` / ``<task>.adrs`` with step = trial index;
- ``<task>.hypervolume_by_ms`` / ``<task>.adrs_by_ms`` with step = the task's search clock in ms
  (MLflow steps are integers);

computed on the valid designs measured at the target's highest fidelity so far. ADRS needs the
true front: the replayed table (``target=table``) or the shipped table of the kernel
(``data/fpga/<kernel>.csv``) for live targets; without one, no ADRS is logged.
Final values per task and per run: ``adrs``, ``hypervolume``, ``tool_s`` (tool seconds charged),
``algorithm_s`` (search seconds minus tool seconds), ``n_front``; artifact ``pareto_<kernel>.json``.

The learned set Omega that ADRS and hypervolume measure is every valid design the method measured at
the top fidelity, for every method (the usual DSE definition). A method whose answer is a distinct part
of that (``Method.learned_set``: ann, bt and dac19 run their model's predicted Pareto designs through the
flow after random initial designs) also gets ``adrs_learned`` / ``hypervolume_learned`` on that part
alone ("learned front only", the reading of [Sun-PhD] §3.6.3 for those baselines) and ``n_learned``.
"""

from __future__ import annotations

import json
import logging
import math
import os

import numpy as np

from tunebench.harness.observers import Observer
from tunebench.pareto import adrs, normalized_hypervolume, pareto_front
from tunebench.targets.base import Target
from tunebench.targets.capabilities import HasTables

log = logging.getLogger(__name__)


class FrontMetrics:
    """The curves, per-task and per-run values of one multi-objective run on ``target``."""

    def __init__(self, target: Target):
        info = target.info
        self.target = target
        self.objectives = list(info.objectives)
        self.top = info.top_fidelity
        self.ref = list(info.reference_point)
        self.scale = [float(info.scale[o]) for o in self.objectives]
        self.finals: list[dict] = []
        self.artifacts: list[str] = []

    def true_front(self, task) -> np.ndarray | None:
        from tunebench.targets.fpga.table import shipped_table, true_front

        try:
            table = self.target.table_for(task) if isinstance(self.target, HasTables) else None  # the replayed one
            if table is None:
                table = shipped_table(task, self.target.fidelities, self.objectives)
            if table is None:
                return None
        except Exception as exc:  # a table of another space: no ADRS rather than a failed run
            log.warning("no true front for %s: %s", task.name, exc)
            return None
        return true_front(table, self.top, self.objectives)

    def _Y(self, ms) -> np.ndarray:
        rows = [[m.objectives[o] for o in self.objectives] for m in ms
                if m.valid and m.fidelity == self.top]
        return np.asarray(rows, dtype=float).reshape(-1, len(self.objectives))

    def observer(self, task, tracker, run_dir: str, learned=None) -> ParetoCurves:
        """The per-batch hypervolume / ADRS curves of ``task`` and its final values (its true front
        read once, here). ``learned``: a callable giving the method's learned set when the task ends
        (``Method.learned_set``), or None."""
        self._G = self.true_front(task)
        return ParetoCurves(self, task, tracker, self._G, run_dir, learned)

    def learned_values(self, result, learned: list[int] | None) -> dict:
        """ADRS and hypervolume of the method's learned set alone (empty without a distinct one)."""
        if learned is None:
            return {}
        keep = set(int(i) for i in learned)
        Y = self._Y([m for m in result.measurements if m.config.index in keep])
        return {"n_learned": len(Y),
                "hypervolume_learned": normalized_hypervolume(Y, self.ref, self.scale) if len(Y) else 0.0,
                "adrs_learned": adrs(self._G, Y) if self._G is not None and len(Y) else None}

    def finish_task(self, task, result, run_dir: str, learned: list[int] | None = None, trace=None) -> dict:
        """The task's final values and ``pareto_<kernel>.json``; ``trace``: (tool seconds, ADRS,
        hypervolume) after every batch, kept in the file for comparisons at equal tool time."""
        Y = self._Y(result.measurements)
        idx = pareto_front(Y)
        top_ms = [m for m in result.measurements if m.valid and m.fidelity == self.top]
        front = [{"index": top_ms[i].config.index, "config": top_ms[i].config.to_dict(),
                  "objectives": top_ms[i].objectives, "trial": top_ms[i].trial} for i in idx]
        tool_s = sum(m.cost_s for m in result.measurements)
        out = {"hypervolume": normalized_hypervolume(Y, self.ref, self.scale) if len(Y) else 0.0,
               "adrs": adrs(self._G, Y) if self._G is not None and len(Y) else None,
               "n_front": len(front), "n_top_fidelity": len(top_ms), "tool_s": tool_s,
               "algorithm_s": max(0.0, result.search_s - tool_s), "search_s": result.search_s,
               "per_fidelity": {f: sum(m.fidelity == f for m in result.measurements) for f in self.target.fidelities},
               "true_front_size": None if self._G is None else len(self._G),
               **self.learned_values(result, learned)}
        path = os.path.join(run_dir, f"pareto_{task.name}.json")
        with open(path, "w") as fh:
            json.dump({"task": task.name, "objectives": self.objectives, "fidelity": self.top,
                       "reference_point": self.ref, "scale": self.scale, "front": front,
                       "true_front": None if self._G is None else self._G.tolist(), **out,
                       "trace": _trace_columns(trace or [])}, fh, indent=1)
        self.artifacts.append(os.path.basename(path))
        self.finals.append(out)
        learned_adrs = out.get("adrs_learned")
        log.info("task %s: hypervolume %.4f, ADRS %s%s, %d Pareto designs, tool %.1f s, algorithm %.1f s",
                 task.name, out["hypervolume"], "n/a" if out["adrs"] is None else f"{out['adrs']:.4f}",
                 "" if learned_adrs is None else f" (learned front only: {learned_adrs:.4f})",
                 len(front), tool_s, out["algorithm_s"])
        return out

    def log_run(self, tracker) -> None:
        if not self.finals:
            return
        hv = float(np.mean([f["hypervolume"] for f in self.finals]))
        tracker.metric("hypervolume", hv)
        for key in ("adrs", "adrs_learned"):
            ad = [f[key] for f in self.finals if f.get(key) is not None]
            if ad and len(ad) == len(self.finals):
                tracker.metric(key, float(np.mean(ad)) if all(math.isfinite(a) for a in ad) else float("inf"))
        if all("hypervolume_learned" in f for f in self.finals):
            tracker.metric("hypervolume_learned", float(np.mean([f["hypervolume_learned"] for f in self.finals])))
        tool = sum(f["tool_s"] for f in self.finals)
        algo = sum(f["algorithm_s"] for f in self.finals)
        tracker.metric("tool_s", tool)
        tracker.metric("algorithm_s", algo)
        tracker.metric("tool_h", tool / 3600)
        tracker.metric("algorithm_h", algo / 3600)


def _trace_columns(trace: list[tuple]) -> dict:
    """``{"tool_s": [...], "adrs": [...], "hypervolume": [...]}`` of the points where a value changed."""
    kept = [p for i, p in enumerate(trace) if i in (0, len(trace) - 1) or p[1:] != trace[i - 1][1:]]
    return {"tool_s": [round(p[0], 3) for p in kept], "adrs": [p[1] for p in kept],
            "hypervolume": [p[2] for p in kept]}


class ParetoCurves(Observer):
    """Hypervolume and ADRS of the designs measured so far at the top fidelity, after every batch
    (steps: trial index, and the search clock in ms); when the task ends, its final values and
    ``pareto_<kernel>.json`` (:meth:`FrontMetrics.finish_task`), kept in ``summary``."""

    def __init__(self, metrics: FrontMetrics, task, tracker, true_front, run_dir: str, learned=None):
        self.metrics, self.task, self.tracker, self.G, self.run_dir = metrics, task, tracker, true_front, run_dir
        self.learned = learned
        self.summary: dict | None = None
        self.trace: list[tuple] = []  # (tool seconds so far, ADRS, hypervolume) after every batch
        self._tool_s = 0.0

    def task_started(self, result) -> None:
        self._tool_s = sum(m.cost_s for m in result.measurements)  # a resumed task's earlier tool time

    def task_finished(self, result) -> None:
        learned = self.learned() if self.learned is not None else None
        self.summary = self.metrics.finish_task(self.task, result, self.run_dir, learned, self.trace)

    def batch_measured(self, batch, result) -> None:
        mt = self.metrics
        Y = mt._Y(result.measurements)
        hv = normalized_hypervolume(Y, mt.ref, mt.scale) if len(Y) else 0.0
        d = adrs(self.G, Y) if self.G is not None and len(Y) else None
        self._tool_s += sum(m.cost_s for m in batch)
        self.trace.append((self._tool_s, d, hv))
        for m in batch:
            ms = int(round(m.search_s * 1000))
            self.tracker.metric(f"{self.task.id}.hypervolume", hv, m.trial)
            self.tracker.metric(f"{self.task.id}.hypervolume_by_ms", hv, ms)
            if d is not None:
                self.tracker.metric(f"{self.task.id}.adrs", d, m.trial)
                self.tracker.metric(f"{self.task.id}.adrs_by_ms", d, ms)
        self.tracker.flush_due()
