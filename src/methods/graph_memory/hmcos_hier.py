"""HMCOS's hierarchical graph ([Wang-DAC22] §3.1): a graph's nodes joined into *sequences* (chains
that one order runs back to back without raising the memory), and sequences gathered into *groups*
(the cells of a NAS network: everything a cell's output post-dominates, back to where the cell
begins). The top level of the hierarchy is its groups and its sequences outside groups; the scheduler
(:mod:`.hmcos`) orders the top level, then each group inside, and ungroups where the peak lies.

Our reading of the paper's description, written from it: a node joins its predecessor's sequence when it
is that node's only successor, has no other predecessor, and its memory states (the peak while it runs
and the live bytes after it, counting only the inputs it is the last reader of) raise neither the
sequence's peak so far nor its live bytes. A cell output is a node whose operation is one of
``cell_ops`` (HMCOS: a concatenation); its group is every sequence, not yet in a group, reached from it
backwards through sequences it post-dominates (the graph's inputs excepted: HMCOS's inputs are no
operations).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.datasets.graphs import Graph
from tunebench.datasets.memory_accounting import StepModel


@dataclass
class Hierarchy:
    """Sequences (node lists in their order), each node's sequence, each sequence's group (-1: none)."""

    graph: Graph
    seqs: list[list[int]]
    seq_of: list[int]
    group_of: list[int]

    def groups(self) -> dict[int, list[int]]:
        """Group id -> its sequences (ascending: the order of their first nodes, a topological one)."""
        out: dict[int, list[int]] = {}
        for s, g in enumerate(self.group_of):
            if g >= 0:
                out.setdefault(g, []).append(s)
        return out

    def seq_preds(self, s: int) -> set[int]:
        return {self.seq_of[p] for v in self.seqs[s] for p in self.graph.preds[v]} - {s}

    def seq_succs(self, s: int) -> set[int]:
        return {self.seq_of[w] for v in self.seqs[s] for w in self.graph.succs[v]} - {s}

    def ungroup(self, gid: int) -> bool:
        hit = [s for s, g in enumerate(self.group_of) if g == gid]
        for s in hit:
            self.group_of[s] = -1
        return bool(hit)


def local_incdec(model: StepModel, v: int) -> tuple[int, int]:
    """The memory ``v`` adds while it runs and frees after it, counting as freed only the inputs that
    ``v`` alone reads (what is known of a node before it is scheduled)."""
    alone = 1 << v
    killed = [p for p in model.frees[v] if model.users[p] == alone]
    ovl = model.overlap[v]
    inc = 0 if ovl in killed else model.nbytes[v]
    return inc, sum(model.nbytes[p] for p in killed if p != ovl)


def join_sequences(graph: Graph, model: StepModel, join: bool) -> list[list[int]]:
    """The sequences, in the order of their first nodes (the graph's node order is topological)."""
    assigned = [False] * len(graph)
    seqs = []
    for v in range(len(graph)):
        if assigned[v]:
            continue
        seq, assigned[v] = [v], True
        inc, dec = local_incdec(model, v)
        top, latest = inc, inc - dec
        while join:
            last = seq[-1]
            if len(graph.succs[last]) != 1:
                break
            nxt = graph.succs[last][0]
            if len(graph.preds[nxt]) != 1 or assigned[nxt]:
                break
            inc, dec = local_incdec(model, nxt)
            up = latest + inc
            if up > top or up - dec > latest:  # joining would raise the sequence's memory
                break
            top, latest = max(top, up), up - dec
            seq.append(nxt)
            assigned[nxt] = True
        seqs.append(seq)
    return seqs


def post_dominators(graph: Graph) -> list[int]:
    """Each node's immediate post-dominator (-1: the virtual exit after the graph's outputs)."""
    import networkx as nx

    exit_ = len(graph)
    rev = nx.DiGraph()
    rev.add_nodes_from(range(exit_ + 1))
    for v in range(len(graph)):
        for w in graph.succs[v]:
            rev.add_edge(w, v)
        if not graph.succs[v]:
            rev.add_edge(exit_, v)
    idom = nx.immediate_dominators(rev, exit_)
    return [(-1 if idom.get(v, exit_) == exit_ else idom[v]) for v in range(len(graph))]


def build(graph: Graph, model: StepModel, join: bool = True, make_groups: bool = True,
          cell_ops: tuple[str, ...] = ("cat", "stack")) -> Hierarchy:
    """The hierarchy of ``graph`` (sequences joined when ``join``, groups made when ``make_groups``)."""
    seqs = join_sequences(graph, model, join)
    seq_of = [0] * len(graph)
    for s, nodes in enumerate(seqs):
        for v in nodes:
            seq_of[v] = s
    hier = Hierarchy(graph, seqs, seq_of, [-1] * len(seqs))
    if make_groups:
        _make_groups(hier, set(cell_ops))
    return hier


def _make_groups(hier: Hierarchy, cell_ops: set[str]) -> None:
    graph = hier.graph
    ipdom = post_dominators(graph)

    def post_dominates(c: int, v: int) -> bool:
        while v != -1:
            if v == c:
                return True
            v = ipdom[v]
        return False

    gid = 0
    for s, nodes in enumerate(hier.seqs):
        if hier.group_of[s] >= 0 or graph.ops[nodes[0]] not in cell_ops:
            continue
        cell, stack = {s}, [s]
        while stack:
            for p in hier.seq_preds(stack.pop()):
                if p not in cell and hier.group_of[p] < 0 and graph.ops[hier.seqs[p][0]] != "input" \
                        and post_dominates(nodes[0], hier.seqs[p][-1]):  # HMCOS's inputs are no ops
                    cell.add(p)
                    stack.append(p)
        for m in cell:
            hier.group_of[m] = gid
        if not _top_level_acyclic(hier):  # a group the rest of the graph enters and leaves: not kept
            hier.ungroup(gid)
        gid += 1


def top_level(hier: Hierarchy) -> tuple[list[tuple[str, int]], list[int]]:
    """The top-level vertices (``("seq", s)`` or ``("group", g)``) in the order of their first sequences,
    and each one's predecessors as a bitmask over that list."""
    verts, index, vert_of = [], {}, []
    for s, g in enumerate(hier.group_of):
        key = ("group", g) if g >= 0 else ("seq", s)
        if key not in index:
            index[key] = len(verts)
            verts.append(key)
        vert_of.append(index[key])
    preds = [0] * len(verts)
    for s in range(len(hier.seqs)):
        for p in hier.seq_preds(s):
            if vert_of[p] != vert_of[s]:
                preds[vert_of[s]] |= 1 << vert_of[p]
    return verts, preds


def _top_level_acyclic(hier: Hierarchy) -> bool:
    verts, preds = top_level(hier)
    succs: list[list[int]] = [[] for _ in verts]
    indeg = [0] * len(verts)
    for v, mask in enumerate(preds):
        while mask:
            bit = mask & -mask
            mask ^= bit
            succs[bit.bit_length() - 1].append(v)
            indeg[v] += 1
    ready = [v for v in range(len(verts)) if not indeg[v]]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in succs[v]:
            indeg[w] -= 1
            if not indeg[w]:
                ready.append(w)
    return seen == len(verts)
