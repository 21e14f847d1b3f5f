"""SERENITY's DP inside HMCOS's groups (``method=serenity method.front_end=hmcos_groups``, our addition):
HMCOS's order ([Wang-DAC22]) is cut into *windows*, consecutive spans of it that each hold whole HMCOS
groups (the cells), and each window is reordered by SERENITY's exact DP ([Ahn-PhD] Algorithm 2) from
the nodes run before it; the windows keep HMCOS's sequence.

Why this is exact among the orders that run the windows in that sequence: the live bytes after a set of
nodes do not depend on the order that ran them, so the state at a window's start is fixed by the
windows before it, and a window's best order does not change the others'. The least peak of such an
order is the largest of the windows' least peaks. Branch and bound: the windows are taken by their
peak in HMCOS's order, highest first, with ``M`` the largest least peak found so far; a window whose
peak in HMCOS's order is at most ``M`` keeps its order (its least peak cannot raise ``M``); for another
one whose HMCOS peak is not above a lower bound (:func:`window_bound`) keeps it too (it is a least-peak
order); for another one, the DP under the hard budget of its HMCOS peak less one byte either finds its
least-peak order or proves that HMCOS's is one. It is not exact over all orders: an order that interleaves two windows is
not searched.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.datasets.graphs import Graph, peak_memory
from tunebench.methods.graph_memory import dp


@dataclass
class WindowStats:
    """Windows cut, their largest size in nodes, windows the DP ran on, windows it improved."""

    windows: int = 0
    largest: int = 0
    solved: int = 0
    improved: int = 0
    timed_out: bool = False


def group_windows(order: list[int], node_group: list[int], per_window: int = 1) -> list[list[int]]:
    """``order`` cut into consecutive windows: a window starts where a group starts and no group is open
    (started and not finished); nodes outside groups stay in the window before them. ``per_window``
    consecutive such windows are joined into one (a larger DP: more orders searched); see
    :func:`split_large` for a cap on their size."""
    size: dict[int, int] = {}
    for g in node_group:
        if g >= 0:
            size[g] = size.get(g, 0) + 1
    left, open_, cuts = dict(size), 0, []
    for i, v in enumerate(order):
        g = node_group[v]
        if g < 0:
            continue
        if left[g] == size[g]:
            if open_ == 0 and i > 0:
                cuts.append(i)
            open_ += 1
        left[g] -= 1
        if left[g] == 0:
            open_ -= 1
    cuts = [0] + cuts[per_window - 1::per_window] + [len(order)]
    return [order[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def live_after(graph: Graph, order: list[int]) -> list[int]:
    """The live bytes after each node of ``order`` ran and its inputs read for the last time were freed."""
    remaining = [len(u) for u in graph.users]
    frees = graph.frees()
    live, out = 0, []
    for u in order:
        live += graph.nbytes[u]
        for p in frees[u]:
            remaining[p] -= 1
            if remaining[p] == 0:
                live -= graph.nbytes[p]
        out.append(live)
    return out


def split_large(graph: Graph, windows: list[list[int]], max_nodes: int | None) -> list[list[int]]:
    """Each window of more than ``max_nodes`` nodes split in two, recursively, after the node of its middle
    half with the fewest live bytes after it (what the two parts have in common is then least)."""
    if max_nodes is None:
        return windows
    live = live_after(graph, [v for w in windows for v in w])
    out, pos = [], 0
    for w in windows:
        out += _split(w, live[pos:pos + len(w)], max_nodes)
        pos += len(w)
    return out


def _split(w: list[int], live: list[int], max_nodes: int) -> list[list[int]]:
    if len(w) <= max_nodes:
        return [w]
    lo, hi = len(w) // 4, max(len(w) // 4 + 1, 3 * len(w) // 4)
    cut = 1 + min(range(lo, hi), key=lambda i: (live[i], abs(2 * i - len(w))))
    return _split(w[:cut], live[:cut], max_nodes) + _split(w[cut:], live[cut:], max_nodes)


def window_bound(graph: Graph, masks: dp.Masks, start: int, segment: int) -> int:
    """A lower bound of the peak of every order of ``segment`` after ``start``: the largest, over its nodes,
    of a node's output, its inputs and what ran before the window and is read after it (all live while the
    node runs)."""
    done = start | segment
    kept = {v for v in range(masks.n) if start >> v & 1 and (masks.users[v] & ~done or not masks.users[v])}
    best = 0
    for v in range(masks.n):
        if segment >> v & 1:
            held = kept | {graph.owner[p] for p in graph.preds[v]}
            best = max(best, graph.nbytes[v] + sum(graph.nbytes[o] for o in held))
    return best


def window_schedule(graph: Graph, windows: list[list[int]], deadline: float | None = None,
                    stats: WindowStats | None = None, dp_stats: dp.DPStats | None = None) -> tuple[list[int], int]:
    """The windows (consecutive spans of a topological order) each reordered for its least peak, by
    branch and bound (see the module's text); the order and its peak. A window whose DP passes
    ``deadline`` (``time.perf_counter()`` value) keeps its order, and ``stats.timed_out`` is set (the
    answer is then not proven the best of its kind)."""
    stats = stats if stats is not None else WindowStats()
    dp_stats = dp_stats if dp_stats is not None else dp.DPStats()
    order = [v for w in windows for v in w]
    trace = peak_memory(graph, order)[1]
    stats.windows, stats.largest = len(windows), max((len(w) for w in windows), default=0)
    starts, peaks, done, pos = [], [], 0, 0
    for w in windows:
        starts.append(done)
        peaks.append(max(trace[pos:pos + len(w)]))
        done |= sum(1 << v for v in w)
        pos += len(w)
    masks, best, out = dp.Masks(graph), 0, list(windows)
    for i in sorted(range(len(windows)), key=lambda j: -peaks[j]):
        if peaks[i] <= best:
            break  # every window left keeps its order: none of them can raise the peak
        seg = sum(1 << v for v in windows[i])
        if window_bound(graph, masks, starts[i], seg) >= peaks[i]:  # HMCOS's order of it is a least-peak one
            best = max(best, peaks[i])
            continue
        stats.solved += 1
        try:
            got = dp.dp_segment(masks, starts[i], seg, 0, peaks[i] - 1, deadline, dp_stats)
        except dp.Timeout:
            stats.timed_out = True
            best = max(best, peaks[i])
            break
        if got is None:  # HMCOS's order of the window is one of its least-peak orders
            best = max(best, peaks[i])
        else:
            stats.improved += 1
            out[i] = got[0]
            best = max(best, got[1])
    order = [v for w in out for v in w]
    return order, peak_memory(graph, order)[0]
