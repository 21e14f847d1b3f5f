"""Run a graph in a given order in PyTorch on the CPU, freeing every activation after its last use,
and measure the peak of live activation bytes from the tensors the run really holds.

After each node runs, the live bytes are the sizes of the distinct storages of every tensor the run
still holds (``untyped_storage().nbytes()``; a view or an in-place result shares its input's storage
and adds nothing); the peak is the largest such sum. When a node's storage is no longer needed, the
run drops its tensors, and a weak reference checks that PyTorch really released them (nothing else
keeps them alive). Parameters are not activations and are not counted.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tunebench.datasets.graphs import Graph, fx_node, output_nodes, run_node


@dataclass
class Execution:
    """What running a schedule measured."""

    peak_bytes: int
    trace: list[int]  # live bytes after each node ran (before the frees it allows)
    outputs: list  # the graph's outputs, in the output's order
    unreleased: int  # tensors dropped by the run but still alive afterwards (0 when all were freed)
    seconds: float


def _storages(value) -> dict[int, int]:
    if isinstance(value, torch.Tensor):
        s = value.untyped_storage()
        return {s.data_ptr(): s.nbytes()}
    if isinstance(value, (tuple, list)):
        out: dict[int, int] = {}
        for v in value:
            out.update(_storages(v))
        return out
    return {}


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def execute(graph: Graph, order: Sequence[int]) -> Execution:
    """Run ``graph`` in ``order`` (a topological order of its node indices)."""
    frees = graph.frees()
    remaining = [len(u) for u in graph.users]
    aliases: dict[int, list[int]] = {}
    for v, o in enumerate(graph.owner):
        aliases.setdefault(o, []).append(v)
    env: dict = {}
    held: dict[int, object] = {}  # node index -> value
    dropped: list[weakref.ref] = []
    peak, trace = 0, []
    t0 = time.perf_counter()
    with torch.no_grad():
        for u in order:
            value = run_node(graph, u, env)
            env[fx_node(graph, u)] = value
            held[u] = value
            live: dict[int, int] = {}
            for val in held.values():
                live.update(_storages(val))
            trace.append(sum(live.values()))
            peak = max(peak, trace[-1])
            for p in frees[u]:
                remaining[p] -= 1
                if remaining[p] == 0:
                    for a in aliases[p]:
                        if a in held:
                            value_a = held.pop(a)
                            if fx_node(graph, a).op != "placeholder":  # the caller's input stays the caller's
                                dropped += [weakref.ref(t) for t in _tensors(value_a)]
                            del env[fx_node(graph, a)]
                            del value_a
            del value
    outputs = [held[v] for v in output_nodes(graph)]
    held.clear()
    env.clear()
    seconds = time.perf_counter() - t0
    return Execution(peak, trace, outputs, sum(r() is not None for r in dropped), seconds)


def reference_outputs(graph: Graph) -> list:
    """The graph's outputs from its own module (the unscheduled program)."""
    with torch.no_grad():
        out = graph.gm(*graph.example)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def outputs_match(got: list, want: list, rtol: float, atol: float) -> tuple[bool, float]:
    """All outputs allclose, and the largest absolute difference."""
    diff = 0.0
    ok = len(got) == len(want)
    for a, b in zip(got, want):
        a, b = a.float(), b.float()
        ok = ok and a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol)
        if a.shape == b.shape:
            diff = max(diff, float((a - b).abs().max()))
    return ok, diff
