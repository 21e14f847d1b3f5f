"""FlexTensor's rearranged space ([Zheng-ASPLOS20] §4.2): the directions a point can move along.

- A split knob of ``N`` parts has ``N (N - 1)`` directions ``(i, j)``: part ``i`` grows to the next larger
  divisor of ``f_i f_j`` and part ``j`` keeps the rest, so the product of the factors, the axis length,
  never changes (``g_i > f_i``, ``g_j < f_j``, every other part as it was). Part ``j`` already 1: no move.
- Any other knob has two directions, its next and its previous value (wrapping around, as FlexTensor's
  code does for its unroll, fuse and reorder sub-spaces); a knob of one value has no move.

A neighbour of a point differs from it in exactly one knob.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.listed_space import ListedSpace
from tunebench.search_space import Space, SplitKnob


@dataclass(frozen=True)
class Direction:
    """One direction: ``knob`` (its position in the space) and ``step``: ``(i, j)`` (split knob: part
    ``i`` grows, part ``j`` shrinks) or ``(+1,)`` / ``(-1,)`` (any other knob)."""

    knob: int
    step: tuple[int, ...]


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class Moves:
    """The directions of ``space`` and the neighbour each one reaches.

    Args:
        space: a :class:`~tunebench.search_space.Space` (a :class:`~tunebench.listed_space.ListedSpace` too: a move
            that leaves its listed configs is no move).
    """

    def __init__(self, space: Space):
        self.space = space
        self.directions: list[Direction] = []
        self._entity_pos: dict[int, dict] = {}
        for k, knob in enumerate(space.knobs):
            if isinstance(knob, SplitKnob):
                self._entity_pos[k] = {e: i for i, e in enumerate(knob.entities)}
                self.directions += [Direction(k, (i, j)) for i in range(knob.n_parts)
                                    for j in range(knob.n_parts) if i != j]
            else:
                self.directions += [Direction(k, (1,)), Direction(k, (-1,))]

    def __len__(self) -> int:
        return len(self.directions)

    def move_digits(self, digits: list[int], direction: Direction) -> list[int] | None:
        """The knob digits one step along ``direction`` from ``digits``, or None (no move)."""
        k, step = direction.knob, direction.step
        knob, d = self.space.knobs[k], digits[k]
        if len(step) == 1:
            n = int(self.space.dims[k])
            new = (d + step[0]) % n if n > 1 else None
        else:
            i, j = step
            f = list(knob.entities[d])
            left = f[i] * f[j]
            larger = [v for v in _divisors(left) if v > f[i]]
            if not larger:
                return None
            f[i], f[j] = larger[0], left // larger[0]
            new = self._entity_pos[k][tuple(f)]
        if new is None:
            return None
        out = list(digits)
        out[k] = new
        return out

    def neighbor(self, index: int, direction: Direction) -> int | None:
        """The config index one step along ``direction`` from ``index``, or None (no move)."""
        digits = self.move_digits(self.space.digits(index), direction)
        if digits is None:
            return None
        if isinstance(self.space, ListedSpace) and not self.space.contains_digits(digits):
            return None
        return self.space.index_of_digits(digits)

    def neighbors(self, index: int) -> list[tuple[int, int]]:
        """``(direction number, neighbour index)`` of every direction that moves."""
        out = []
        for a, direction in enumerate(self.directions):
            j = self.neighbor(index, direction)
            if j is not None:
                out.append((a, j))
        return out
