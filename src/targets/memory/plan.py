"""Memory of a schedule beyond the sum of live tensors ([Ahn-PhD] §3.5):

- :func:`arena_peak`: the size of a linear arena laid out as TensorFlow Lite's simple memory arena
  (``simple_memory_arena.cc``, the allocator the thesis used for SERENITY and the TFLite baseline):
  tensors are allocated in execution order, each node's outputs before the tensors it last reads are
  deallocated; an allocation takes the smallest gap between the live allocations (ordered by
  offset) that holds it, else the end of the last one; offsets are aligned (64 bytes in TFLite). The
  arena's size is the highest end offset.
- :func:`offchip_traffic`: bytes moved between an on-chip memory of a given size and off-chip memory
  when the schedule runs, with Belady's optimal (clairvoyant) replacement [Belady-IBM66]: a node's
  inputs and output must be on chip while it runs; when they do not fit with what is there, the
  on-chip tensor used farthest in the future is written out (only if it is still needed; it is read
  back when next used). A node whose inputs and output alone exceed the on-chip memory streams them
  from and to off-chip memory (their bytes are counted).
"""

from __future__ import annotations

from collections.abc import Sequence

from tunebench.datasets.graphs import Graph

TFLITE_ALIGNMENT = 64  # kDefaultTensorAlignment of TFLite's arena planner


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def arena_offsets(sizes_in_order: Sequence[tuple[str, int, int]], alignment: int = TFLITE_ALIGNMENT):
    """Replay ``(event, tensor, bytes)`` events (``"alloc"`` / ``"free"``) on a simple memory arena;
    returns ``(arena size, {tensor: offset})``."""
    live: list[tuple[int, int, int]] = []  # (offset, size, tensor), ordered by offset
    offsets: dict[int, int] = {}
    high = 0
    for event, tensor, size in sizes_in_order:
        if event == "free":
            live = [a for a in live if a[2] != tensor]
            continue
        best, best_fit, current = None, None, 0
        for off, sz, _ in live:
            aligned = _align(current, alignment)
            if aligned + size <= off and (best_fit is None or off - current < best_fit):
                best, best_fit = aligned, off - current
            current = max(current, off + sz)
        if best is None:
            best = _align(current, alignment)
        high = max(high, best + size)
        offsets[tensor] = best
        live.append((best, size, tensor))
        live.sort()
    return high, offsets


def arena_events(graph: Graph, order: Sequence[int]) -> list[tuple[str, int, int]]:
    """The allocation and deallocation events of ``order`` (the liveness model of the graph)."""
    remaining = [len(u) for u in graph.users]
    frees = graph.frees()
    events = []
    for u in order:
        if graph.nbytes[u]:
            events.append(("alloc", u, graph.nbytes[u]))
        for p in frees[u]:
            remaining[p] -= 1
            if remaining[p] == 0 and graph.nbytes[p]:
                events.append(("free", p, graph.nbytes[p]))
    return events


def arena_peak(graph: Graph, order: Sequence[int], alignment: int = TFLITE_ALIGNMENT) -> int:
    """The simple memory arena's size for ``order``."""
    return arena_offsets(arena_events(graph, order), alignment)[0]


def offchip_traffic(graph: Graph, order: Sequence[int], onchip_bytes: int) -> int:
    """Bytes written to and read from off-chip memory along ``order`` (Belady replacement)."""
    pos = {v: i for i, v in enumerate(order)}
    uses: dict[int, list[int]] = {}  # owner -> steps at which it is needed (its creation and its readers)
    needs: list[list[int]] = []
    for step, u in enumerate(order):
        want = sorted({graph.owner[p] for p in graph.preds[u]} | {graph.owner[u]})
        needs.append(want)
        for t in want:
            uses.setdefault(t, []).append(step)
    last = {t: max((pos[x] for x in graph.users[t]), default=len(order)) for t in uses}
    on: set[int] = set()
    off: set[int] = set()
    traffic = 0
    size = graph.nbytes
    for step, u in enumerate(order):
        want = needs[step]
        on -= {t for t in on if last[t] < step}
        off -= {t for t in off if last[t] < step}
        out = graph.owner[u]
        if sum(size[t] for t in want) > onchip_bytes:  # streams: reads what is off chip, writes the output
            traffic += sum(size[t] for t in want if t in off and t != out) + size[out]
            off.add(out)
            continue
        for t in want:
            if t in off:
                traffic += size[t]
                off.discard(t)
        used = sum(size[t] for t in on | set(want))
        evictable = sorted((t for t in on if t not in want), key=lambda t: _next_use(uses[t], step), reverse=True)
        while used > onchip_bytes and evictable:
            t = evictable.pop(0)
            on.discard(t)
            used -= size[t]
            if last[t] > step:
                traffic += size[t]
                off.add(t)
        on |= set(want)
    return traffic


def _next_use(steps: list[int], now: int) -> int:
    return next((s for s in steps if s > now), 1 << 60)
