"""SERENITY's scheduler ([Ahn-PhD] §3.4.1-3.4.2; [Ahn-MLSys20]): the dynamic program over
zero-indegree sets (Algorithm 2), divide-and-conquer at the graph's cut nodes (Fig. 3.7) and adaptive
soft budgeting (Algorithm 3).

A DP state is the set of scheduled nodes (a bitmask). It is in one-to-one correspondence with the
thesis's signature, the zero-indegree set z (the scheduled set is everything not above z), and the
live memory is a function of it, so one (peak, predecessor) pair per state is kept: the one with the
least peak (Theorem 1). The liveness model is :mod:`tunebench.datasets.graphs`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tunebench.datasets.graphs import Graph, peak_memory


class Timeout(Exception):
    """A scheduler ran past its time limit: a DP step (Algorithm 3's "timeout"), or HMCOS before its first schedule."""


@dataclass
class DPStats:
    """What a scheduling run explored: states kept, transitions tried, DP runs, budgets tried."""

    states: int = 0
    transitions: int = 0
    runs: int = 0
    budgets: list | None = None
    partitions: list | None = None


class Masks:
    """The graph as bitmasks: predecessors, users (whose completion frees a node), bytes; and the
    graph's successor lists."""

    def __init__(self, graph: Graph):
        self.n = len(graph)
        self.nbytes = list(graph.nbytes)
        self.pred = [sum(1 << p for p in ps) for ps in graph.preds]
        self.users = [sum(1 << u for u in us) for us in graph.users]
        self.frees = graph.frees()
        self.succs = graph.succs

    def live(self, mask: int) -> int:
        """Bytes live once the nodes of ``mask`` ran."""
        return sum(self.nbytes[v] for v in range(self.n)
                   if mask >> v & 1 and (self.users[v] & ~mask or not self.users[v]))


def dp_segment(m: Masks, start: int, segment: int, start_peak: int, budget: float | None, deadline: float | None,
               stats: DPStats) -> tuple[list[int], int] | None:
    """The least-peak order of the nodes of ``segment`` (a mask) after the nodes of ``start`` ran,
    and its peak (at least ``start_peak``); None when every order exceeds ``budget``.

    A state keeps its ready set (the segment's unscheduled nodes whose predecessors ran, the thesis's
    zero-indegree set), so that a step looks at those nodes only.

    Raises:
        Timeout: ``deadline`` (``time.perf_counter()`` value) passed.
    """
    stats.runs += 1
    nodes = [v for v in range(m.n) if segment >> v & 1]
    # per node: (bytes, ((users, bytes) of each node it may free), its successors in the segment)
    info = {v: (m.nbytes[v], tuple((m.users[p], m.nbytes[p]) for p in m.frees[v]),
                [w for w in m.succs[v] if segment >> w & 1]) for v in nodes}
    ready0 = sum(1 << v for v in nodes if not m.pred[v] & ~start)
    layer = {start: (start_peak, m.live(start), ready0)}
    parents: list[dict[int, tuple[int, int]]] = []
    limit = float("inf") if budget is None else budget
    transitions = 0
    for _ in range(len(nodes)):
        nxt: dict[int, tuple[int, int, int]] = {}
        back: dict[int, tuple[int, int]] = {}
        for mask, (peak, mem, ready) in layer.items():
            if deadline is not None and time.perf_counter() > deadline:
                raise Timeout()
            todo = ready
            while todo:
                bit = todo & -todo
                todo ^= bit
                u = bit.bit_length() - 1
                nbytes, frees, succ = info[u]
                transitions += 1
                new_mem = mem + nbytes
                new_peak = peak if peak > new_mem else new_mem
                if new_peak > limit:
                    continue
                done = mask | bit
                old = nxt.get(done)
                if old is not None and old[0] <= new_peak:
                    continue
                for users_p, freed in frees:
                    if not users_p & ~done:
                        new_mem -= freed
                new_ready = ready ^ bit
                for w in succ:
                    if not m.pred[w] & ~done:
                        new_ready |= 1 << w
                nxt[done] = (new_peak, new_mem, new_ready)
                back[done] = (mask, u)
        if not nxt:
            stats.transitions += transitions
            return None
        stats.states += len(nxt)
        parents.append(back)
        layer = nxt
    stats.transitions += transitions
    full = start | segment
    return (_trace_back(parents, full), layer[full][0]) if full in layer else None


def _trace_back(parents: list[dict[int, tuple[int, int]]], full: int) -> list[int]:
    """The order that reached the state ``full``, from each layer's (predecessor state, node) links."""
    order, mask = [], full
    for back in reversed(parents):
        prev, u = back[mask]
        order.append(u)
        mask = prev
    return order[::-1]


def cut_segments(graph: Graph) -> list[int]:
    """Divide ([Ahn-PhD] Fig. 3.7): masks of consecutive subgraphs split at the cut nodes (nodes every
    other node is an ancestor or a descendant of). Every topological order runs the segments one after
    the other, and the live memory at a cut does not depend on the order inside the segments, so the
    best orders of the segments concatenated are a best order of the graph."""
    n = len(graph)
    anc = [0] * n
    for v in range(n):  # program order is topological
        for p in graph.preds[v]:
            anc[v] |= anc[p] | 1 << p
    desc = [0] * n
    for v in reversed(range(n)):
        for s in graph.succs[v]:
            desc[v] |= desc[s] | 1 << s
    full = (1 << n) - 1
    cuts = [v for v in range(n) if anc[v] | desc[v] | 1 << v == full]
    segments, done = [], 0
    for c in cuts:
        seg = (anc[c] | 1 << c) & ~done
        if seg:
            segments.append(seg)
            done |= seg
    if full & ~done:
        segments.append(full & ~done)
    return segments


def schedule(graph: Graph, divide: bool, budget: float | None = None, step_limit_s: float | None = None,
             stats: DPStats | None = None) -> tuple[list[int], int] | None:
    """The DP (with divide-and-conquer when ``divide``) under a hard ``budget``; None: no order fits.

    Raises:
        Timeout: the DP (all segments together) ran longer than ``step_limit_s``.
    """
    stats = stats if stats is not None else DPStats()
    m = Masks(graph)
    segments = cut_segments(graph) if divide else [(1 << len(graph)) - 1]
    stats.partitions = [bin(s).count("1") for s in segments]
    order: list[int] = []
    done, peak = 0, 0
    deadline = time.perf_counter() + step_limit_s if step_limit_s is not None else None
    for seg in segments:
        got = dp_segment(m, done, seg, peak, budget, deadline, stats)
        if got is None:
            return None
        order += got[0]
        peak = got[1]
        done |= seg
    return order, peak


def working_set_bound(graph: Graph) -> int:
    """A lower bound of every order's peak: the largest node output plus the tensors it reads."""
    return max((graph.nbytes[v] + sum(graph.nbytes[o] for o in {graph.owner[p] for p in graph.preds[v]})
                for v in range(len(graph))), default=0)


def soft_budget_schedule(graph: Graph, divide: bool, kahn_order: list[int], step_limit_s: float,
                         hard_budget: float | None = None, max_rounds: int = 64, total_limit_s: float | None = None,
                         stats: DPStats | None = None) -> tuple[list[int], int] | None:
    """Adaptive soft budgeting ([Ahn-PhD] Algorithm 3): a binary search for the soft budget tau between
    a lower bound of every order's peak (:func:`working_set_bound`) and the hard budget tau_max, the peak of Kahn's order (or ``hard_budget`` when
    smaller). A DP run under tau prunes every partial order whose peak exceeds tau; a run longer than
    ``step_limit_s`` (T) is a 'timeout' and lowers tau (to tau / 2, or halfway to the largest tau known to
    give 'no solution' when tau / 2 is not above it); a run that finds nothing is a 'no solution' and raises
    tau halfway to the smallest tau that timed out (at first tau_max). The first solution is optimal
    (tau >= the optimal peak). When the bounds meet, or after ``max_rounds`` runs, the DP runs under the
    smallest tau that timed out, then under tau_max, with the time that is left.

    The algorithm's pseudo-code updates ``(tau_old, tau_new) <- (tau_new, (tau_new + tau_old) / 2)`` on 'no
    solution', which lowers tau after two 'no solution's in a row although its text says the search raises
    tau then; the bounds kept here are our reading of that text. A DP run under a tau below the optimum can
    also time out (a cell's peak is often reached at its last node, so such a run explores nearly every
    state before it fails): the smallest timed-out tau is then below the optimum and the final runs find
    the order.

    Raises:
        Timeout: ``total_limit_s`` passed (our addition: with a T below the time of one DP run under the
            optimal budget the search has no end).
    """
    stats = stats if stats is not None else DPStats()
    stats.budgets = []
    end = time.perf_counter() + total_limit_s if total_limit_s is not None else None
    tau_max = float(peak_memory(graph, kahn_order)[0])
    if hard_budget is not None:
        tau_max = min(tau_max, float(hard_budget))
    lo, hi, tau = float(working_set_bound(graph)) - 1.0, tau_max, tau_max
    for _ in range(max_rounds):
        if hi - lo < max(1.0, 1e-3 * tau_max):  # the bounds met (to 0.1 % of tau_max)
            break
        stats.budgets.append(tau)
        left = None if end is None else end - time.perf_counter()
        if left is not None and left <= 0:
            raise Timeout()
        try:
            got = schedule(graph, divide, tau, step_limit_s if left is None else min(step_limit_s, left), stats)
        except Timeout:  # 'timeout': a smaller budget prunes more
            hi = tau
            tau = tau / 2 if tau / 2 > lo else (lo + tau) / 2
            continue
        if got is not None:
            return got
        lo, tau = tau, (tau + hi) / 2  # 'no solution': the budget is below the optimum
    for final in dict.fromkeys((hi, tau_max)):
        stats.budgets.append(final)
        got = schedule(graph, divide, final, None if end is None else end - time.perf_counter(), stats)
        if got is not None:
            return got
    return None
