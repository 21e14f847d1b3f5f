"""``method=serenity`` and the scheduling baselines: methods that order a graph's nodes
(``needs.graphs``: ``target=memory``). Each computes one schedule in its first ``ask`` (the scheduling
time is the task's search clock) and then asks for nothing more: the loop ends the task as
``exhausted``, with no special path.

- ``serenity`` ([Ahn-PhD] §3.4; [Ahn-MLSys20]): identity graph rewriting (§3.4.3) when ``rewrite``
  lists rules, then the dynamic-programming scheduler (§3.4.1, Algorithm 2), split at the graph's cut
  nodes when ``divide`` (§3.4.2, Fig. 3.7), under adaptive soft budgeting when ``soft_budget``
  (Algorithm 3, ``step_limit_s`` = its T); with ``front_end``, after HMCOS's order ([Wang-DAC22]): under its
  peak, or inside its groups (:mod:`.windows`). With rewriting, the better of the rewritten and the original
  graph's schedules is proposed (a rewrite that does not lower the peak is not kept).
- ``program_order``, ``kahn``, ``dfs_order``, ``inductor`` (``order``: lpmf, bfs, dfs), ``brute_force``
  (at most ``max_nodes`` nodes): the baselines of :mod:`.orders`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, POS_NUM, bounded, choice, each, knob, opt, rule
from tunebench.methods.base import Method, TargetNeeds
from tunebench.search_space import ScheduleConfig

log = logging.getLogger(__name__)


class ScheduleMethod(Method):
    """A method whose answer is one execution order per task (computed in the first ``ask``)."""

    needs = TargetNeeds(objectives="single", graphs=True)

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.graph = task.mod
        self.rewritten = None  # (rules, graph) once rewritten
        self.done = False
        self.info: dict = {}

    def tell(self, measurements):
        super().tell(measurements)
        if measurements:  # resumed with its schedule measured: nothing left to do
            self.done = True

    def ask(self, n):
        if self.done or n < 1:
            return []
        self.done = True
        t0 = time.perf_counter()
        got = self.schedule()
        self.info["schedule_s"] = time.perf_counter() - t0
        if got is None:
            return []
        order, rewrites = got
        graph = self._graph_after(rewrites)
        return [ScheduleConfig(0, tuple(graph.names[v] for v in order), tuple(rewrites))]

    def _graph_after(self, rewrites):
        """The graph after ``rewrites`` (rewritten once per task)."""
        if not rewrites:
            return self.graph
        if self.rewritten is None or self.rewritten[0] != tuple(rewrites):
            from tunebench.datasets.graph_rewrite import rewrite

            self.rewritten = (tuple(rewrites), *rewrite(self.graph, tuple(rewrites)))
        return self.rewritten[1]

    def schedule(self) -> tuple[list[int], tuple[str, ...]] | None:
        """``(order of node indices, rewrites applied first)``, or None when there is no answer."""
        raise NotImplementedError

    def report(self) -> dict:
        return dict(self.info)


@dataclass
class SerenitySettings(MethodSettings):
    """SERENITY ([Ahn-PhD] §3.4): rewriting, DP scheduling, divide-and-conquer, adaptive soft budgeting."""

    name: str = knob("serenity", NAME, "the method")
    dp: bool = knob(True, None, "dynamic-programming scheduler (§3.4.1); false = Kahn's order (to isolate rewriting)")
    divide: bool = knob(True, None, "divide-and-conquer at the graph's cut nodes (§3.4.2, Fig. 3.7)")
    soft_budget: bool = knob(True, None, "adaptive soft budgeting (§3.4.2, Algorithm 3)")
    rewrite: list[str] = knob(["channel", "kernel"], each(choice("channel", "kernel"), "rewrite rules: channel, "
                                                          "kernel"), "identity rewrites (§3.4.3): channel-wise "
                                                          "partitioning of concat->conv, kernel-wise of "
                                                          "concat->depthwise conv; [] = none")
    step_limit_s: float = knob(10.0, POS_NUM, "T of Algorithm 3: time limit of one DP run under a soft budget "
                                              "(our choice; the thesis gives no value)")
    time_limit_s: float | None = knob(600.0, opt(POS_NUM), "the scheduler gives up after this long per graph "
                                                           "(no schedule: Table 3.2's N/A); null = never")
    front_end: str = knob("none", choice("none", "hmcos", "hmcos_groups"),
                          "hmcos: HMCOS's order first ([Wang-DAC22], method=hmcos's defaults, within "
                          "front_end_share of time_limit_s); its peak is the DP's hard budget, and its order the answer when the DP "
                          "does not finish; hmcos_groups: HMCOS's order cut into windows that hold whole HMCOS "
                          "groups, each window reordered by the DP (exact among the orders that keep the windows "
                          "in HMCOS's sequence, not over all orders), no DP over the whole graph unless HMCOS "
                          "gives no order or one window holds it all (our addition)")
    front_end_share: float = knob(0.8, rule(lambda v: isinstance(v, (int, float)) and 0 < v <= 1,
                                            "a number in (0, 1]"),
                                  "with front_end: the share of time_limit_s HMCOS may take; the DP gets what is "
                                  "left of time_limit_s (HMCOS's order stands wherever the DP does not finish, so "
                                  "the peak is never above HMCOS's when HMCOS finishes within its share)")
    window_groups: int = knob(1, bounded(1, 1000), "front_end=hmcos_groups: HMCOS groups per window (more: a "
                                                   "larger DP per window, more orders searched)")
    window_max_nodes: int | None = knob(64, opt(bounded(2, 100000)),
                                        "front_end=hmcos_groups: a window of more nodes is split in two, "
                                        "recursively, where the fewest bytes are live (its middle half); null "
                                        "= never (the DP's time grows exponentially with a window's width)")


class Serenity(ScheduleMethod):
    """Settings: :class:`SerenitySettings`."""

    name = "serenity"
    Settings = SerenitySettings

    def schedule(self):
        from tunebench.datasets.graphs import peak_memory

        s = self.settings
        best = self._schedule_graph(self.graph, "")
        if s.rewrite:
            rewritten = self._graph_after(s.rewrite)
            count = self.rewritten[2]
            self.info.update(rewrites_applied=count, nodes_rewritten=len(rewritten), edges_rewritten=rewritten.n_edges)
            other = self._schedule_graph(rewritten, "rewritten_") if count else None
            if other is not None and (best is None or
                                      peak_memory(rewritten, other)[0] < peak_memory(self.graph, best)[0]):
                return other, tuple(s.rewrite)
        return None if best is None else (best, ())

    def _schedule_graph(self, graph, prefix: str) -> list[int] | None:
        from tunebench.methods.graph_memory import dp
        from tunebench.methods.graph_memory.orders import kahn_order

        s = self.settings
        if not s.dp:
            return kahn_order(graph)
        stats = dp.DPStats()
        capacity = (self.target_info.capacity or {}).get("bytes")
        t0 = time.perf_counter()
        front = self._front_end(graph, prefix) if s.front_end != "none" else None
        if front is not None and s.front_end == "hmcos_groups":
            from tunebench.methods.graph_memory.windows import group_windows, split_large

            cut = split_large(graph, group_windows(front[0], front[2], s.window_groups), s.window_max_nodes)
            if len(cut) > 1:  # one window: the DP over the whole graph, as with front_end=hmcos
                return self._windows(graph, prefix, cut, t0, capacity)
        if front is not None and (capacity is None or front[1] <= capacity):
            capacity = front[1]  # the DP looks for an order at most as high as HMCOS's
        left = s.time_limit_s if s.time_limit_s is None else max(s.time_limit_s - (time.perf_counter() - t0), 1e-3)
        try:
            if s.soft_budget:
                got = dp.soft_budget_schedule(graph, s.divide, kahn_order(graph), s.step_limit_s, capacity,
                                              total_limit_s=left, stats=stats)
            else:
                got = dp.schedule(graph, s.divide, capacity, left, stats)
        except dp.Timeout:
            got = front
            self.info[f"{prefix}timed_out"] = 1.0
            log.warning("serenity: the DP ran past time_limit_s=%s on %s (%d nodes): %s", s.time_limit_s,
                        graph.name, len(graph), "HMCOS's order" if front else "no schedule")
        self.info.update({f"{prefix}dp_s": time.perf_counter() - t0, f"{prefix}dp_states": stats.states,
                          f"{prefix}dp_runs": stats.runs, f"{prefix}partitions": len(stats.partitions or []),
                          f"{prefix}largest_partition": max(stats.partitions or [0])})
        if stats.budgets:
            self.info[f"{prefix}soft_budgets_tried"] = len(stats.budgets)
        if got is None and capacity is not None:
            log.warning("serenity: no order of %s fits target.capacity_bytes=%d", graph.name, capacity)
        return None if got is None else got[0]

    def _front_end(self, graph, prefix: str) -> tuple[list[int], int, list[int]] | None:
        """HMCOS's order of ``graph``, its peak (live accounting) and each node's HMCOS group, or None past
        ``front_end_share`` of ``time_limit_s`` (the rest is the DP's)."""
        from tunebench.methods.graph_memory import hmcos

        t0 = time.perf_counter()
        s = self.settings
        limit = None if s.time_limit_s is None else s.time_limit_s * s.front_end_share
        stats = hmcos.HmcosStats()
        try:
            got = hmcos.hmcos_schedule(graph, "live", hmcos.Options(time_limit_s=limit), stats)
        except hmcos.Timeout:
            got = None
        self.info[f"{prefix}front_end_s"] = time.perf_counter() - t0
        if got is None:
            return None
        self.info[f"{prefix}front_end_peak"] = float(got[1])
        return got[0], got[1], stats.node_groups

    def _windows(self, graph, prefix: str, cut: list[list[int]], t0: float, capacity) -> list[int] | None:
        """``front_end=hmcos_groups``: HMCOS's order, cut into windows ``cut``, each reordered by the DP
        (:mod:`.windows`); None when it does not fit ``capacity``."""
        from tunebench.methods.graph_memory import dp, windows

        s = self.settings
        deadline = None if s.time_limit_s is None else t0 + s.time_limit_s
        stats, dp_stats = windows.WindowStats(), dp.DPStats()
        order, peak = windows.window_schedule(graph, cut, deadline, stats, dp_stats)
        self.info.update({f"{prefix}dp_s": time.perf_counter() - t0, f"{prefix}dp_states": dp_stats.states,
                          f"{prefix}windows": stats.windows, f"{prefix}largest_window": stats.largest,
                          f"{prefix}windows_solved": stats.solved, f"{prefix}windows_improved": stats.improved,
                          f"{prefix}timed_out": float(stats.timed_out)})
        if capacity is not None and peak > capacity:
            log.warning("serenity: no order of %s fits target.capacity_bytes=%d", graph.name, capacity)
            return None
        return order


@dataclass
class HmcosSettings(MethodSettings):
    """HMCOS ([Wang-DAC22]): hierarchical graph (sequences, groups), memory-constrained scheduling within
    and across groups, iterated at the peak."""

    name: str = knob("hmcos", NAME, "the method")
    join_sequences: bool = knob(True, None, "join chains of nodes that do not raise the memory into sequences "
                                            "([Wang-DAC22] §3.1); false = one sequence per node")
    make_groups: bool = knob(True, None, "gather each cell (what a cell output post-dominates) into a group "
                                         "([Wang-DAC22] §3.1); false = no groups (the top-level DP is exact)")
    cell_ops: list[str] = knob(["cat", "stack"], each(rule(lambda v: isinstance(v, str) and v.strip() != "",
                                                            "an op name"), "op names"),
                               "ops that end a cell (HMCOS: ONNX Concat; ours: torch cat, stack)")
    try_rpo: bool = knob(True, None, "run a group in reverse post-order when that does not raise the peak so "
                                     "far, before its DP ([Wang-DAC22] §3.2)")
    memo_groups: bool = knob(True, None, "memoize a group's DP order per context (which outer inputs it "
                                         "frees) across iterations ([Wang-DAC22] §3.2)")
    iterate: bool = knob(True, None, "iterate: ungroup the groups at the peak and reschedule under the best "
                                     "peak as budget ([Wang-DAC22] §3.3); false = one pass")
    max_iterations: int | None = knob(None, opt(bounded(1, 100000)), "stop iterating after this many schedules; "
                                                                     "null = until nothing is left to ungroup")
    accounting: str = knob("target", choice("target", "live", "hmcos"), "the memory it minimizes: target = "
                                                                        "target.accounting; live; hmcos "
                                                                        "(in-place element-wise ops)")
    time_limit_s: float | None = knob(60.0, opt(POS_NUM), "stop iterating after this long per graph (the best "
                                                          "schedule so far; none before the first: no "
                                                          "schedule); null = never")


class Hmcos(ScheduleMethod):
    """Settings: :class:`HmcosSettings`."""

    name = "hmcos"
    Settings = HmcosSettings

    def schedule(self):
        from tunebench.methods.graph_memory import hmcos

        s = self.settings
        accounting = (self.target_info.details or {}).get("accounting", "live") if s.accounting == "target" \
            else s.accounting
        opts = hmcos.Options(s.join_sequences, s.make_groups, tuple(s.cell_ops), s.try_rpo, s.memo_groups,
                             s.iterate, s.max_iterations, s.time_limit_s)
        stats = hmcos.HmcosStats()
        try:
            got = hmcos.hmcos_schedule(self.graph, accounting, opts, stats)
        except hmcos.Timeout:
            got = None
            log.warning("hmcos: no schedule of %s within time_limit_s=%s", self.graph.name, s.time_limit_s)
        self.info.update(sequences=stats.sequences, groups=stats.groups, iterations=stats.iterations,
                         dp_states=stats.states, rpo_groups=stats.rpo_groups, dp_groups=stats.dp_groups,
                         memo_hits=stats.memo_hits, timed_out=float(stats.timed_out or got is None))
        return None if got is None else (got[0], ())


# ---- baselines ------------------------------------------------------------------------------
@dataclass
class BaselineSettings(MethodSettings):
    """A fixed topological order: no hyperparameters."""

    name: str = knob("program_order", NAME, "the method")


class _FixedOrder(ScheduleMethod):
    Settings = BaselineSettings
    order_name = "program"

    def schedule(self):
        from tunebench.methods.graph_memory.orders import BASELINES

        return BASELINES[self.order_name](self.graph), ()


def _baseline(method_name: str, order_name: str, doc: str) -> type[ScheduleMethod]:
    settings = dataclass(type(f"{order_name.title().replace('_', '')}Settings", (BaselineSettings,),
                              {"__annotations__": {"name": str}, "__doc__": doc,
                               "name": knob(method_name, NAME, "the method")}))
    return type(f"{order_name.title().replace('_', '')}Order", (_FixedOrder,),
                {"name": method_name, "Settings": settings, "order_name": order_name, "__doc__": doc})


ProgramOrder = _baseline("program_order", "program", "The program order (the network's forward; TFLite keeps it).")
KahnOrder = _baseline("kahn", "kahn", "Kahn's topological order, FIFO ([Kahn-CACM62]).")
DFSOrder = _baseline("dfs_order", "dfs", "A depth-first topological order (the latest ready node runs next).")
RPOOrder = _baseline("rpo", "rpo", "Reverse post-order of a depth-first search from the sources (the baseline "
                                   "of [Wang-DAC22]).")


@dataclass
class InductorSettings(MethodSettings):
    """PyTorch Inductor's memory-aware topological sorts (``torch._inductor.memory``)."""

    name: str = knob("inductor", NAME, "the method")
    order: str = knob("lpmf", choice("lpmf", "bfs", "dfs"), "lpmf: least peak memory first; bfs; dfs "
                                                          "(Inductor's reorder_for_peak_memory candidates)")


class InductorOrder(ScheduleMethod):
    """Settings: :class:`InductorSettings`."""

    name = "inductor"
    Settings = InductorSettings

    def schedule(self):
        from tunebench.methods.graph_memory.orders import inductor_order

        return inductor_order(self.graph, self.settings.order), ()


@dataclass
class BruteForceSettings(MethodSettings):
    """Every topological order of a small graph ([Ahn-PhD] §3.3: Theta(|V|!))."""

    name: str = knob("brute_force", NAME, "the method")
    max_nodes: int = knob(12, bounded(1, 16), "largest graph enumerated (a larger one gets no schedule)")


class BruteForce(ScheduleMethod):
    """Settings: :class:`BruteForceSettings`."""

    name = "brute_force"
    Settings = BruteForceSettings

    def check_task(self, task, target_info):
        n = len(task.mod) if hasattr(task.mod, "preds") else 0
        if n > self.settings.max_nodes:
            return (f"method.max_nodes={self.settings.max_nodes}: graph {task.name} has {n} nodes; brute force "
                    f"enumerates graphs of at most max_nodes (valid: 1-16) nodes")
        return None

    def schedule(self):
        from tunebench.methods.graph_memory.orders import brute_force

        if len(self.graph) > self.settings.max_nodes:  # a run's tasks are refused before it (check_task)
            log.warning("brute_force: %s has %d nodes > max_nodes=%d: no schedule", self.graph.name, len(self.graph),
                        self.settings.max_nodes)
            self.info["skipped"] = 1.0
            return None
        return brute_force(self.graph)[0], ()


SCHEDULE_METHODS = {cls.name: cls for cls in (Serenity, Hmcos, ProgramOrder, KahnOrder, DFSOrder, RPOOrder,
                                               InductorOrder, BruteForce)}
