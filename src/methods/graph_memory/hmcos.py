"""HMCOS's scheduler ([Wang-DAC22] §3.2-3.3), written from the paper's description: memory-constrained
scheduling of the hierarchical graph (:mod:`.hmcos_hier`), iterated.

- **Top level**: a dynamic program over the top-level vertices (groups and sequences outside groups):
  a state is the set of vertices run; of the partial orders reaching a state, the one with the least
  peak is kept (the live bytes after a set do not depend on its order); every partial order whose peak
  exceeds the budget is pruned.
- **A sequence** runs its nodes in their one order.
- **A group**, in its context (which of the tensors it reads from outside it reads for the last time),
  runs its sequences in reverse post-order when that does not raise the peak so far (``try_rpo``),
  else by the same dynamic program over its sequences under the budget; that result is memoized per
  (group, context) across iterations (``memo_groups``).
- **Iteration** (``iterate``): the budget is the best peak found so far; after each schedule, the
  groups holding a sequence that defines a tensor live at the peak, and the groups that follow such a
  sequence, are ungrouped (their sequences become top-level vertices), and the top level is scheduled
  again; it ends when nothing is left to ungroup at the peak (or at ``max_iterations``). The best
  schedule found is the answer.

The memory of a step is the accounting's (:class:`~tunebench.datasets.memory_accounting.StepModel`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from tunebench.datasets.graphs import Graph
from tunebench.datasets.memory_accounting import StepModel
from tunebench.methods.graph_memory.dp import Timeout  # raised here when the deadline passes before a first schedule
from tunebench.methods.graph_memory.hmcos_dp import Clock, SeqRunner, Units, least_peak_dp, ordered_dp
from tunebench.methods.graph_memory.hmcos_hier import Hierarchy, build, top_level


@dataclass
class HmcosStats:
    """What a run did: sequences, groups, iterations, DP states, groups scheduled in RPO / by DP, and the
    hierarchy's groups as built."""

    sequences: int = 0
    groups: int = 0
    iterations: int = 0
    states: int = 0
    rpo_groups: int = 0
    dp_groups: int = 0
    memo_hits: int = 0
    peaks: list = field(default_factory=list)
    timed_out: bool = False
    node_groups: list = field(default_factory=list)  # each node's group before any ungrouping (-1: none)


@dataclass
class Options:
    join: bool = True
    make_groups: bool = True
    cell_ops: tuple = ("cat", "stack")
    try_rpo: bool = True
    memo_groups: bool = True
    iterate: bool = True
    max_iterations: int | None = None
    time_limit_s: float | None = None


# a partial schedule: (peak, live bytes, nodes run as a bitmask, order as nested (previous, chunk) links)
State = tuple


def _flatten(link) -> list[int]:
    chunks = []
    while link is not None:
        link, chunk = link
        chunks.append(chunk)
    return [v for chunk in reversed(chunks) for v in chunk]


def reverse_post_order(hier: Hierarchy, seqs: list[int]) -> list[int]:
    """``seqs`` in the reverse post-order of a depth-first search along their edges, from their entries
    (those without a predecessor among them), in the order of their first nodes."""
    inside = set(seqs)
    seen: set[int] = set()
    post: list[int] = []
    for root in seqs:
        if root in seen or hier.seq_preds(root) & inside:
            continue
        stack = [(root, iter(sorted(hier.seq_succs(root) & inside)))]
        seen.add(root)
        while stack:
            s, it = stack[-1]
            nxt = next((t for t in it if t not in seen), None)
            if nxt is None:
                post.append(s)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(hier.seq_succs(nxt) & inside))))
    return post[::-1]


class HierScheduler:
    """One graph's HMCOS scheduling (see the module's text)."""

    def __init__(self, graph: Graph, model: StepModel, opts: Options):
        self.graph, self.model, self.opts = graph, model, opts
        self.stats = HmcosStats()
        self.memo: dict[tuple, tuple] = {}  # (group, context) -> its DP order, peak and live bytes added
        self._rpo: dict[tuple, tuple] = {}  # (group, context) -> its RPO's peak and live bytes added
        self._groups: dict[int, tuple] = {}
        self.deadline = None if opts.time_limit_s is None else time.perf_counter() + opts.time_limit_s
        self.clock = Clock(self.deadline)
        self.runner: SeqRunner | None = None

    # ---- pieces ------------------------------------------------------------------------------
    def run_nodes(self, nodes, done: int, live: int, peak: int, budget: float):
        """Run ``nodes`` in order: (peak, live, done) after them, or None when a step exceeds ``budget``."""
        step = self.model.step
        for u in nodes:
            up, live = step(done, live, u)
            if up > budget:
                return None
            done |= 1 << u
            if up > peak:
                peak = up
        return peak, live, done

    def dp(self, preds: list[int], start: State, seq_of: list, unit_masks: list[int], budget: float,
           run_other=None) -> State | None:
        """The least-peak order of the units (``preds``: each one's predecessors, a bitmask over the units;
        ``unit_masks``: each one's nodes) from ``start``: unit ``i`` is sequence ``seq_of[i]``, or (None)
        run by ``run_other(i, state)`` (None: over the budget); :mod:`.hmcos_dp`."""
        units = Units.of(self.runner, preds, seq_of, unit_masks, start[2])
        if budget == math.inf and None not in seq_of:
            got, states = least_peak_dp(units, start, self.clock)
        else:
            got, states = ordered_dp(units, start, budget, run_other, self.clock)
        self.stats.states += states
        return got

    def _group(self, hier: Hierarchy, gid: int, seqs: list[int]) -> tuple:
        """(nodes in RPO, nodes as a bitmask, storages read from outside) of a group (cached)."""
        if gid not in self._groups:
            rpo = [v for s in reverse_post_order(hier, seqs) for v in hier.seqs[s]]
            inside = sum(1 << v for v in rpo)
            owner = self.graph.owner
            outside = tuple(sorted({owner[p] for v in rpo for p in self.graph.preds[v] if not inside >> owner[p] & 1}))
            self._groups[gid] = (tuple(rpo), inside, outside)
        return self._groups[gid]

    def run_group(self, hier: Hierarchy, gid: int, seqs: list[int], state: State, budget: float) -> State | None:
        peak, live, done, link = state
        rpo, inside, outside = self._group(hier, gid, seqs)
        users = self.model.users
        context = (gid, tuple(p for p in outside if not users[p] & ~inside & ~done))
        if self.opts.memo_groups and context in self.memo:
            order, rel_peak, delta = self.memo[context]
            if live + rel_peak > budget:
                return None
            self.stats.memo_hits += 1
            return max(peak, live + rel_peak), live + delta, done | inside, (link, order)
        if self.opts.try_rpo:  # the group's sequences in reverse post-order, if that keeps the peak
            if context not in self._rpo:
                got = self.run_nodes(rpo, done, live, live, math.inf)
                self._rpo[context] = (got[0] - live, got[1] - live)
            rel_peak, delta = self._rpo[context]
            if live + rel_peak <= min(budget, peak):
                self.stats.rpo_groups += 1
                return peak, live + delta, done | inside, (link, rpo)
        index = {s: i for i, s in enumerate(seqs)}
        preds = [sum(1 << index[p] for p in hier.seq_preds(s) if p in index) for s in seqs]
        got = self.dp(preds, (live, live, done, None), seqs, [self.runner.masks[s] for s in seqs], budget)
        if got is None:
            return None
        self.stats.dp_groups += 1
        order = tuple(_flatten(got[3]))
        if self.opts.memo_groups:
            self.memo[context] = (order, got[0] - live, got[1] - live)
        return max(peak, got[0]), got[1], got[2], (link, order)

    # ---- the whole graph ---------------------------------------------------------------------
    def schedule_once(self, hier: Hierarchy, budget: float) -> tuple[list[int], int] | None:
        verts, preds = top_level(hier)
        groups = hier.groups()

        def run_group(i: int, state: State):
            return self.run_group(hier, verts[i][1], groups[verts[i][1]], state, budget)

        seq_of = [key if kind == "seq" else None for kind, key in verts]
        masks = [self.runner.masks[key] if kind == "seq" else self._group(hier, key, groups[key])[1]
                 for kind, key in verts]
        got = self.dp(preds, (0, 0, 0, None), seq_of, masks, budget, run_group)
        return None if got is None else (_flatten(got[3]), got[0])

    def peak_sequences(self, hier: Hierarchy, order: list[int]) -> set[int]:
        """The sequences defining a tensor live while the order is at its peak."""
        peak, ups = self.model.trace(order)
        pos = {v: i for i, v in enumerate(order)}
        g = self.graph
        last = [max((pos[w] for w in g.users[v]), default=math.inf) for v in range(len(g))]
        out = set()
        for i, up in enumerate(ups):
            if up != peak:
                continue
            u = order[i]
            for v in order[:i + 1]:
                if g.nbytes[v] and g.owner[v] == v and last[v] >= i and not (last[v] == i and self.model.overlap[u] == v):
                    out.add(hier.seq_of[v])
        return out

    def schedule(self) -> tuple[list[int], int] | None:
        """The best order found and its peak; None: no first schedule before the deadline.

        Raises:
            Timeout: the deadline passed before the first schedule.
        """
        o = self.opts
        hier = build(self.graph, self.model, o.join, o.make_groups, tuple(o.cell_ops))
        self.runner = SeqRunner(self.model, hier.seqs)
        self.stats.sequences, self.stats.groups = len(hier.seqs), len(hier.groups())
        self.stats.node_groups = [hier.group_of[hier.seq_of[v]] for v in range(len(self.graph))]
        best, budget = None, math.inf
        while o.max_iterations is None or self.stats.iterations < o.max_iterations:
            try:
                got = self.schedule_once(hier, budget)
            except Timeout:
                if best is None:
                    raise
                self.stats.timed_out = True
                break
            self.stats.iterations += 1
            if got is None:
                break
            self.stats.peaks.append(got[1])
            if best is None or got[1] < best[1]:
                best, budget = got, got[1]
            if not o.iterate or not self._ungroup_at_peak(hier, got[0]):
                break
        return best

    def _ungroup_at_peak(self, hier: Hierarchy, order: list[int]) -> bool:
        changed = False
        for s in self.peak_sequences(hier, order):
            if hier.group_of[s] >= 0:
                changed |= hier.ungroup(hier.group_of[s])
            for t in hier.seq_succs(s):
                if hier.group_of[t] >= 0:
                    changed |= hier.ungroup(hier.group_of[t])
        return changed


def hmcos_schedule(graph: Graph, accounting: str = "live", opts: Options | None = None,
                   stats: HmcosStats | None = None) -> tuple[list[int], int] | None:
    """HMCOS's order of ``graph`` and its peak under ``accounting`` (see :class:`HierScheduler`)."""
    sched = HierScheduler(graph, StepModel(graph, accounting), opts or Options())
    try:
        return sched.schedule()
    finally:
        if stats is not None:
            stats.__dict__.update(sched.stats.__dict__)
