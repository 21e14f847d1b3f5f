"""The two memory accountings of a schedule that ``target=memory`` knows (``target.accounting``).

- ``live`` (ours, :func:`tunebench.datasets.graphs.peak_memory`): running node ``u`` allocates its
  output; the peak is taken with that allocation and every input still live; then every tensor whose
  last reader was ``u`` is freed. A view or an in-place result allocates nothing and keeps its owner's
  storage live (the traced graph's aliases). This is what the PyTorch run of the order measures.
- ``hmcos`` ([Wang-DAC22] §2-3, its memory states): the same, except that an element-wise operation
  whose first activation input of the output's size is read for the last time by it writes its output
  over that input (in place): it allocates nothing and that input is not freed after it. A graph's
  aliases stay as in ``live`` (HMCOS's reshapes also share their input's storage when it dies there and
  copy it otherwise; our traced graphs share it always).

Both account the live bytes after a set of scheduled nodes the same way (the sum of the storages still
needed), so the two differ only in the peak *during* an element-wise operation; on a graph without one
they are equal. :class:`StepModel` is one step of either, for schedulers that explore partial orders.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunebench.datasets.graphs import Graph

ACCOUNTINGS = ("live", "hmcos")

#: element-wise operations, by the names our traced graphs give them (fx ``call_module`` class names,
#: ``call_function`` / ``call_method`` names): those of HMCOS's element-wise ONNX operators that occur here
ELEMENTWISE = frozenset({
    "ReLU", "relu", "relu_", "ReLU6", "Hardtanh", "hardtanh", "Sigmoid", "sigmoid", "Tanh", "tanh",
    "LeakyReLU", "leaky_relu", "ELU", "elu", "SELU", "selu", "Hardswish", "hardswish", "Hardsigmoid",
    "hardsigmoid", "Softplus", "softplus", "Softsign", "add", "iadd", "sub", "mul", "truediv", "div", "neg",
    "abs", "exp", "log", "sqrt", "pow", "clamp", "clip", "reciprocal", "erf", "sin", "cos"})


class StepModel:
    """One scheduling step under an accounting: from the set of nodes already run (a bitmask) and the
    live bytes after them, the peak while node ``u`` runs and the live bytes after it."""

    def __init__(self, graph: Graph, accounting: str = "live"):
        if accounting not in ACCOUNTINGS:
            raise ValueError(f"accounting {accounting!r}: valid: {', '.join(ACCOUNTINGS)}")
        self.graph, self.accounting = graph, accounting
        self.nbytes = list(graph.nbytes)
        self.users = [sum(1 << w for w in us) for us in graph.users]
        self.frees = graph.frees()
        self.overlap = [overlap_input(graph, u) if accounting == "hmcos" else -1 for u in range(len(graph))]

    def step(self, done: int, live: int, u: int) -> tuple[int, int]:
        """``(peak while u runs, live bytes after u)`` with the nodes of ``done`` already run."""
        after = done | 1 << u
        inc = self.nbytes[u]
        dec = 0
        ovl = self.overlap[u]
        for p in self.frees[u]:
            if not self.users[p] & ~after:
                if p == ovl:
                    inc = 0  # the output is written over the input it kills
                else:
                    dec += self.nbytes[p]
        up = live + inc
        return up, up - dec

    def live_after(self, done: int) -> int:
        """Live bytes once the nodes of ``done`` ran (any order)."""
        return sum(self.nbytes[v] for v in range(len(self.nbytes))
                   if done >> v & 1 and (self.users[v] & ~done or not self.users[v]))

    def trace(self, order: Sequence[int]) -> tuple[int, list[int]]:
        """The peak along ``order`` and the peak while each node ran."""
        done, live, peak, ups = 0, 0, 0, []
        for u in order:
            up, live = self.step(done, live, u)
            done |= 1 << u
            ups.append(up)
            peak = max(peak, up)
        return peak, ups


def overlap_input(graph: Graph, u: int) -> int:
    """The storage owner that ``u`` may overwrite in place under HMCOS's accounting, else -1: ``u`` is
    element-wise and allocates, and its input of the lowest node index whose storage has the output's
    size is that storage (HMCOS takes the first such input in the operator's input order)."""
    if graph.ops[u] not in ELEMENTWISE or not graph.nbytes[u] or graph.owner[u] != u:
        return -1
    for p in graph.preds[u]:
        o = graph.owner[p]
        if graph.nbytes[o] == graph.nbytes[u]:
            return o
    return -1


def peak_of(graph: Graph, order: Sequence[int], accounting: str = "live") -> int:
    """The peak of ``order`` under ``accounting``."""
    return StepModel(graph, accounting).trace(order)[0]
