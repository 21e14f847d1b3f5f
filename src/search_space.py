"""Discrete knob spaces in AutoTVM's format: ordered knobs, index <-> config, features, neighbours.

A :class:`Space` is an ordered list of knobs. Every knob has a finite list of *entities*
(its possible values). A configuration is one entity per knob; it is identified by a
mixed-radix index where the first knob is the least significant digit (AutoTVM's
``ConfigSpace`` order), so ``index = sum(e_i * prod(len(k_j) for j < i))``.

Knob kinds:

- :class:`SplitKnob` -- all ordered factorizations of an axis length into ``n_parts``
  factors (AutoTVM ``define_split(policy="factors")``). Entity = tuple of ints whose
  product is the axis length, outermost first.
- :class:`ChoiceKnob` -- an explicit list of values (AutoTVM ``define_knob``).

Feature encoding (``Space.features``), one float in [0, 1] per feature:

- split knob: one feature per part, ``log2(factor) / log2(length)`` (0 when length == 1);
- choice knob: one feature, ``entity_index / (n_entities - 1)`` (0 when there is one value);
- numeric knob (FPGA directive factors): one feature, min-max of the value,
  ``(v - min) / (max - min)`` ([Sun-PhD] §3.3.2: factors {2, 5, 10} -> {0, 0.375, 1}); booleans 0/1.

:class:`~tunebench.listed_space.ListedSpace` (its own module) is a space whose configs are an explicit
subset of a product space (the FPGA directive spaces after [Sun-PhD] Algorithm 1 pruning): index = position in
that list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np


def factorizations(length: int, n_parts: int) -> list[tuple[int, ...]]:
    """All ordered tuples of ``n_parts`` positive ints whose product is ``length``, sorted."""
    if n_parts == 1:
        return [(length,)]
    out = []
    for d in range(1, length + 1):
        if length % d == 0:
            for rest in factorizations(length // d, n_parts - 1):
                out.append((d,) + rest)
    return out


@dataclass(frozen=True)
class SplitKnob:
    """Split of an axis of ``length`` into ``n_parts`` factors (outermost first)."""

    name: str
    length: int
    n_parts: int

    @cached_property
    def entities(self) -> list[tuple[int, ...]]:
        return factorizations(self.length, self.n_parts)

    @property
    def n_features(self) -> int:
        return self.n_parts

    def encode(self, entity_index: int) -> list[float]:
        if self.length == 1:
            return [0.0] * self.n_parts
        denom = math.log2(self.length)
        return [math.log2(f) / denom for f in self.entities[entity_index]]

    def describe(self) -> dict:
        return {"type": "split", "name": self.name, "length": self.length, "n_parts": self.n_parts}


@dataclass(frozen=True)
class ChoiceKnob:
    """A knob with an explicit list of values."""

    name: str
    values: tuple = field(default_factory=tuple)

    @property
    def entities(self) -> list:
        return list(self.values)

    @property
    def n_features(self) -> int:
        return 1

    def encode(self, entity_index: int) -> list[float]:
        n = len(self.values)
        return [entity_index / (n - 1) if n > 1 else 0.0]

    def describe(self) -> dict:
        return {"type": "choice", "name": self.name, "values": list(self.values)}


@dataclass(frozen=True)
class NumericKnob(ChoiceKnob):
    """A knob over numbers (unroll/partition factors, pipeline on/off as 0/1), min-max encoded:
    a :class:`ChoiceKnob` whose feature is the value's position between the smallest and largest."""

    def encode(self, entity_index: int) -> list[float]:
        lo, hi = float(min(self.values)), float(max(self.values))
        v = float(self.values[entity_index])
        return [(v - lo) / (hi - lo) if hi > lo else 0.0]

    def describe(self) -> dict:
        return {"type": "numeric", "name": self.name, "values": list(self.values)}


Knob = SplitKnob | ChoiceKnob | NumericKnob


@dataclass(frozen=True)
class Config:
    """One point of a space: its index and the knob name -> value mapping (read-only)."""

    index: int
    values: tuple  # one entity per knob, in knob order
    names: tuple

    def __getitem__(self, name: str) -> Any:
        return self.values[self.names.index(name)]

    def to_dict(self) -> dict:
        """JSON-friendly knob -> value mapping (tuples become lists)."""
        return {n: list(v) if isinstance(v, tuple) else v for n, v in zip(self.names, self.values)}


@dataclass(frozen=True)
class TraceConfig:
    """A candidate given as a TVM schedule trace (MetaSchedule) instead of knob values.

    Attributes:
        index: the candidate's number within its task (order of discovery), unique per task.
        trace: the trace as JSON text (``Trace.as_json()`` converted to plain lists/numbers); replayed
            on the task's unscheduled PrimFunc to rebuild the schedule.
    """

    index: int
    trace: str

    def to_dict(self) -> dict:
        import json

        return {"trace": json.loads(self.trace)}


@dataclass(frozen=True)
class ScheduleConfig:
    """A candidate given as an execution order of a graph's nodes (``target=memory``).

    Attributes:
        index: the candidate's number within its task (order of discovery), unique per task.
        order: node names in execution order (names of the graph after ``rewrites``).
        rewrites: the identity rewrites applied to the graph first (rule names, in the order given).
    """

    index: int
    order: tuple[str, ...]
    rewrites: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"order": list(self.order), "rewrites": list(self.rewrites)}

    @classmethod
    def from_dict(cls, index: int, values: dict) -> ScheduleConfig:
        return cls(int(index), tuple(values["order"]), tuple(values.get("rewrites", ())))


def trace_to_json(trace) -> str:
    """A ``tvm.s_tir.schedule.Trace`` as plain JSON text (what :class:`TraceConfig` stores)."""
    import json

    def plain(o):
        if isinstance(o, bool) or o is None or isinstance(o, (int, float)):
            return o
        if isinstance(o, str):
            return str(o)
        if hasattr(o, "value") and not hasattr(o, "__len__"):  # IntImm / FloatImm
            return o.value
        return [plain(x) for x in o]

    return json.dumps(plain(trace.as_json()), separators=(",", ":"))


class Space:
    """An ordered, finite, discrete space of knob configurations.

    Args:
        knobs: the knobs, in order; the first is the least significant index digit.
    """

    def __init__(self, knobs: Sequence[Knob]):
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate knob names in {names}")
        self.knobs = list(knobs)
        self.names = tuple(names)
        self.dims = np.array([len(k.entities) for k in knobs], dtype=np.int64)
        self._strides = [1] * len(knobs)
        for i in range(1, len(knobs)):
            self._strides[i] = self._strides[i - 1] * int(self.dims[i - 1])
        self.size = int(math.prod(int(d) for d in self.dims))  # Python int: no overflow
        self._feature_table = [np.array([k.encode(e) for e in range(len(k.entities))], dtype=np.float32)
                               for k in knobs]

    # ---- index <-> config -------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    def digits(self, index: int) -> list[int]:
        """Entity index of each knob for config ``index``."""
        if not 0 <= index < self.size:
            raise IndexError(f"config index {index} outside space of size {self.size}")
        out = []
        for d in self.dims:
            index, r = divmod(index, int(d))
            out.append(r)
        return out

    def index_of_digits(self, digits: Sequence[int]) -> int:
        return sum(int(d) * s for d, s in zip(digits, self._strides))

    def get(self, index: int) -> Config:
        """The :class:`Config` at ``index``."""
        digits = self.digits(index)
        values = tuple(k.entities[d] for k, d in zip(self.knobs, digits))
        return Config(int(index), values, self.names)

    def from_dict(self, values: dict) -> Config:
        """The :class:`Config` whose knob values are ``values`` (as written by ``Config.to_dict``)."""
        digits = []
        for k in self.knobs:
            v = values[k.name]
            v = tuple(v) if isinstance(v, list) else v
            try:
                digits.append(k.entities.index(v))
            except ValueError:
                raise ValueError(f"knob {k.name}: value {v!r} is not in the space") from None
        return self.get(self.index_of_digits(digits))

    # ---- features -----------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return sum(k.n_features for k in self.knobs)

    def features(self, indices: Iterable[int]) -> np.ndarray:
        """Normalized knob features, shape (n_configs, n_features), float32 in [0, 1]."""
        indices = [int(i) for i in indices]
        if not indices:
            return np.zeros((0, self.n_features), dtype=np.float32)
        if self.size >= 2**63:  # indices beyond int64: one config at a time
            return np.stack([np.concatenate([tab[d] for tab, d in zip(self._feature_table, self.digits(i))])
                             for i in indices])
        digits = self.digit_rows(indices)
        return np.concatenate([tab[digits[:, k]] for k, tab in enumerate(self._feature_table)], axis=1)

    def digit_rows(self, indices) -> np.ndarray:
        """:meth:`digits` of every index, vectorized: shape (n, n_knobs), int64.

        Raises:
            IndexError: an index outside the space.
            ValueError: the space is too large for int64 indices.
        """
        if self.size >= 2**63:
            raise ValueError(f"space of size {self.size} does not fit int64 indices")
        idx = self._index_array(indices)
        return (idx[:, None] // np.asarray(self._strides, dtype=np.int64)[None, :]) % self.dims[None, :]

    def _index_array(self, indices) -> np.ndarray:
        """``indices`` as an int64 array, each checked to be a config of the space."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.size):
            bad = int(idx[(idx < 0) | (idx >= self.size)][0])
            raise IndexError(f"config index {bad} outside space of size {self.size}")
        return idx

    # ---- sampling and moves -------------------------------------------------------------
    def sample(self, rng: np.random.Generator, n: int, exclude: set[int] | None = None) -> list[int]:
        """Up to ``n`` distinct indices drawn uniformly, none of them in ``exclude``."""
        exclude = exclude or set()
        free = self.size - len(exclude)
        n = min(n, max(free, 0))
        if n <= 0:
            return []
        if free <= 4 * n or self.size <= 100_000:
            # small space or nearly exhausted: enumerate what is left
            if self.size <= 5_000_000:
                # the free indices in ascending order (what np.setdiff1d gives, without its sorts)
                free_mask = np.ones(self.size, dtype=bool)
                free_mask[np.fromiter(exclude, dtype=np.int64, count=len(exclude))] = False
                pool = np.flatnonzero(free_mask).astype(np.int64, copy=False)
                return [int(i) for i in rng.choice(pool, size=n, replace=False)]
        out: list[int] = []
        seen = set(exclude)
        while len(out) < n:
            i = int(rng.integers(self.size)) if self.size < 2**63 else int(rng.random() * self.size)
            if i not in seen:
                seen.add(i)
                out.append(i)
        return out

    def neighbors(self, index: int) -> list[int]:
        """Indices that differ from ``index`` by +-1 entity position in exactly one knob."""
        digits = self.digits(index)
        out = []
        for k, d in enumerate(digits):
            for step in (-1, 1):
                if 0 <= d + step < self.dims[k]:
                    out.append(index + step * self._strides[k])
        return out

    def random_walk(self, index: int, rng: np.random.Generator) -> int:
        """AutoTVM's SA move: one random knob (with >1 entity) set to another random entity."""
        movable = [k for k, d in enumerate(self.dims) if d > 1]
        if not movable:
            return index
        digits = self.digits(index)
        k = movable[int(rng.integers(len(movable)))]
        new = int(rng.integers(self.dims[k] - 1))
        new = new + 1 if new >= digits[k] else new
        return index + (new - digits[k]) * self._strides[k]

    def describe(self) -> list[dict]:
        return [k.describe() for k in self.knobs]

    def __repr__(self) -> str:
        return f"Space({', '.join(f'{k.name}:{len(k.entities)}' for k in self.knobs)}; size={self.size})"
