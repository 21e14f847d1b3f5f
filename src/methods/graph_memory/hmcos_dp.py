"""The dynamic programs of HMCOS's scheduler (:mod:`.hmcos`), made fast without changing their answer.

A unit (a sequence, or a group at the top level) is run from a state ``(peak, live, done, link)``; a DP
state is the set of units run (a bitmask), and of the partial orders reaching it the one with the least
peak is kept, the first one found among equals (the units' order of exploration: the states of a layer
in the order they were first reached, each one's ready units by ascending index).

- :class:`SeqRunner`: a sequence's steps compiled once (incremental memory accounting: per node, the
  bytes it adds, the bytes it frees whatever ran before, and the inputs it frees only when their
  other readers ran, as bitmasks), instead of re-evaluating :meth:`StepModel.step` per node and state.
- :func:`ordered_dp`: the DP as described, with the sequences run by their runners inline.
- :func:`least_peak_dp`: the same answer for units that are all sequences, with no budget. There the
  peak of running a unit depends only on the set already run, so the least peak of each state is
  exact under any bound that is not below the answer: the states are searched under the peak of a
  beam search's order (pruning every partial order above it), and the order is rebuilt from the last
  state backwards, choosing among the states that reach a state with its least peak the one the plain
  DP would keep. Without a budget the plain DP reaches every state, and its layers are ordered by each
  state's lexicographically smallest topological order of unit indices (by induction over the layers:
  a state is first reached from the earliest of its predecessors, by the lowest unit): that order is
  the tie-break, computed greedily per candidate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tunebench.methods.graph_memory.dp import Timeout

BEAM = 64  # states per layer of the beam search that bounds :func:`least_peak_dp`
_CHECK_EVERY = 512  # states between two looks at the clock


class SeqRunner:
    """Sequences (node lists, each run back to back) compiled for :meth:`run`."""

    def __init__(self, model, seqs: list[list[int]]):
        """``model``: the accounting's step model (its ``nbytes``, ``users``, ``frees``, ``overlap``)."""
        self.model = model
        self.nodes = [tuple(s) for s in seqs]
        self.masks = [sum(1 << v for v in s) for s in seqs]
        self.progs = [self._compile(s, m) for s, m in zip(seqs, self.masks)]

    def _compile(self, seq: list[int], seq_mask: int) -> tuple:
        m = self.model
        prog, prefix = [], 0
        for u in seq:
            prefix |= 1 << u
            inc, dec, conds = m.nbytes[u], 0, []
            for p in m.frees[u]:
                rest = m.users[p] & ~prefix
                if rest & seq_mask:
                    continue  # a later node of the sequence reads it: not freed here
                if rest:
                    conds.append((rest, m.nbytes[p], p == m.overlap[u]))
                elif p == m.overlap[u]:
                    inc = 0  # written over the input it kills
                else:
                    dec += m.nbytes[p]
            prog.append((inc, dec, tuple(conds)))
        return tuple(prog)

    def units(self, seq_of: list[int | None], unit_masks: list[int], start_done: int) -> list[tuple | None]:
        """The programs of a DP's units (unit ``i``: sequence ``seq_of[i]``, or None for a unit run
        otherwise; ``unit_masks[i]``: its nodes) from ``start_done``, with every condition on the nodes
        already run turned into one on the units run (a bitmask), the DP's state: a storage read after
        a sequence is freed there once its other readers ran, i.e. the units holding them (a reader
        outside the DP's units that did not run before it: never)."""
        unit_of = {}
        for i, m in enumerate(unit_masks):
            while m:
                bit = m & -m
                m ^= bit
                unit_of[bit.bit_length() - 1] = i
        return [None if s is None else self._unit_prog(self.progs[s], unit_of, start_done) for s in seq_of]

    @staticmethod
    def _unit_prog(prog: tuple, unit_of: dict[int, int], start_done: int) -> tuple:
        out = []
        for inc, dec, conds in prog:
            kept = []
            for rest, nb, ovl in conds:
                units, outside = 0, 0
                while rest:
                    bit = rest & -rest
                    rest ^= bit
                    i = unit_of.get(bit.bit_length() - 1)
                    if i is None:
                        outside |= bit
                    else:
                        units |= 1 << i
                if outside & ~start_done:
                    continue  # a reader that does not run within the DP: not freed
                if units:
                    kept.append((units, nb, ovl))
                elif ovl:
                    inc = 0
                else:
                    dec += nb
            out.append((inc, dec, tuple(kept)))
        return tuple(out)


def run_unit(prog: tuple, mask: int, live: int, peak: int, budget: float):
    """``(peak, live)`` after a unit's program from the units ``mask`` run and ``live`` bytes; None when a
    step exceeds ``budget``. Equal to :meth:`StepModel.step` node by node."""
    for inc, dec, conds in prog:
        for units, nb, ovl in conds:
            if units & mask == units:
                if ovl:
                    inc = 0
                else:
                    dec += nb
        up = live + inc
        if up > budget:
            return None
        if up > peak:
            peak = up
        live = up - dec
    return peak, live


def _succs(preds: list[int]) -> list[list[int]]:
    succs: list[list[int]] = [[] for _ in preds]
    for i, mask in enumerate(preds):
        while mask:
            bit = mask & -mask
            mask ^= bit
            succs[bit.bit_length() - 1].append(i)
    return succs


class Clock:
    """Raises :class:`Timeout` past ``deadline`` (a ``time.perf_counter()`` value; None: never)."""

    def __init__(self, deadline: float | None):
        self.deadline, self.count = deadline, 0

    def tick(self) -> None:
        if self.deadline is not None and not self.count % _CHECK_EVERY and time.perf_counter() > self.deadline:
            raise Timeout()
        self.count += 1


@dataclass
class Units:
    """A DP's units: each one's predecessors (a bitmask over the units), nodes (a bitmask), program
    (:meth:`SeqRunner.units`; None: run by the DP's ``run_other``) and nodes in order (sequences)."""

    preds: list[int]
    masks: list[int]
    progs: list[tuple | None]
    nodes: list[tuple | None]

    @classmethod
    def of(cls, runner: SeqRunner, preds: list[int], seq_of: list[int | None], unit_masks: list[int],
           start_done: int) -> Units:
        return cls(preds, unit_masks, runner.units(seq_of, unit_masks, start_done),
                   [None if s is None else runner.nodes[s] for s in seq_of])

    def ready0(self) -> int:
        return sum(1 << i for i, p in enumerate(self.preds) if not p)


def _fast(prog: tuple | None) -> tuple | None:
    """A program without conditions as ``(0, the most it adds over the bytes before it, bytes added in
    all)``; one step with one condition as ``(1, inc, dec, units, bytes, overwritten)``; else None."""
    if prog is None:
        return None
    if not any(conds for _, _, conds in prog):
        top, total = 0, 0
        for inc, dec, _ in prog:
            top, total = max(top, total + inc), total + inc - dec
        return 0, top, total
    if len(prog) == 1 and len(prog[0][2]) == 1:
        return 1, prog[0][0], prog[0][1], *prog[0][2][0]
    return None


def ordered_dp(units: Units, start: tuple, budget: float, run_other, clock: Clock) -> tuple[tuple | None, int]:
    """The kept state of all units from ``start`` (None: none within ``budget``) and the states made;
    ``run_other(i, state)`` runs a unit without a program (None: over the budget)."""
    preds, progs, masks, nodes = units.preds, units.progs, units.masks, units.nodes
    n, fast = len(preds), [_fast(p) for p in progs]
    unlocks = [tuple((1 << j, preds[j]) for j in js) for js in _succs(preds)]
    layer = {0: (*start, units.ready0())}
    states, deadline, count, now = 0, clock.deadline, 0, time.perf_counter
    for _ in range(n):
        nxt: dict[int, tuple] = {}
        for mask, (peak, live, done, link, ready) in layer.items():
            if deadline is not None and not count % _CHECK_EVERY and now() > deadline:
                clock.count += count
                raise Timeout()
            count += 1
            todo = ready
            while todo:
                bit = todo & -todo
                todo ^= bit
                key = mask | bit
                old = nxt.get(key)
                if old is not None and old[0] <= peak:
                    continue  # a state's peak only grows: this branch cannot beat the one kept
                i = bit.bit_length() - 1
                f = fast[i]
                if f is not None:
                    if f[0]:
                        _, inc, dec, need, nb, ovl = f
                        if need & mask == need:
                            if ovl:
                                inc = 0
                            else:
                                dec += nb
                        up = live + inc
                        new_live = up - dec
                    else:
                        up, new_live = live + f[1], live + f[2]
                    if up > budget:
                        continue
                    got = (up if up > peak else peak, new_live, done | masks[i], (link, nodes[i]))
                elif progs[i] is not None:
                    got = run_unit(progs[i], mask, live, peak, budget)
                    if got is None:
                        continue
                    got = (got[0], got[1], done | masks[i], (link, nodes[i]))
                else:
                    got = run_other(i, (peak, live, done, link))
                    if got is None:
                        continue
                if old is not None and old[0] <= got[0]:
                    continue
                new_ready = ready ^ bit
                for jb, pj in unlocks[i]:
                    if not pj & ~key:
                        new_ready |= jb
                nxt[key] = (*got, new_ready)
        if not nxt:
            return None, states
        states += len(nxt)
        layer = nxt
    clock.count += count
    return layer[(1 << n) - 1][:4], states


def _beam_peak(units: Units, succs: list[list[int]], start: tuple) -> float:
    """The peak of one complete order: a beam search keeping the :data:`BEAM` states of least (peak,
    live bytes) per layer (an upper bound of the least peak)."""
    preds, progs = units.preds, units.progs
    layer = [(start[0], start[1], 0, units.ready0())]
    for _ in range(len(preds)):
        nxt: dict[int, tuple] = {}
        for peak, live, mask, ready in layer:
            todo = ready
            while todo:
                bit = todo & -todo
                todo ^= bit
                i = bit.bit_length() - 1
                key = mask | bit
                got = run_unit(progs[i], mask, live, peak, math.inf)
                old = nxt.get(key)
                if old is None or got[0] < old[0]:
                    new_ready = ready ^ bit
                    for j in succs[i]:
                        if not preds[j] & ~key:
                            new_ready |= 1 << j
                    nxt[key] = (got[0], got[1], key, new_ready)
        layer = sorted(nxt.values())[:BEAM]
    return layer[0][0]


def _first_order(mask: int, preds: list[int], succs: list[list[int]]) -> tuple[int, ...]:
    """The lexicographically smallest topological order of the units of ``mask`` (a set closed under
    predecessors): at each step the lowest ready unit."""
    out, done = [], 0
    ready = sum(1 << i for i in range(len(preds)) if mask >> i & 1 and not preds[i])
    while ready:
        bit = ready & -ready
        ready ^= bit
        done |= bit
        i = bit.bit_length() - 1
        out.append(i)
        for j in succs[i]:
            if mask >> j & 1 and not preds[j] & ~done:
                ready |= 1 << j
    return tuple(out)


def least_peak_dp(units: Units, start: tuple, clock: Clock) -> tuple[tuple, int]:
    """:func:`ordered_dp`'s answer when every unit has a program and there is no budget (see the
    module's text): the kept state of all units and the states made."""
    preds, progs = units.preds, units.progs
    n, succs = len(preds), _succs(preds)
    bound = _beam_peak(units, succs, start)
    layers = [{0: (start[0], start[1], units.ready0())}]
    for _ in range(n):
        nxt: dict[int, tuple] = {}
        for mask, (peak, live, ready) in layers[-1].items():
            clock.tick()
            todo = ready
            while todo:
                bit = todo & -todo
                todo ^= bit
                key = mask | bit
                old = nxt.get(key)
                if old is not None and old[0] <= peak:
                    continue
                i = bit.bit_length() - 1
                got = run_unit(progs[i], mask, live, peak, bound)
                if got is None:
                    continue
                if old is None:
                    new_ready = ready ^ bit
                    for j in succs[i]:
                        if not preds[j] & ~key:
                            new_ready |= 1 << j
                    nxt[key] = (got[0], got[1], new_ready)
                elif got[0] < old[0]:
                    nxt[key] = (got[0], old[1], old[2])  # live bytes and ready units: the set's
        layers.append(nxt)
    link, done = start[3], start[2]
    for i in _rebuild(layers, units, succs):
        link, done = (link, units.nodes[i]), done | units.masks[i]
    peak, live, _ = layers[n][(1 << n) - 1]
    return (peak, live, done, link), sum(len(layer) for layer in layers[1:])


def _rebuild(layers: list[dict], units: Units, succs: list[list[int]]) -> list[int]:
    """The units' order the plain DP keeps, from the last layer back (see the module's text)."""
    succ_mask = [sum(1 << j for j in js) for js in succs]
    key, out = (1 << len(units.preds)) - 1, []
    for size in range(len(units.preds), 0, -1):
        target, best = layers[size][key][0], None
        todo = key
        while todo:
            bit = todo & -todo
            todo ^= bit
            x = bit.bit_length() - 1
            if succ_mask[x] & key:
                continue  # not a last unit of this set
            prev = layers[size - 1].get(key ^ bit)
            if prev is None or run_unit(units.progs[x], key ^ bit, prev[1], prev[0], math.inf)[0] != target:
                continue
            rank = (_first_order(key ^ bit, units.preds, succs), x)
            if best is None or rank < best[0]:
                best = (rank, x)
        out.append(best[1])
        key ^= 1 << best[1]
    return out[::-1]
