"""FPGA kernel specs (``src/datasets/hls/*.yaml``), their directive spaces, Algorithm-1 pruning and the
static schedule a config implies.

A kernel is a loop nest computing outputs as sums of products ``X[..] * W[..]`` (GEMM: A and B;
conv: img and w; SpMV in DIA format: val and x). Its directive knobs (unroll factor per loop, partition type and factor per input
array, pipeline on/off, multiplier core) are listed in the YAML; the full space is their product.

Pruning ([Sun-PhD] §3.3.1, Algorithm 1, our instantiation): arrays are root nodes, the loops indexing
them children; graphs sharing a loop are merged. Within a merged graph a partition type is chosen
per array and the compatible unroll/partition factors follow from it:

- R1 ``type``: arrays that share a loop share a partition type (arrays with factor 1 are not
  partitioned and take part in no type constraint);
- R2 ``cyclic->inner``: a CYCLIC-partitioned array pairs with unrolled inner loops, so the outer
  loop is not unrolled;
- R3 ``block->outer``: a BLOCK-partitioned array pairs with the unrolled outer loop, so no inner
  loop is unrolled;
- R4 ``factor``: an array's partition factor equals the number of distinct elements the unrolled
  loops read from it per cycle, per dim ``sum(unroll of the loops in the index) - (n - 1)``,
  multiplied over dims (smaller: the loop cannot be unrolled; larger: memory wasted);
- R5 ``duplicate``: factor 1 means no partitioning, the type is then irrelevant (``block`` x 1 is
  the same design as ``cyclic`` x 1 and removed);
- R6 ``conflict``: the static schedule of the config reads two different addresses of one bank in
  one cycle (domain check of the unrolled accesses, "all factors are checked", [Sun-PhD] §3.3.1).

The enumeration is the constructive Algorithm 1 run as a filter over the product space: it keeps
exactly the configs the graph walk assigns, in product-space index order (Algorithm 1 de-duplicates
at the end, line 16).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import yaml

from tunebench.errors import UserError
from tunebench.listed_space import ListedSpace
from tunebench.search_space import ChoiceKnob, NumericKnob

SPEC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "datasets", "hls")
KERNELS = ("gemm", "conv", "spmv")


def load_spec(kernel: str) -> dict:
    """The kernel spec dict from ``src/datasets/hls/<kernel>.yaml``."""
    path = os.path.join(SPEC_DIR, f"{kernel}.yaml")
    if kernel not in KERNELS or not os.path.exists(path):
        raise UserError(f"model.kernel={kernel!r} is unknown; valid: {', '.join(KERNELS)}")
    with open(path) as fh:
        return yaml.safe_load(fh)


def full_knobs(spec: dict) -> list:
    """The knobs of the unpruned space, in YAML order (numeric -> min-max encoded, else choice)."""
    out = []
    for name, values in spec["directives"].items():
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out.append(NumericKnob(name, tuple(values)))
        else:
            out.append(ChoiceKnob(name, tuple(values)))
    return out


@dataclass(frozen=True)
class Schedule:
    """The static schedule of one config.

    Attributes:
        lanes: ``(n_out_lanes, n_red_lanes)`` parallel multiply lanes (output x reduction).
        steps: list of steps (one issue slot each); a step is a list over lanes (row-major,
            output lane then reduction lane) of ``(out_flat, x_flat, w_flat)`` or None (idle lane).
        first/last: per step, whether it starts/ends a group of outputs (accumulator reset/write).
        out_addr: per step, for each output lane, the output element it accumulates (or -1).
        banks: array name -> (n_banks, {flat element -> (bank, address)}, bank depth).
    """

    lanes: tuple
    steps: list
    first: list
    last: list
    out_lane_elems: list
    banks: dict


class Kernel:
    """One kernel spec with its loop structure, reference function and schedules."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.name = spec["name"]
        self.kind = spec["kind"]
        self.width = int(spec["width"])
        self.acc_width = int(spec["acc_width"])
        self.loops = {lp["name"]: lp for lp in spec["loops"]}
        self.loop_order = [lp["name"] for lp in spec["loops"]]
        self.outer = [n for n in self.loop_order if self.loops[n]["level"] == "outer"]
        self.inner = [n for n in self.loop_order if self.loops[n]["level"] == "inner"]
        self.red = [n for n in self.loop_order if self.loops[n].get("reduction")]
        self.par = [n for n in self.loop_order if not self.loops[n].get("reduction")]
        self.arrays = {}
        for a, d in spec["arrays"].items():
            sizes = d.get("sizes") or [sum(self.loops[lp]["trip"] - 1 for lp in dim) + 1 for dim in d["dims"]]
            self.arrays[a] = {"dims": [list(dim) for dim in d["dims"]], "sizes": list(sizes)}
        self.out_dims = [list(d) for d in spec["output"]["dims"]]
        self.out_sizes = [sum(self.loops[lp]["trip"] - 1 for lp in dim) + 1 for dim in self.out_dims]
        self.x_name, self.w_name = list(self.arrays)

    # ---- spaces ----------------------------------------------------------------------
    @cached_property
    def knobs(self) -> list:
        return full_knobs(self.spec)

    def unrolls(self, point: dict) -> dict:
        return {lp: int(point[f"unroll_{lp}"]) for lp in self.loop_order}

    def required_banks(self, array: str, u: dict) -> list[int]:
        """Distinct indices per dim read per cycle: sum of the unrolls of the dim's loops - (n - 1)."""
        return [sum(u[lp] for lp in dim) - (len(dim) - 1) for dim in self.arrays[array]["dims"]]

    def prune_reason(self, point: dict) -> str:
        """"" when ``point`` (knob name -> value) survives pruning, else the rule that removes it."""
        u = self.unrolls(point)
        for lp, f in u.items():
            if self.loops[lp]["trip"] % f:
                return f"trip: unroll_{lp}={f} does not divide the trip count {self.loops[lp]['trip']}"
        parted = {a: point[f"partition_{a}_type"] for a in self.arrays if point[f"partition_{a}_factor"] > 1}
        for a in self.arrays:
            if point[f"partition_{a}_factor"] == 1 and point[f"partition_{a}_type"] == "block":
                return f"duplicate: partition_{a}_factor=1 is unpartitioned (same design as cyclic x 1)"
        loops_of = {a: {lp for dim in d["dims"] for lp in dim} for a, d in self.arrays.items()}
        for a, b in itertools.combinations(parted, 2):
            if loops_of[a] & loops_of[b] and parted[a] != parted[b]:
                return f"type: {a} and {b} share loop(s) {sorted(loops_of[a] & loops_of[b])} but differ in partition type"
        types = set(parted.values())
        if "cyclic" in types and any(u[lp] > 1 for lp in self.outer):
            return "cyclic->inner: a cyclic-partitioned array forbids unrolling the outer loop " + ",".join(self.outer)
        if "block" in types and any(u[lp] > 1 for lp in self.inner):
            return "block->outer: a block-partitioned array forbids unrolling the inner loops " + ",".join(self.inner)
        if not types and any(u[lp] > 1 for lp in self.loop_order):
            # nothing partitioned: only the all-1 design has one read per array per cycle (R4 below)
            pass
        for a in self.arrays:
            need = math.prod(self.required_banks(a, u))
            have = point[f"partition_{a}_factor"]
            if have != need:
                return (f"factor: partition_{a}_factor={have} but the unrolled loops read {need} distinct "
                        f"element(s) of {a} per cycle")
        try:
            self.schedule(point)
        except ValueError as exc:
            return f"conflict: {exc}"
        return ""

    def enumerate_pruned(self) -> tuple[list[tuple[int, ...]], dict[str, int]]:
        """Digit rows of the configs that survive pruning (product-space order) and, per rule, how
        many configs it removed (first failing rule counts)."""
        keep, removed = [], {}
        names = [k.name for k in self.knobs]
        for digits in itertools.product(*[range(len(k.entities)) for k in reversed(self.knobs)]):
            digits = tuple(reversed(digits))  # first knob = least significant digit
            point = {n: k.entities[d] for n, k, d in zip(names, self.knobs, digits)}
            why = self.prune_reason(point)
            if why:
                rule = why.split(":", 1)[0]
                removed[rule] = removed.get(rule, 0) + 1
            else:
                keep.append(digits)
        return keep, removed

    @cached_property
    def space(self) -> ListedSpace:
        rows, self.removed = self.enumerate_pruned()
        return ListedSpace(self.knobs, rows)

    # ---- semantics -------------------------------------------------------------------
    def reference(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Software reference (int64), written independently of the loop-nest description: GEMM
        ``x @ w``; conv the valid 2-D correlation of x by w; SpMV (DIA) ``y[r, c] = sum_k x[r, c, k] *
        w[r, c + k]`` (x the diagonals, w the padded vector)."""
        if self.kind == "hls_gemm":
            return x.astype(np.int64) @ w.astype(np.int64)
        if self.kind == "hls_spmv":
            n_diag = x.shape[-1]
            windows = np.lib.stride_tricks.sliding_window_view(w.astype(np.int64), n_diag, axis=1)
            return np.einsum("rck,rck->rc", x.astype(np.int64), windows)
        H, W = self.out_sizes
        kh, kw = w.shape
        out = np.zeros((H, W), dtype=np.int64)
        for oy in range(H):
            for ox in range(W):
                out[oy, ox] = int(np.sum(x[oy:oy + kh, ox:ox + kw].astype(np.int64) * w))
        return out

    def _index(self, dims: list, sizes: list, it: dict) -> int:
        flat = 0
        for dim, size in zip(dims, sizes):
            flat = flat * size + sum(it[lp] for lp in dim)
        return flat

    def bank_map(self, array: str, point: dict) -> tuple[int, dict, int]:
        """(n_banks, {flat element: (bank, address)}, depth) of ``array`` under the config's partition.

        Multi-dim partition: per dim a factor (the required distinct indices, R4); CYCLIC puts index
        ``x`` in bank ``x % f``, BLOCK in bank ``x // ceil(size / f)``; the bank is the mixed-radix
        combination over dims, the address the row-major rank of the element within its bank."""
        d = self.arrays[array]
        u = self.unrolls(point)
        total = point[f"partition_{array}_factor"]
        per_dim = self.required_banks(array, u) if total > 1 else [1] * len(d["dims"])
        typ = point[f"partition_{array}_type"]
        mapping, fill = {}, {}
        for idx in itertools.product(*[range(s) for s in d["sizes"]]):
            bank = 0
            for x, s, f in zip(idx, d["sizes"], per_dim):
                b = x % f if typ == "cyclic" else x // math.ceil(s / f)
                bank = bank * f + b
            flat = 0
            for x, s in zip(idx, d["sizes"]):
                flat = flat * s + x
            mapping[flat] = (bank, fill.get(bank, 0))
            fill[bank] = fill.get(bank, 0) + 1
        n_banks = math.prod(per_dim)
        return n_banks, mapping, max(fill.values())

    def schedule(self, point: dict) -> Schedule:
        """The static schedule of ``point``. Outer-loop unrolling (BLOCK mode) gives lane ``d`` the
        iterations ``d * trip/u + l``; inner unrolling gives lane ``d`` iterations ``u * t + d``.

        Raises:
            ValueError: two lanes read different addresses of one bank in one step (R6).
        """
        u = self.unrolls(point)
        banks = {a: self.bank_map(a, point) for a in self.arrays}

        def lane_values(lp):
            trip, f = self.loops[lp]["trip"], u[lp]
            if lp in self.outer:  # lane d covers a contiguous block
                return [[d * (trip // f) + t for d in range(f)] for t in range(trip // f)]
            return [[f * t + d for d in range(f)] for t in range(trip // f)]

        par_groups = list(itertools.product(*[lane_values(lp) for lp in self.par]))
        red_groups = list(itertools.product(*[lane_values(lp) for lp in self.red]))
        par_lanes = list(itertools.product(*[range(u[lp]) for lp in self.par]))
        red_lanes = list(itertools.product(*[range(u[lp]) for lp in self.red]))
        steps, first, last, out_elems = [], [], [], []
        for pg in par_groups:
            lane_outs = []
            for pl in par_lanes:
                it = {lp: pg[i][pl[i]] for i, lp in enumerate(self.par)}
                lane_outs.append(self._index(self.out_dims, self.out_sizes, it))
            for si, rg in enumerate(red_groups):
                step = []
                for pl in par_lanes:
                    for rl in red_lanes:
                        it = {lp: pg[i][pl[i]] for i, lp in enumerate(self.par)}
                        it.update({lp: rg[i][rl[i]] for i, lp in enumerate(self.red)})
                        o = self._index(self.out_dims, self.out_sizes, it)
                        xs = self._index(self.arrays[self.x_name]["dims"], self.arrays[self.x_name]["sizes"], it)
                        ws = self._index(self.arrays[self.w_name]["dims"], self.arrays[self.w_name]["sizes"], it)
                        step.append((o, xs, ws))
                for a, pos in ((self.x_name, 1), (self.w_name, 2)):
                    used = {}
                    for lane in step:
                        b, addr = banks[a][1][lane[pos]]
                        if used.setdefault(b, addr) != addr:
                            raise ValueError(f"bank {b} of {a} is read at two addresses in one cycle")
                steps.append(step)
                first.append(si == 0)
                last.append(si == len(red_groups) - 1)
            out_elems.append(lane_outs)
        lanes = (len(par_lanes), len(red_lanes))
        return Schedule(lanes, steps, first, last, out_elems, banks)


_KERNELS: dict[str, Kernel] = {}


def get_kernel(kernel: str) -> Kernel:
    """The (cached) :class:`Kernel` named ``kernel`` (one of :data:`KERNELS`)."""
    if kernel not in _KERNELS:
        _KERNELS[kernel] = Kernel(load_spec(kernel))
    return _KERNELS[kernel]
