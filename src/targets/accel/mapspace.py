"""The mapspace of one layer on ``target=accel``: tile factors per memory level and a loop order per
level, as a tunebench :class:`~tunebench.search_space.Space` (the raw mapspace that Timeloop's random mapper
samples, [Parashar-ISPASS19]), with the capacity model that decides which mappings fit.

A layer is the loop nest B, K, C, OY, OX, FY, FX (dense layers and matrix products: B, K, C). C and K are
unrolled on the array's rows and columns (fixed spatial mapping); what is left of each dimension (its
*temporal size*) is split over the four levels of :data:`LEVELS` (inner to outer: weight register,
accumulator, scratchpad, DRAM). A config holds one ``SplitKnob`` per dimension (factors outermost first:
DRAM, scratchpad, accumulator, register) and one ``ChoiceKnob`` per level (a permutation of the
dimensions, innermost first). Loops of factor 1 are dropped.

Capacity (what every level must hold; the tile of a level is the product of its factors and of those
below it, times the spatial unrolling for the levels that serve the whole array):

- weight register (per PE): the weight tile, ``K C FY FX`` at the register level;
- accumulator: the partial-sum tile, ``B K OY OX`` (K with its spatial unrolling), ``psum_bits`` each;
- scratchpad: the weight tile plus the input tile ``B C (s (OY - 1) + FY) (s (OX - 1) + FX)``.

These are the inequalities of [Dinh-MLArchSys23] eq. (1) for this hierarchy. ZigZag's own utilization
(``target.measure``) decides validity; :meth:`MapSpace.utilization` counts as ZigZag does (outputs
whose reduction is complete below a level at ``O_final`` bits, else at the partial-sum width).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

from tunebench.datasets.layer_spec import normalize_layer
from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob
from tunebench.targets.accel.layers import loops_of

DIMS = ("B", "K", "C", "OY", "OX", "FY", "FX")
LEVELS = ("weight_reg", "accumulator", "scratchpad", "dram")
BUFFERS = (2, 1, 0)  # the levels with a capacity, outer to inner (their tiles are decided in this order)
RELEVANT = {"W": ("K", "C", "FY", "FX"), "I": ("B", "C", "OY", "OX", "FY", "FX"), "O": ("B", "K", "OY", "OX")}
LEVEL_OPERANDS = {0: ("W",), 1: ("O",), 2: ("W", "I")}  # what each buffer level keeps


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass
class MapSpace:
    """One layer's mapspace (module docstring).

    Attributes:
        loops: the layer's sizes per dimension (all seven; 1 where absent).
        stride: the convolution's stride (1 for dense layers).
        spatial: unrolling per dimension on the array (C on rows, K on columns; 1 elsewhere).
        capacity_bits: capacity of each buffer level (indices 0..2 of :data:`LEVELS`).
        bits: precision of W, I, O (partial sums) and O_final in bits.
        hardware: the accelerator's settings (for methods that run ZigZag's own mappers).
    """

    loops: dict
    stride: int
    spatial: dict
    capacity_bits: tuple
    bits: dict = field(default_factory=lambda: {"W": 8, "I": 8, "O": 32, "O_final": 8})
    hardware: object = None  # the target's settings (AccelSettings): ZigZag's mappers rebuild the model from them
    # the memory hierarchy, for methods that search the mapspace by its structure (they import no target module)
    LEVELS: ClassVar[tuple] = LEVELS
    BUFFERS: ClassVar[tuple] = BUFFERS
    RELEVANT: ClassVar[dict] = RELEVANT
    LEVEL_OPERANDS: ClassVar[dict] = LEVEL_OPERANDS

    @cached_property
    def temporal(self) -> dict:
        """What is left of each dimension after the spatial unrolling (ceil: a partial last column)."""
        return {d: -(-self.loops.get(d, 1) // self.spatial.get(d, 1)) for d in DIMS}

    @cached_property
    def dims(self) -> tuple:
        """The dimensions with a temporal loop (size > 1), in :data:`DIMS` order."""
        return tuple(d for d in DIMS if self.temporal[d] > 1)

    @cached_property
    def permutations(self) -> tuple:
        return tuple(itertools.permutations(self.dims))

    @cached_property
    def space(self) -> Space:
        knobs = [SplitKnob(f"tile_{d}", self.temporal[d], len(LEVELS)) for d in self.dims]
        knobs += [ChoiceKnob(f"order_{lv}", self.permutations) for lv in LEVELS]
        return Space(knobs)

    @cached_property
    def _split_index(self) -> dict:
        return {d: {e: i for i, e in enumerate(k.entities)} for d, k in zip(self.dims, self.space.knobs)}

    @cached_property
    def _perm_index(self) -> dict:
        return {p: i for i, p in enumerate(self.permutations)}

    # ---- configs <-> nests ----------------------------------------------------------------
    def factors(self, config: Config) -> list[dict]:
        """Per level (inner to outer) the factor of each dimension."""
        out = [dict.fromkeys(self.dims, 1) for _ in LEVELS]
        for d in self.dims:
            split = config[f"tile_{d}"]  # outermost first
            for lv in range(len(LEVELS)):
                out[lv][d] = split[len(LEVELS) - 1 - lv]
        return out

    def nest(self, config: Config) -> list[list[tuple[str, int]]]:
        """Per level (inner to outer) its loops ``(dim, factor)``, inner to outer, factors > 1 only."""
        factors = self.factors(config)
        return [[(d, factors[lv][d]) for d in config[f"order_{name}"] if factors[lv][d] > 1]
                for lv, name in enumerate(LEVELS)]

    def config_of(self, factors: list[dict], orders: list[tuple]) -> Config:
        """The config of per-level factors (inner to outer) and per-level orders (permutations of ``dims``)."""
        digits = [self._split_index[d][tuple(factors[lv][d] for lv in reversed(range(len(LEVELS))))]
                  for d in self.dims]
        digits += [self._perm_index[tuple(o)] for o in orders]
        return self.space.get(self.space.index_of_digits(digits))

    # ---- capacity -------------------------------------------------------------------------
    def tiles(self, factors: list[dict]) -> list[dict]:
        """The cumulative tile of each buffer level (0..2) per dimension, spatial unrolling included
        above the register."""
        out, run = [], dict.fromkeys(DIMS, 1)
        for lv in range(len(LEVELS) - 1):
            for d in self.dims:
                run[d] *= factors[lv][d]
            out.append({d: run[d] * (self.spatial.get(d, 1) if lv > 0 else 1) for d in DIMS})
        return out

    def footprint_bits(self, level: int, tile: dict, final: bool = False) -> float:
        """Bits that buffer ``level`` holds for a (cumulative, possibly fractional) ``tile``; ``final``: its
        outputs are final (no C, FY or FX loop above it), kept at ``O_final`` bits as ZigZag counts them."""
        total = 0.0
        for op in LEVEL_OPERANDS[level]:
            if op == "I":
                iy = self.stride * (tile["OY"] - 1) + tile["FY"]
                ix = self.stride * (tile["OX"] - 1) + tile["FX"]
                words = tile["B"] * tile["C"] * iy * ix
            else:
                words = math.prod(tile[d] for d in RELEVANT[op])
            total += words * self.bits["O_final" if op == "O" and final else op]
        return total

    def final_outputs(self, level: int, tile: dict) -> bool:
        """Whether ``level``'s tile covers every reduction loop (C, FY, FX): its outputs are final."""
        return all(tile[d] >= self.temporal[d] * (self.spatial.get(d, 1) if level > 0 else 1)
                   for d in ("C", "FY", "FX"))

    def utilization(self, config: Config) -> list[float]:
        """Footprint over capacity of each buffer level (a mapping fits when every one is <= 1)."""
        return [self.footprint_bits(lv, t, self.final_outputs(lv, t)) / self.capacity_bits[lv]
                for lv, t in enumerate(self.tiles(self.factors(config)))]

    def fits(self, config: Config) -> bool:
        return all(u <= 1.0 + 1e-12 for u in self.utilization(config))


def make_mapspace(settings, spec: dict) -> MapSpace:
    """The mapspace of one layer spec on the accelerator of ``settings`` (an ``AccelSettings``; pure Python, no
    ZigZag)."""
    loops, stride = loops_of(normalize_layer({k: v for k, v in spec.items() if k != "count"}))
    spatial = {"C": min(settings.array_rows, loops["C"]), "K": min(settings.array_cols, loops["K"])}
    caps = (settings.weight_reg_bits, settings.accumulator_kib * 8192, settings.scratchpad_kib * 8192)
    return MapSpace(loops={d: loops.get(d, 1) for d in ("B", "K", "C", "OY", "OX", "FY", "FX")}, stride=stride,
                    spatial=spatial, capacity_bits=caps,
                    bits={"W": settings.input_bits, "I": settings.input_bits, "O": settings.psum_bits,
                          "O_final": settings.output_bits}, hardware=settings)
