"""A listed subset of a product space: :class:`ExplicitSpace`, whose config index is the position in the list
(the FPGA directive spaces after [Sun-PhD] Algorithm 1 pruning, measured spaces, Kernel Tuner caches)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tunebench.space import Knob, Space


class ExplicitSpace(Space):
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

    def lines(self, knob: int) -> list[np.ndarray]:
        """Per listed config, the listed configs that differ from it in knob ``knob`` only (itself
        included), as index arrays: the moves of a one-knob random walk."""
        cache = self.__dict__.setdefault("_lines", {})
        if knob not in cache:
            groups: dict[tuple, list[int]] = {}
            for i, r in enumerate(self._rows):
                groups.setdefault(r[:knob] + r[knob + 1:], []).append(i)
            arrays = {key: np.asarray(v, dtype=np.int64) for key, v in groups.items()}
            cache[knob] = [arrays[r[:knob] + r[knob + 1:]] for r in self._rows]
        return cache[knob]

    def walk(self, indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """:meth:`random_walk` of many points: each gets one knob chosen uniformly among the knobs with
        more than one entity and moves to another listed config along it (stays where there is none)."""
        movable = np.flatnonzero(self.dims > 1)
        out = np.asarray(indices, dtype=np.int64).copy()
        if len(movable) == 0:
            return out
        for j, k in enumerate(movable[rng.integers(len(movable), size=len(out))]):
            line = self.lines(int(k))[out[j]]
            if len(line) > 1:
                pick = int(rng.integers(len(line) - 1))
                others = line[line != out[j]]
                out[j] = others[pick]
        return out

    def __repr__(self) -> str:
        return (f"ExplicitSpace({', '.join(f'{k.name}:{len(k.entities)}' for k in self.knobs)}; "
                f"size={self.size} of {self.full_size})")
