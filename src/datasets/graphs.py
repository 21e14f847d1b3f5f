"""Computation graphs whose execution order is scheduled (``target=memory``; [Ahn-PhD] Ch. 3).

A :class:`Graph` is a PyTorch module traced with ``torch.fx`` and annotated by running it once
(shape propagation at the configured batch size and dtype): one node per fx operation (the input
placeholder included; parameters and the output marker left out), each with the bytes of the
tensor(s) it allocates. A node whose output shares the storage of one of its inputs (a view such as
``flatten``, an in-place op such as ``add_``) allocates nothing: it is an *alias* of the node that
owns the storage, and that storage stays live until every user of the owner and of its aliases ran.

Liveness model (the "sum of live tensors" of [Ahn-PhD] §3.4.1, Algorithm 2): running node ``u``
allocates ``bytes[u]``; the peak is taken with that allocation; then every node ``p`` whose
``users[p]`` have all run is freed. Graph outputs (nodes without users) are never freed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from tunebench.errors import UserError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class Graph:
    """A traced network as a DAG of fx nodes with their output bytes.

    Attributes:
        name: the graph's name (model and variant).
        gm: the traced ``fx.GraphModule`` (runs the graph; rewriting edits it).
        names: node names in program order (the order the network's ``forward`` wrote them).
        preds: per node, the indices of the nodes it reads (program-order indices).
        nbytes: per node, bytes its output allocates (0 for an alias).
        owner: per node, the node whose storage its output is (itself unless an alias).
        shapes: per node, its output shape (a tuple of shapes for a tuple output).
        ops: per node, a short op description (``conv2d``, ``add``, ``cat``, ...).
        example: the example inputs, one per placeholder (batch and dtype of the graph).
    """

    name: str
    gm: fx.GraphModule
    names: list[str]
    preds: list[tuple[int, ...]]
    nbytes: list[int]
    owner: list[int]
    shapes: list
    ops: list[str]
    example: tuple[torch.Tensor, ...]
    succs: list[tuple[int, ...]] = field(init=False)
    users: list[frozenset[int]] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        succ: list[list[int]] = [[] for _ in range(n)]
        for v, ps in enumerate(self.preds):
            for p in ps:
                succ[p].append(v)
        self.succs = [tuple(s) for s in succ]
        users: list[set[int]] = [set() for _ in range(n)]
        for v in range(n):  # the storage of owner[v] is needed until v's users ran (and v itself)
            o = self.owner[v]
            users[o].update(self.succs[v])
            if o != v:
                users[o].add(v)
        self.users = [frozenset(u) for u in users]
        self.index = {name: i for i, name in enumerate(self.names)}
        frees: list[list[int]] = [[] for _ in range(n)]
        for p, us in enumerate(self.users):
            for u in us:
                frees[u].append(p)
        self._frees = [tuple(f) for f in frees]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def n_edges(self) -> int:
        return sum(len(p) for p in self.preds)

    @property
    def largest_tensor(self) -> int:
        return max(self.nbytes, default=0)

    def frees(self) -> list[tuple[int, ...]]:
        """Per node ``u``: the nodes whose storage may be freed once ``u`` ran (those ``u`` is a user of)."""
        return self._frees

    def program_order(self) -> list[int]:
        return list(range(len(self)))


def is_topological(graph: Graph, order: Sequence[int]) -> bool:
    """``order`` runs every node once, each after the nodes it reads."""
    if sorted(order) != list(range(len(graph))):
        return False
    pos = {v: i for i, v in enumerate(order)}
    return all(pos[p] < pos[v] for v in range(len(graph)) for p in graph.preds[v])


def peak_memory(graph: Graph, order: Sequence[int]) -> tuple[int, list[int]]:
    """The peak of live bytes along ``order`` and the live bytes after each node's allocation."""
    remaining = [len(u) for u in graph.users]
    frees = graph.frees()
    live, peak, trace = 0, 0, []
    for u in order:
        live += graph.nbytes[u]
        peak = max(peak, live)
        trace.append(live)
        for p in frees[u]:
            remaining[p] -= 1
            if remaining[p] == 0:
                live -= graph.nbytes[p]
    return peak, trace


# ---- tracing --------------------------------------------------------------------------------
class _Tracer(fx.Tracer):
    """fx's tracer with extra leaf module classes (a cell's operations stay one node each)."""

    def __init__(self, leaves: tuple[type, ...] = ()):
        super().__init__()
        self.leaves = leaves

    def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
        return isinstance(m, self.leaves) or super().is_leaf_module(m, qualname)


def _no_inplace(module: torch.nn.Module) -> None:
    """In-place activations would let a reordered schedule overwrite a tensor another node still reads."""
    for m in module.modules():
        if getattr(m, "inplace", False):
            m.inplace = False


def _op_name(node: fx.Node, gm: fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "placeholder":
        return "input"
    return getattr(node.target, "__name__", str(node.target))


def _storages(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value.untyped_storage()]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _storages(v)]
    return []


def _shape(value):
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (tuple, list)):
        return tuple(_shape(v) for v in value)
    return None


def trace_graph(module: torch.nn.Module, example, name: str, leaves: tuple[type, ...] = ()) -> Graph:
    """Trace ``module`` and annotate every node by running it once on ``example`` (a tensor, or a tuple
    of tensors: one per input)."""
    _no_inplace(module)
    module.eval()
    tracer = _Tracer(leaves)
    graph = tracer.trace(module)
    gm = fx.GraphModule(tracer.root, graph, name)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return annotate(gm, example, name)


def annotate(gm: fx.GraphModule, example, name: str) -> Graph:
    """The :class:`Graph` of ``gm``: run it node by node on ``example``, recording each node's output
    bytes (the storages it newly allocated) and which node owns a storage it shares."""
    example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
    nodes = [n for n in gm.graph.nodes if n.op not in ("output", "get_attr")]
    inputs = iter(example)
    index = {n: i for i, n in enumerate(nodes)}
    env: dict[fx.Node, object] = {}
    storage_owner: dict[int, int] = {}
    nbytes, owner, shapes, preds = [], [], [], []
    attrs = {n: _fetch_attr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    with torch.no_grad():
        for i, node in enumerate(nodes):
            value = next(inputs) if node.op == "placeholder" else _run_node(gm, node, {**env, **attrs})
            env[node] = value
            stores = _storages(value)
            if not stores:
                raise UserError(f"model graph {name}: node {node.name} ({_op_name(node, gm)}) has no tensor output, "
                                "so no shape information; a graph node must produce tensors")
            new = [s for s in stores if s.data_ptr() not in storage_owner]
            shared = [storage_owner[s.data_ptr()] for s in stores if s.data_ptr() in storage_owner]
            if new and shared:
                raise UserError(f"model graph {name}: node {node.name} returns both new and shared tensors")
            for s in new:
                storage_owner[s.data_ptr()] = i
            nbytes.append(sum(s.nbytes() for s in {s.data_ptr(): s for s in new}.values()))
            owner.append(i if new else owner[shared[0]])
            shapes.append(_shape(value))
            preds.append(tuple(sorted({index[a] for a in node.all_input_nodes if a in index})))
    return Graph(name, gm, [n.name for n in nodes], preds, nbytes, owner, shapes,
                 [_op_name(n, gm) for n in nodes], example)


def _fetch_attr(gm: fx.GraphModule, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _run_node(gm: fx.GraphModule, node: fx.Node, env: dict):
    """Run one fx node with its inputs taken from ``env``."""
    args = fx.node.map_arg(node.args, lambda a: env[a])
    kwargs = fx.node.map_arg(node.kwargs, lambda a: env[a])
    if node.op == "call_module":
        return gm.get_submodule(node.target)(*args, **kwargs)
    if node.op == "call_function":
        return node.target(*args, **kwargs)
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    raise ValueError(f"cannot run fx node {node.name} ({node.op})")


def run_node(graph: Graph, v: int, env: dict):
    """Run node ``v`` of ``graph`` with ``env`` (fx node -> value, parameters looked up here)."""
    node = _fx_nodes(graph)[v]
    if node.op == "placeholder":
        placeholders = [n for n in graph.gm.graph.nodes if n.op == "placeholder"]
        return graph.example[placeholders.index(node)]
    extra = {a: _fetch_attr(graph.gm, a.target) for a in node.all_input_nodes if a.op == "get_attr"}
    return _run_node(graph.gm, node, {**env, **extra})


def _fx_nodes(graph: Graph) -> list[fx.Node]:
    cached = getattr(graph, "_nodes", None)
    if cached is None:
        by_name = {n.name: n for n in graph.gm.graph.nodes}
        cached = [by_name[name] for name in graph.names]
        graph._nodes = cached
    return cached


def fx_node(graph: Graph, v: int) -> fx.Node:
    return _fx_nodes(graph)[v]


def output_nodes(graph: Graph) -> list[int]:
    """Indices of the nodes the graph returns (in the output's order)."""
    out = next(n for n in graph.gm.graph.nodes if n.op == "output")
    flat = [a for a in out.all_input_nodes]
    return [graph.index[a.name] for a in flat]


# ---- bad input ------------------------------------------------------------------------------
def check_acyclic(preds: Sequence[Sequence[int]]) -> list[int] | None:
    """A cycle of the graph given by ``preds`` (node indices), or None when it is a DAG."""
    color = [0] * len(preds)
    stack_path: list[int] = []

    def visit(v: int) -> list[int] | None:
        color[v] = 1
        stack_path.append(v)
        for p in preds[v]:
            if color[p] == 1:
                return stack_path[stack_path.index(p):] + [p]
            if color[p] == 0 and (cyc := visit(p)):
                return cyc
        color[v] = 2
        stack_path.pop()
        return None

    for v in range(len(preds)):
        if color[v] == 0 and (cyc := visit(v)):
            return cyc
    return None


def random_dag(n: int, p: float, seed: int, max_bytes: int = 64) -> tuple[list[tuple[int, ...]], list[int]]:
    """A random DAG of ``n`` nodes in topological index order (edge ``i -> j``, ``i < j``, with
    probability ``p``; node 0 is the single source, every other node reads at least one earlier one)
    and random output sizes in 1..``max_bytes``: test and conformance graphs."""
    import numpy as np

    rng = np.random.default_rng(seed)
    preds: list[tuple[int, ...]] = [()]
    for j in range(1, n):
        ps = {i for i in range(j) if rng.random() < p} or {int(rng.integers(j))}
        preds.append(tuple(sorted(ps)))
    return preds, [int(b) for b in rng.integers(1, max_bytes + 1, size=n)]


def abstract_graph(preds: Sequence[Sequence[int]], nbytes: Sequence[int], name: str = "dag") -> Graph:
    """A :class:`Graph` without a module (scheduling only: it cannot be executed)."""
    n = len(preds)
    return Graph(name, fx.GraphModule(torch.nn.Module(), fx.Graph()), [f"n{i}" for i in range(n)],
                 [tuple(p) for p in preds], list(nbytes), list(range(n)), [None] * n, ["op"] * n,
                 ())


def all_topological_orders(graph: Graph):
    """Every topological order of ``graph`` (generator; for brute force on small graphs)."""
    n = len(graph)
    indeg = [len(p) for p in graph.preds]
    order: list[int] = []
    placed: set[int] = set()

    def rec():
        if len(order) == n:
            yield list(order)
            return
        for v in range(n):
            if indeg[v] == 0 and v not in placed:
                placed.add(v)
                order.append(v)
                for s in graph.succs[v]:
                    indeg[s] -= 1
                yield from rec()
                for s in graph.succs[v]:
                    indeg[s] += 1
                order.pop()
                placed.discard(v)

    yield from rec()


__all__ = ["DTYPES", "Graph", "abstract_graph", "all_topological_orders", "annotate", "check_acyclic",
           "is_topological", "peak_memory", "random_dag", "run_node", "trace_graph"]
