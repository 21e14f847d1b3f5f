"""The baseline orders SERENITY is compared with: the program order (the order the network's
``forward`` runs its operations, as a TFLite model keeps its operators; [Ahn-PhD] §3.5), Kahn's
topological order [Kahn-CACM62], a depth-first order, PyTorch Inductor's memory-aware orders
(``torch._inductor.memory``: least peak memory first, BFS, DFS), and brute force over every
topological order (small graphs).

Inductor's three functions take its scheduler's nodes; they read only the memory-planning fields of
those nodes and buffers (``mpi_node``, ``mpi_buffer``: PyTorch's own ``MemoryPlanningInfoForNode`` /
``...ForBuffer``) and a few accessors, so our graph is handed to PyTorch's own code through small
adapter objects (:func:`inductor_order`) that carry exactly those fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tunebench.datasets.graphs import Graph, all_topological_orders, peak_memory


def program_order(graph: Graph) -> list[int]:
    return graph.program_order()


def kahn_order(graph: Graph) -> list[int]:
    """Kahn's algorithm with a FIFO queue of ready nodes (ties in program order)."""
    indeg = [len(p) for p in graph.preds]
    ready = [v for v in range(len(graph)) if indeg[v] == 0]
    out, head = [], 0
    while head < len(ready):
        v = ready[head]
        head += 1
        out.append(v)
        for s in graph.succs[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return out


def dfs_order(graph: Graph) -> list[int]:
    """Depth first: the most recently readied node runs next (a LIFO Kahn; ties in program order)."""
    indeg = [len(p) for p in graph.preds]
    stack = [v for v in reversed(range(len(graph))) if indeg[v] == 0]
    out = []
    while stack:
        v = stack.pop()
        out.append(v)
        for s in reversed(graph.succs[v]):
            indeg[s] -= 1
            if indeg[s] == 0:
                stack.append(s)
    return out


def rpo_order(graph: Graph) -> list[int]:
    """Reverse post-order: a depth-first search along the edges from each source (program order), the
    nodes in the reverse of the order their searches finish (HMCOS's baseline, [Wang-DAC22])."""
    seen = [False] * len(graph)
    post: list[int] = []
    for root in range(len(graph)):
        if seen[root] or graph.preds[root]:
            continue
        seen[root] = True
        stack = [(root, iter(graph.succs[root]))]
        while stack:
            v, it = stack[-1]
            nxt = next((w for w in it if not seen[w]), None)
            if nxt is None:
                post.append(v)
                stack.pop()
            else:
                seen[nxt] = True
                stack.append((nxt, iter(graph.succs[nxt])))
    return post[::-1]


def brute_force(graph: Graph) -> tuple[list[int], int]:
    """The least-peak topological order by enumerating all of them (first found on ties)."""
    best, best_peak = None, None
    for order in all_topological_orders(graph):
        peak = peak_memory(graph, order)[0]
        if best_peak is None or peak < best_peak:
            best, best_peak = order, peak
    return best or [], best_peak or 0


# ---- PyTorch Inductor ----------------------------------------------------------------------
@dataclass(eq=False)
class _Dep:
    name: str


@dataclass(eq=False)
class _Buffer:
    """What ``torch._inductor.memory`` reads of a ``SchedulerBuffer``."""

    name: str
    mpi_buffer: object = None

    def get_name(self) -> str:
        return self.name


@dataclass(eq=False)
class _Node:
    """What ``torch._inductor.memory`` reads of a ``BaseSchedulerNode``."""

    index: int
    outputs: list = field(default_factory=list)
    mpi_node: object = None
    unmet_dependencies: list = field(default_factory=list)

    def get_outputs(self) -> list:
        return self.outputs

    def get_buffer_names(self) -> list[str]:
        return [b.name for b in self.outputs]

    def get_name(self) -> str:
        return f"op{self.index}"


def _inductor_nodes(graph: Graph) -> tuple[list[_Node], dict[str, _Buffer], set[str]]:
    from torch._inductor.memory import MemoryPlanningInfoForBuffer, MemoryPlanningInfoForNode
    from torch.utils._ordered_set import OrderedSet

    nodes = [_Node(v) for v in range(len(graph))]
    bufs: dict[int, _Buffer] = {}
    for v in range(len(graph)):
        if graph.owner[v] == v:
            users = OrderedSet(nodes[u] for u in sorted(graph.users[v]))
            bufs[v] = _Buffer(f"buf{v}", MemoryPlanningInfoForBuffer(graph.nbytes[v], graph.nbytes[v], users,
                                                                     OrderedSet(users)))
            nodes[v].outputs = [bufs[v]]
    for v, node in enumerate(nodes):
        pred_bufs = OrderedSet(bufs[graph.owner[p]] for p in graph.preds[v])
        if graph.owner[v] != v:  # an alias keeps its owner's storage: it reads it
            pred_bufs.add(bufs[graph.owner[v]])
        node.mpi_node = MemoryPlanningInfoForNode(index=v, size=graph.nbytes[v], pred_buffers=pred_bufs,
                                                  pred_nodes=OrderedSet(nodes[p] for p in graph.preds[v]),
                                                  succ_nodes=OrderedSet(nodes[s] for s in graph.succs[v]))
        node.unmet_dependencies = [_Dep(f"buf{graph.owner[p]}") for p in graph.preds[v]]
    outputs = {f"buf{graph.owner[v]}" for v in range(len(graph)) if not graph.users[graph.owner[v]]}
    return nodes, {b.name: b for b in bufs.values()}, outputs


def inductor_order(graph: Graph, kind: str) -> list[int]:
    """PyTorch Inductor's ``topological_sort_lpmf`` / ``_bfs`` / ``_dfs`` on ``graph``."""
    from torch._inductor import memory
    from torch.utils._ordered_set import OrderedSet

    nodes, name_to_buf, outputs = _inductor_nodes(graph)
    if kind == "lpmf":
        out = memory.topological_sort_lpmf(nodes, {}, name_to_buf, OrderedSet(sorted(outputs)))
    elif kind == "bfs":
        out = memory.topological_sort_bfs(nodes)
    elif kind == "dfs":
        # Inductor's DFS visits a node's unmet dependencies by buffer name: aliases own no buffer, so
        # their readers depend on the owner; the alias itself is placed right after its inputs
        out = memory.topological_sort_dfs(nodes)
        out = _aliases_in_place(graph, [n.index for n in out])
        return out
    else:
        raise ValueError(f"inductor order {kind!r}: valid: lpmf, bfs, dfs")
    return [n.index for n in out]


def _aliases_in_place(graph: Graph, order: list[int]) -> list[int]:
    """``order`` made topological: a node moves after its predecessors where it is not (aliases)."""
    placed: set[int] = set()
    out: list[int] = []
    pending = list(order)
    while pending:
        rest = []
        for v in pending:
            if all(p in placed for p in graph.preds[v]):
                out.append(v)
                placed.add(v)
            else:
                rest.append(v)
        if len(rest) == len(pending):
            raise RuntimeError("inductor dfs: no topological completion")
        pending = rest
    return out


BASELINES = {"program": program_order, "kahn": kahn_order, "dfs": dfs_order, "rpo": rpo_order,
             "inductor_lpmf": lambda g: inductor_order(g, "lpmf"),
             "inductor_bfs": lambda g: inductor_order(g, "bfs"),
             "inductor_dfs": lambda g: inductor_order(g, "dfs")}

__all__ = ["BASELINES", "brute_force", "dfs_order", "inductor_order", "kahn_order", "program_order", "rpo_order"]
