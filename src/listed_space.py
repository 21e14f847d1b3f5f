"""A listed subset of a product space: :class:`ListedSpace`, whose config index is the position in the list
(the FPGA directive spaces after [Sun-PhD] Algorithm 1 pruning, measured spaces, Kernel Tuner caches)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tunebench.search_space import Knob, Space


class ListedSpace(Space):
    """The configs of a product space of ``knobs`` listed explicitly (e.g. those surviving pruning).

    Args:
        knobs: the knobs (as for :class:`Space`).
        digit_rows: one entity-index tuple per config (one digit per knob); their order defines
            the config indices ``0 .. len(digit_rows) - 1``. Duplicates are removed (first kept).
    """

    def __init__(self, knobs: Sequence[Knob], digit_rows: Iterable[Sequence[int]]):
        super().__init__(knobs)
        self.full_size = self.size
        rows, seen = [], set()
        for r in digit_rows:
            r = tuple(int(d) for d in r)
            if len(r) != len(self.knobs) or any(not 0 <= d < n for d, n in zip(r, self.dims)):
                raise ValueError(f"digit row {r} does not fit knobs {self.names}")
            if r not in seen:
                seen.add(r)
                rows.append(r)
        self._rows = rows
        self._pos = {r: i for i, r in enumerate(rows)}
        self.size = len(rows)

    def digits(self, index: int) -> list[int]:
        if not 0 <= index < self.size:
            raise IndexError(f"config index {index} outside space of size {self.size}")
        return list(self._rows[index])

    def index_of_digits(self, digits: Sequence[int]) -> int:
        key = tuple(int(d) for d in digits)
        if key not in self._pos:
            raise ValueError(f"config {dict(zip(self.names, key))} is not in this (pruned) space")
        return self._pos[key]

    def digit_rows(self, indices) -> np.ndarray:
        return self.digit_array()[self._index_array(indices)]

    def contains_digits(self, digits: Sequence[int]) -> bool:
        return tuple(int(d) for d in digits) in self._pos

    def positions(self, digits) -> np.ndarray:
        """:meth:`index_of_digits` of every row of ``digits`` (n, n_knobs), vectorized: the listed config's
        index, -1 where the row is not listed."""
        digits = np.asarray(digits, dtype=np.int64).reshape(-1, len(self.knobs))
        if self.full_size >= 2**62:  # product-space keys would overflow: one lookup per row
            return np.array([self._pos.get(tuple(r), -1) for r in digits.tolist()], dtype=np.int64)
        if getattr(self, "_keys", None) is None:
            place = np.asarray(self._strides, dtype=np.int64)  # the product space's place values
            keys = self.digit_array() @ place
            order = np.argsort(keys, kind="stable")
            self._keys = (place, keys[order], order)
        place, sorted_keys, order = self._keys
        keys = digits @ place
        at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
        return np.where(sorted_keys[at] == keys, order[at], -1)

    def neighbors(self, index: int) -> list[int]:
        """Listed configs that differ from ``index`` by +-1 entity position in exactly one knob."""
        digits = self.digits(index)
        out = []
        for k in range(len(digits)):
            for step in (-1, 1):
                d = list(digits)
                d[k] += step
                if 0 <= d[k] < self.dims[k] and tuple(d) in self._pos:
                    out.append(self._pos[tuple(d)])
        return out

    def random_walk(self, index: int, rng: np.random.Generator) -> int:
        """A random listed config that differs from ``index`` in exactly one knob (itself if none)."""
        digits = self._rows[index]
        cands = [j for j, r in enumerate(self._rows)
                 if sum(a != b for a, b in zip(r, digits)) == 1]
        return cands[int(rng.integers(len(cands)))] if cands else index

    def digit_array(self) -> np.ndarray:
        """Every listed config's digits, shape (size, n_knobs), int64 (row i = ``digits(i)``)."""
        if getattr(self, "_digit_array", None) is None:
            self._digit_array = np.asarray(self._rows, dtype=np.int64).reshape(len(self._rows), len(self.knobs))
        return self._digit_array

    def _line_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The one-knob lines of every listed config, for :meth:`walk`: ``(members, start, length, pos)``.
        For knob ``k`` and config ``i``, the listed configs that differ from ``i`` in knob ``k`` only (``i``
        included), in index order, are ``members[start[k, i]:start[k, i] + length[k, i]]``; ``i`` is at
        ``pos[k, i]`` among them."""
        if getattr(self, "_walk_tables", None) is None:
            digits, n, n_knobs = self.digit_array(), self.size, len(self.knobs)
            members = np.empty(n_knobs * n, dtype=np.int64)
            start, length, pos = (np.empty((n_knobs, n), dtype=np.int64) for _ in range(3))
            for k in range(n_knobs):
                others = np.delete(digits, k, axis=1)
                group = (np.unique(others, axis=0, return_inverse=True)[1].reshape(-1) if others.shape[1]
                         else np.zeros(n, dtype=np.int64))  # the line: the configs equal but in knob k
                order = np.argsort(group, kind="stable")  # by line, index order within one
                line = group[order]  # lines are numbered 0.. in this order
                first = np.flatnonzero(np.r_[True, np.diff(line) != 0])
                counts = np.diff(np.r_[first, n])
                members[k * n:(k + 1) * n] = order
                start[k, order] = k * n + first[line]
                length[k, order] = counts[line]
                pos[k, order] = np.arange(n) - first[line]
            self._walk_tables = (members, start, length, pos)
        return self._walk_tables

    def walk(self, indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """:meth:`random_walk` of many points: each gets one knob chosen uniformly among the knobs with
        more than one entity and moves to another listed config along it, chosen uniformly (stays where
        there is none). The draws: the knobs (one array), then one ``integers(length - 1)`` per point that
        moves, in order (an array of bounds gives the numbers that one call per point gives)."""
        movable = np.flatnonzero(self.dims > 1)
        out = np.asarray(indices, dtype=np.int64).copy()
        if len(movable) == 0:
            return out
        knobs = movable[rng.integers(len(movable), size=len(out))]
        members, start, length, pos = self._line_tables()
        lengths = length[knobs, out]
        moves = np.flatnonzero(lengths > 1)
        if len(moves):
            k, at = knobs[moves], out[moves]
            pick = rng.integers(lengths[moves] - 1)  # one of the line's other configs
            out[moves] = members[start[k, at] + pick + (pick >= pos[k, at])]
        return out

    def __repr__(self) -> str:
        return (f"ListedSpace({', '.join(f'{k.name}:{len(k.entities)}' for k in self.knobs)}; "
                f"size={self.size} of {self.full_size})")
