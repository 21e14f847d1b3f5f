"""``target=memory``: the peak memory of a graph's execution order ([Ahn-PhD] Ch. 3; [Ahn-MLSys20]).

A task is one graph (a cell of a graph model: :mod:`tunebench.datasets.graph_models`); a config is an
execution order of its nodes, after optional identity rewrites (:class:`~tunebench.search_space.ScheduleConfig`).
Measuring a config:

1. the graph is rewritten as the config says (:func:`~tunebench.datasets.graph_rewrite.rewrite`) and the
   order checked to be topological (else the measurement is invalid);
2. computed: the peak of live activations without an allocator (the sum of live tensors; with
   ``accounting=hmcos`` HMCOS's, whose element-wise ops overwrite an input they read last,
   :mod:`.accounting`; both peaks are reported whichever is the objective), the size of
   TFLite's simple memory arena for the order, the off-chip traffic at ``onchip_kb`` with Belady's
   replacement (:mod:`.plan`);
3. measured (``execute``): the graph runs in that order in PyTorch on the CPU, every activation freed
   after its last use, and the peak of the live tensors it really holds is taken (:mod:`.execute`). It
   must equal the computed live peak (the run has no in-place ops), and the outputs must equal the original graph's (allclose), else the
   measurement is invalid with the reason.

The objective is ``peak_bytes`` (the no-allocator peak), the measurement's one objective and so what the
loop ranks by (``Measurement.score``); a measurement has no latency (``latency_s`` stays infinite, recorded
as null), so a task has no ``best_latency_ms`` and the run no ``tasks_latency_ms``: the target's own
metrics (``best_metrics``, ``run_metrics``) give its numbers. Rewriting the graph again (step 1) and
the run of step 3 check the method's answer (``stats["check_s"]``), which the search clock leaves out:
the clock is the method's scheduling time plus the computed numbers of step 2.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tunebench.config.experiment import ModelSettings, TargetSettings
from tunebench.config.knobs import NAME, POS_INT, POS_NUM, choice, knob, opt
from tunebench.errors import UserError
from tunebench.targets.base import Target
from tunebench.task import Measurement, Outcome, Task


class WrongOutput(ValueError):
    """The run of an order disagrees with the computed peak or the original graph's outputs (any other
    ValueError of :meth:`MemoryTarget.evaluate`: the config is no schedule the target can run)."""

    outcome = Outcome.WRONG_OUTPUT


@dataclass
class MemorySettings(TargetSettings):
    """Peak activation memory of a graph's execution order, computed and measured on the CPU."""

    name: str = knob("memory", NAME, "the target")
    kind: str = knob("memory", NAME, "the target class")
    onchip_kb: int = knob(256, POS_INT, "on-chip memory for the off-chip traffic ([Ahn-PhD] Fig. 3.11: 256 KB)")
    alignment: int = knob(64, POS_INT, "arena offset alignment (TFLite's kDefaultTensorAlignment: 64)")
    capacity_bytes: int | None = knob(None, opt(POS_INT), "the device's activation memory: a hard budget for the "
                                                          "schedulers, an order whose peak exceeds it is invalid; "
                                                          "null = none")
    accounting: str = knob("live", choice("live", "hmcos"), "the peak the objective counts: live = the sum of "
                                                            "live tensors the PyTorch run holds; hmcos = "
                                                            "HMCOS's ([Wang-DAC22]): an element-wise op "
                                                            "overwrites an input it reads last (both are "
                                                            "reported)")
    execute: bool = knob(True, None, "run every schedule in PyTorch and measure its peak (false: computed only)")
    rtol: float = knob(1e-4, POS_NUM, "relative tolerance of a rewritten graph's outputs against the original")
    atol: float = knob(1e-5, POS_NUM, "absolute tolerance of the same check")


class MemoryTarget(Target):
    """Schedules of graphs: their peak memory computed (sum of live tensors, TFLite arena, off-chip
    traffic) and measured by running them. Capabilities (:mod:`tunebench.targets.capabilities`): output
    checks (:meth:`check`) and its own metrics (:meth:`best_metrics`, :meth:`run_metrics`)."""

    kind = "memory"
    Settings = MemorySettings
    workloads = ("graph",)
    graph_schedules = True
    objectives = ("peak_bytes",)

    def __init__(self, settings: MemorySettings):
        super().__init__()
        self.settings, self.name = settings, settings.name
        self._rewritten: dict[tuple[str, tuple[str, ...]], tuple] = {}
        self._details: dict[tuple, dict] = {}
        self._reference: dict[str, list] = {}

    def info_fields(self, task: Task | None = None) -> dict:
        capacity = {"bytes": float(self.settings.capacity_bytes)} if self.settings.capacity_bytes else None
        return {**super().info_fields(task), "capacity": capacity,
                "details": {"onchip_kb": self.settings.onchip_kb, "execute": self.settings.execute,
                            "accounting": self.settings.accounting}}

    @classmethod
    def check_model(cls, settings: TargetSettings, model: ModelSettings, own_schedules: bool) -> None:
        if getattr(model, "workload", None) != "graph":
            raise UserError(f"model={model.name}: target={settings.name} schedules graph models")

    # ---- tasks ------------------------------------------------------------------------------
    def load_tasks(self, model, own_schedules: bool = False) -> tuple[list[Task], None]:
        """One task per graph of ``model``. Bad graphs and budgets fail here, before a run exists: a cycle, a
        node without a size, a capacity below the largest tensor (:func:`check_graphs`)."""
        from tunebench.datasets.graph_models import graph_id, load_graphs

        tasks = []
        for g in load_graphs(model):
            tasks.append(Task(id=graph_id(g, model), name=g.name, kind="graph", mod=g, flops=0,
                              shape={"nodes": len(g), "edges": g.n_edges, "batch": model.batch, "dtype": model.dtype},
                              target_kind=self.kind))
        check_graphs([t.mod for t in tasks], self.settings.capacity_bytes)
        return tasks, None

    # ---- measuring ----------------------------------------------------------------------------
    def graph_for(self, task: Task, rewrites: tuple[str, ...]):
        """``(graph, rewrites applied)`` of ``task`` after ``rewrites`` (cached)."""
        from tunebench.datasets.graph_rewrite import rewrite

        key = (task.id, tuple(rewrites))
        if key not in self._rewritten:
            t0 = time.perf_counter()  # re-deriving the method's graph to check its order: check_s
            self._rewritten[key] = rewrite(task.mod, tuple(rewrites)) if rewrites else (task.mod, 0)
            self._stats["check_s"] += time.perf_counter() - t0
        return self._rewritten[key]

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        return [self._measure_one(task, c) for c in configs]

    def _measure_one(self, task: Task, config) -> Measurement:
        try:
            d = self.evaluate(task, config)
        except ValueError as exc:
            return Measurement(task.id, config, exc.outcome if isinstance(exc, WrongOutput) else Outcome.INFEASIBLE, error=str(exc),
                               fidelity="hw")
        peak = float(d["peak_bytes"])
        return Measurement(task.id, config, Outcome.OK, objectives={"peak_bytes": peak},
                           run_s=d.get("execute_s", 0.0), fidelity="hw")

    def evaluate(self, task: Task, config) -> dict:
        """Every number of a config (cached); ValueError when it is not a valid schedule or the run
        disagrees with the computed peak or the original outputs."""
        key = (task.id, getattr(config, "order", None), getattr(config, "rewrites", None), config.index)
        if key not in self._details:
            self._details[key] = self._evaluate(task, config)
        return self._details[key]

    def _evaluate(self, task: Task, config) -> dict:
        from tunebench.datasets.graphs import is_topological, peak_memory
        from tunebench.targets.memory.plan import arena_peak, offchip_traffic

        graph, n_rewrites = self.graph_for(task, tuple(getattr(config, "rewrites", ())))
        missing = [n for n in getattr(config, "order", ()) if n not in graph.index]
        if missing or not hasattr(config, "order"):
            raise ValueError(f"not an order of this graph's nodes (unknown: {missing[:3]})")
        order = [graph.index[n] for n in config.order]
        if not is_topological(graph, order):
            raise ValueError("not a topological order of the graph")
        base = task.mod
        from tunebench.datasets.memory_accounting import peak_of

        s = self.settings
        program = peak_of(base, base.program_order(), s.accounting)
        live = peak_memory(graph, order)[0]
        hmcos = peak_of(graph, order, "hmcos")
        peak = hmcos if s.accounting == "hmcos" else live
        if s.capacity_bytes is not None and peak > s.capacity_bytes:
            raise ValueError(f"peak {peak} B exceeds target.capacity_bytes={s.capacity_bytes}")
        out = {"peak_bytes": peak, "live_peak_bytes": live, "hmcos_peak_bytes": hmcos, "arena_bytes": arena_peak(graph, order, s.alignment),
               "program_peak_bytes": program, "program_arena_bytes": arena_peak(base, base.program_order(), s.alignment),
               "reduction_vs_program": program / peak if peak else 1.0,
               "offchip_bytes": offchip_traffic(graph, order, s.onchip_kb * 1024),
               "program_offchip_bytes": offchip_traffic(base, base.program_order(), s.onchip_kb * 1024),
               "nodes_before": len(base), "edges_before": base.n_edges, "nodes_after": len(graph),
               "edges_after": graph.n_edges, "rewrites_applied": n_rewrites}
        if s.execute and len(graph):
            out.update(self._run(task, graph, order, live))
        return out

    def _run(self, task: Task, graph, order: list[int], peak: int) -> dict:
        from tunebench.targets.memory.execute import execute, outputs_match, reference_outputs

        t0 = time.perf_counter()
        try:  # an output check (check_s): the search clock leaves it out
            if task.id not in self._reference:
                self._reference[task.id] = reference_outputs(task.mod)
            run = execute(graph, order)
            ok, diff = outputs_match(run.outputs, self._reference[task.id], self.settings.rtol, self.settings.atol)
        finally:
            self._stats["check_s"] += time.perf_counter() - t0
        if run.peak_bytes != peak:  # the run holds what the live accounting counts
            raise WrongOutput(f"measured peak {run.peak_bytes} B != computed (live) {peak} B")
        if run.unreleased:
            raise WrongOutput(f"{run.unreleased} dropped tensors were not released")
        if not ok:
            raise WrongOutput(f"outputs differ from the original graph's (max |diff| {diff:.3g})")
        return {"measured_peak_bytes": run.peak_bytes, "execute_s": run.seconds, "output_max_diff": diff}

    def check(self, task: Task, config) -> tuple[bool | None, str]:
        if not self.settings.execute:
            return None, "check not performed: target.execute=false"
        try:
            d = self.evaluate(task, config)
        except ValueError as exc:
            return False, str(exc)
        return True, f"measured peak = computed peak; outputs allclose (max |diff| {d['output_max_diff']:.3g})"

    def best_metrics(self, task: Task, best: Measurement) -> dict[str, float]:
        try:
            d = self.evaluate(task, best.config)
        except ValueError:
            return {}
        return {k: float(v) for k, v in d.items()}

    def run_metrics(self, rows: list[tuple[Task, dict[str, float]]], summaries: list[dict]) -> dict[str, float]:
        """The largest peak over the tasks (cells run one after the other) with and without the arena, the
        geometric mean over tasks of the peak reduction against the program order, the off-chip traffic and
        its reduction, the methods' scheduling seconds, nodes and edges before and after rewriting."""
        return memory_run_metrics([r for _, r in rows], summaries)


def check_graphs(graphs: list, capacity: int | None) -> None:
    """One :class:`UserError` for the first bad graph: a cycle, a node without a size, or a
    ``capacity`` below its largest tensor."""
    from tunebench.datasets.graphs import check_acyclic

    for g in graphs:
        cycle = check_acyclic(g.preds)
        if cycle:
            raise UserError(f"model graph {g.name}: cyclic (nodes {' -> '.join(g.names[v] for v in cycle)}); "
                            "a schedule needs a DAG")
        unsized = [g.names[v] for v in range(len(g)) if g.nbytes[v] is None or g.nbytes[v] < 0]
        if unsized:
            raise UserError(f"model graph {g.name}: node {unsized[0]} has no output size (shape information)")
        if capacity is not None and g.largest_tensor > capacity:
            raise UserError(f"target.capacity_bytes={capacity}: below the largest tensor of {g.name} "
                            f"({g.largest_tensor} B); valid: at least {g.largest_tensor}")


def memory_run_metrics(rows: list[dict], summaries: list[dict]) -> dict[str, float]:
    """:meth:`MemoryTarget.run_metrics` from the tasks' ``best_metrics`` and ``tasks.json`` entries."""
    def total(key):
        return float(sum(r[key] for r in rows))

    out = {"peak_bytes": max(r["peak_bytes"] for r in rows), "arena_bytes": max(r["arena_bytes"] for r in rows),
           "program_peak_bytes": max(r["program_peak_bytes"] for r in rows),
           "program_arena_bytes": max(r["program_arena_bytes"] for r in rows),
           "peak_reduction_geomean": math.exp(sum(math.log(r["reduction_vs_program"]) for r in rows) / len(rows)),
           "offchip_bytes": total("offchip_bytes"), "program_offchip_bytes": total("program_offchip_bytes"),
           "nodes_before": total("nodes_before"), "nodes_after": total("nodes_after"),
           "edges_before": total("edges_before"), "edges_after": total("edges_after")}
    out["offchip_reduction"] = out["program_offchip_bytes"] / out["offchip_bytes"] if out["offchip_bytes"] else 1.0
    if all("measured_peak_bytes" in r for r in rows):
        out["measured_peak_bytes"] = max(r["measured_peak_bytes"] for r in rows)
    times = [(s.get("method_report") or {}).get("schedule_s") for s in summaries]
    if times and all(t is not None for t in times):
        out["schedule_s"] = float(sum(times))
    return out
