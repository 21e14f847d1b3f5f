"""DOSA's FireSim measurements of Gemmini ([Hong-MICRO23]; ``data/dosa_firesim/``, its README): layers, the
mappings Timeloop ([Parashar-ISPASS19]) priced and the cycles FireSim measured on Gemmini's RTL for them.

Each row of ``dataset.csv`` is one convolution (or a matrix product written as one: ``Q = R = S = 1``) on one
16x16 Gemmini whose scratchpad and accumulator sizes DOSA chose, one mapping of it (DOSA's four-level
string, below), Timeloop's cycles and energy (µJ) for it, the cycles FireSim measured for that mapping
(``target.gemmini_cycle``) and for Gemmini's own tiling of the layer (``target.gemmini_auto_cycle``).

A mapping string ``L3[WIO] K48 - L2[WI] N1 K16X - L1[O] C48 P16 C16X - L0[W] P8`` lists the levels outer to
inner: DRAM (L3), scratchpad (L2), accumulator (L1), weight registers (L0); in each, loops outer to inner
(DOSA's ``process_mapping`` ranks the first word outermost), ``X`` marking a spatial factor (K across the
array's columns at L2, C across its rows at L1). Dimensions: N batch, K output and C input channels, P and
Q output width and height, R and S filter width and height. On ``target=accel`` (:mod:`.mapspace`): N -> B,
P -> OX, Q -> OY, R -> FX, S -> FY, L0..L3 -> ``LEVELS``; its spatial mapping is fixed (C on rows, K on
columns, each ``min(16, size)``), so a row unrolling a smaller factor cannot be expressed (:func:`to_config`
says why).

A cycle or energy entry that is empty, not a number or not positive is a failed measurement (None), never a
number. The shipped file is checked against ``SHA256SUMS``: an edited or missing file is one ``error:`` line.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import re
from dataclasses import dataclass

from tunebench.datasets.shipped import verify_shipped
from tunebench.errors import UserError
from tunebench.resources import data_dir
from tunebench.targets.accel.mapspace import LEVELS, MapSpace, make_mapspace

FILE = ("dosa_firesim", "dataset.csv")
DIM_OF = {"N": "B", "K": "K", "C": "C", "P": "OX", "Q": "OY", "R": "FX", "S": "FY"}
LEVEL_OF = {"L0": 0, "L1": 1, "L2": 2, "L3": 3}
PROB = ("prob.N", "prob.K", "prob.C", "prob.P", "prob.Q", "prob.R", "prob.S", "prob.Hstride", "prob.Wstride")
ARCH = ("arch.pe", "arch.mem1_depth", "arch.mem1_width", "arch.mem1_instances", "arch.mem1_word-bits",
        "arch.mem1_shared_bandwidth", "arch.mem2_depth", "arch.mem2_width", "arch.mem2_instances",
        "arch.mem2_word-bits", "arch.mem2_shared_bandwidth")
MEASURED = ("target.cycle", "target.energy", "target.gemmini_cycle", "target.gemmini_auto_cycle")
COLUMNS = PROB + ARCH + MEASURED + ("mapping.mapping",)
#: DRAM bits per cycle of DOSA's Timeloop Gemmini (``arch.yaml``: DRAM ``shared_bandwidth`` 8 words of 8 bits);
#: not a column of the data set
DRAM_BW_BITS = 64


@dataclass(frozen=True)
class DosaRow:
    """One row (module docstring). ``levels``: per level of ``LEVELS`` (inner to outer) its temporal loops
    ``(dim, factor)`` outer to inner as written (tunebench's dimension names); ``spatial``: dim -> factor;
    ``problem``: why the mapping string could not be read (None when it could)."""

    index: int
    layer: tuple
    loops: dict
    stride: int
    array: int
    accumulator_kib: float
    scratchpad_kib: float
    accumulator_bw_bits: int
    scratchpad_bw_bits: int
    mapping: str
    levels: tuple
    spatial: dict
    problem: str | None
    timeloop_cycles: float | None
    timeloop_energy_uj: float | None
    firesim_cycles: float | None
    firesim_auto_cycles: float | None


def measured_value(text: str) -> float | None:
    """A cycle or energy entry: a positive finite number, else None (a failed measurement)."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def parse_mapping(text: str) -> tuple[tuple, dict, str | None]:
    """``(levels, spatial, problem)`` of a DOSA mapping string (module docstring)."""
    levels: list[list] = [[] for _ in LEVELS]
    spatial: dict = {}
    parts = text.split(" - ")
    if len(parts) != len(LEVELS):
        return tuple(map(tuple, levels)), spatial, f"{len(parts)} levels, not {len(LEVELS)}"
    for part in parts:
        words = part.split()
        m = re.fullmatch(r"(L[0-3])\[[WIO]+\]", words[0]) if words else None
        if not m:
            return tuple(map(tuple, levels)), spatial, f"level {part!r} has no L0..L3[...] name"
        lv = LEVEL_OF[m.group(1)]
        for word in words[1:]:
            w = re.fullmatch(r"([NKCPQRS])([0-9]+)(X?)", word)
            if not w or int(w.group(2)) < 1:
                return tuple(map(tuple, levels)), spatial, f"loop {word!r} is not <dim><factor>[X]"
            dim, factor = DIM_OF[w.group(1)], int(w.group(2))
            if w.group(3):
                spatial[dim] = spatial.get(dim, 1) * factor
            elif factor > 1:
                if any(d == dim for d, _ in levels[lv]):
                    return tuple(map(tuple, levels)), spatial, f"{dim} twice at level {LEVELS[lv]}"
                levels[lv].append((dim, factor))
    return tuple(map(tuple, levels)), spatial, None


def _int(row: dict, key: str, index: int) -> int:
    try:
        return int(float(row[key]))
    except (TypeError, ValueError):
        raise UserError(f"DOSA data row {index + 2}: {key}={row[key]!r} is not a number") from None


def row_of(index: int, row: dict) -> DosaRow:
    """One CSV row as a :class:`DosaRow` (problem and architecture columns must be numbers)."""
    v = {k: _int(row, k, index) for k in PROB + ARCH}
    stride = v["prob.Hstride"]
    loops = {"B": v["prob.N"], "K": v["prob.K"], "C": v["prob.C"], "OY": v["prob.Q"], "OX": v["prob.P"],
             "FY": v["prob.S"], "FX": v["prob.R"]}
    acc_bits = v["arch.mem1_depth"] * v["arch.mem1_width"] * v["arch.mem1_instances"]
    spad_bits = v["arch.mem2_depth"] * v["arch.mem2_width"] * v["arch.mem2_instances"]
    levels, spatial, problem = parse_mapping(row["mapping.mapping"])
    if problem is None and v["prob.Wstride"] != stride:
        problem = f"strides differ (H {stride}, W {v['prob.Wstride']})"
    return DosaRow(index=index, layer=tuple(v[k] for k in PROB[:-1]), loops=loops, stride=stride,
                   array=round(math.sqrt(v["arch.pe"])), accumulator_kib=acc_bits / 8192,
                   scratchpad_kib=spad_bits / 8192,
                   accumulator_bw_bits=v["arch.mem1_shared_bandwidth"] * v["arch.mem1_word-bits"]
                   * v["arch.mem1_instances"],
                   scratchpad_bw_bits=v["arch.mem2_shared_bandwidth"] * v["arch.mem2_word-bits"],
                   mapping=row["mapping.mapping"], levels=levels, spatial=spatial, problem=problem,
                   timeloop_cycles=measured_value(row["target.cycle"]),
                   timeloop_energy_uj=measured_value(row["target.energy"]),
                   firesim_cycles=measured_value(row["target.gemmini_cycle"]),
                   firesim_auto_cycles=measured_value(row["target.gemmini_auto_cycle"]))


def read_rows(path: str | None = None) -> list[DosaRow]:
    """The rows of DOSA's data set (the shipped one by default, checked against its sha256).

    Raises:
        UserError: a missing or edited file, a missing column, a problem or architecture entry that is no number.
    """
    path = path or data_dir(*FILE)
    if not os.path.isfile(path):
        raise UserError(f"DOSA data {path} is missing (git checkout data/, or reinstall tunebench)")
    raw = open(path, "rb").read()
    verify_shipped(path, raw)
    reader = csv.DictReader(io.StringIO(raw.decode("utf-8", errors="replace")))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"DOSA data {path}: column {missing[0]} is missing; needed: {', '.join(COLUMNS)}")
    return [row_of(i, r) for i, r in enumerate(reader)]


def settings_of(row: DosaRow, base, dosa_bandwidths: bool = True):
    """``base`` (:class:`AccelSettings`) with the row's array and buffer sizes (the accelerator the row was
    measured on) and, with ``dosa_bandwidths``, the bandwidths of DOSA's Timeloop Gemmini (``arch.yaml``)."""
    s = dataclasses.replace(base, array_rows=row.array, array_cols=row.array,
                            accumulator_kib=row.accumulator_kib, scratchpad_kib=row.scratchpad_kib)
    if not dosa_bandwidths:
        return s
    return dataclasses.replace(s, accumulator_bw_bits=row.accumulator_bw_bits,
                               scratchpad_bw_bits=row.scratchpad_bw_bits, dram_bw_bits=DRAM_BW_BITS)


def layer_spec(row: DosaRow) -> dict:
    """The row's layer as a ``model=layers`` conv2d spec (no padding: P and Q are the output sizes)."""
    lp, s = row.loops, row.stride
    return {"batch": lp["B"], "in_channels": lp["C"], "out_channels": lp["K"], "kernel": lp["FX"], "stride": s,
            "padding": 0, "height": s * (lp["OY"] - 1) + lp["FY"], "width": s * (lp["OX"] - 1) + lp["FX"]}


def to_config(row: DosaRow, space: MapSpace):
    """The config of ``space`` that is the row's mapping, or a string saying why there is none."""
    if row.problem:
        return f"mapping not readable: {row.problem}"
    if row.loops["FX"] != row.loops["FY"]:
        return f"filter {row.loops['FX']}x{row.loops['FY']} is not square"
    for d in ("C", "K"):
        if row.spatial.get(d, 1) != space.spatial[d]:
            return f"unrolls {d} by {row.spatial.get(d, 1)}; target=accel unrolls {space.spatial[d]}"
    others = sorted(d for d in row.spatial if d not in ("C", "K") and row.spatial[d] > 1)
    if others:
        return f"unrolls {', '.join(others)} spatially; target=accel unrolls only C and K"
    factors = [dict.fromkeys(space.dims, 1) for _ in LEVELS]
    for lv, loops in enumerate(row.levels):
        for d, f in loops:
            if d not in space.dims:
                return f"loop {d}{f} at {LEVELS[lv]}, but {d} has no temporal loop"
            factors[lv][d] = f
    for d in space.dims:
        covered = math.prod(factors[lv][d] for lv in range(len(LEVELS)))
        if covered != space.temporal[d]:
            return f"{d}: factors cover {covered} of {space.temporal[d]}"
    orders = []
    for loops in row.levels:
        inner_first = [d for d, _ in reversed(loops)]
        orders.append(tuple(inner_first + [d for d in space.dims if d not in inner_first]))
    return space.config_of(factors, orders)


def evaluate_row(row: DosaRow, base, dosa_bandwidths: bool = True) -> dict:
    """ZigZag's figures for the row's layer and mapping on the row's accelerator (:func:`settings_of`):
    ``{"cycles", "energy_pj", "fits", "nest"}``, or ``{"not_expressible": why}`` (never an exception for a
    mapping the mapspace cannot hold, or one ZigZag refuses)."""
    from tunebench.targets.accel.zigzag_model import build_layer, evaluate

    settings = settings_of(row, base, dosa_bandwidths)
    try:
        space = make_mapspace(settings, {**layer_spec(row), "count": 1})
    except UserError as e:
        return {"not_expressible": f"layer: {e}"}
    config = to_config(row, space)
    if isinstance(config, str):
        return {"not_expressible": config}
    nest = space.nest(config)
    layer, sm, smi, acc = build_layer(settings, space.loops, space.stride)
    try:
        cme = evaluate(layer, sm, smi, acc, nest)
    except (ValueError, AssertionError, ZeroDivisionError) as e:  # ZigZag's refusals of a mapping
        return {"not_expressible": f"ZigZag: {type(e).__name__}: {e}"}
    util = [float(u) for v in cme.mem_utili_shared.values() for u in v]
    return {"cycles": float(cme.latency_total2), "energy_pj": float(cme.energy_total),
            "fits": all(u <= 1.0 + 1e-9 for u in util), "nest": nest}
