"""``model=dosa_firesim`` on ``target=accel``: DOSA's FireSim measurements of Gemmini ([Hong-MICRO23];
:mod:`.dosa`) as a model whose tasks are DOSA's layers, searched at two fidelities.

A task is one layer of the data set (numbered 1..71 in order of its first row of ``dataset.csv``). Its space
is the layer's recorded rows whose mapping ``target=accel`` can express (:func:`~.dosa.to_config`): an
:class:`~tunebench.listed_space.ListedSpace` over the row's accelerator (``accumulator_kib``,
``scratchpad_kib``: DOSA chose them per row) and the mapping as ``target=accel``'s mapspace knobs (tile
factors per level, loop orders). DOSA's data has one row per (layer, accelerator): a config is a (mapping,
accelerator) pair, never two mappings on one accelerator. Rows that cannot be expressed are listed in the
target's details and logged, never dropped silently; a layer with none has no task.

Fidelities, cheapest first: ``zigzag`` (ZigZag's cycles of the row's mapping on the row's accelerator with
DOSA's Timeloop bandwidths, :func:`~.dosa.evaluate_row`; a mapping ZigZag finds over a buffer's capacity is
invalid, as on ``target=accel``) and ``firesim`` (the cycles FireSim measured on Gemmini's RTL, replayed; an
empty, non-numeric or non-positive entry is an invalid measurement). One objective: ``latency_s`` = cycles /
``target.clock_hz`` (FireSim measured cycles only: no energy). The ZigZag evaluation's seconds are its cost;
a FireSim run's seconds are not in DOSA's data, so a replayed one costs nothing on the search clock (as
``target=table`` charges a stage without recorded seconds): compare methods by trials here, not seconds.

Gemmini's own tiling of the layer (``target.gemmini_auto_cycle``, measured by FireSim on each row's
accelerator) is the reference a mapper must beat: reported beside the best (:func:`best_metrics`), not a config.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass, replace

from tunebench.errors import UserError
from tunebench.listed_space import ListedSpace
from tunebench.search_space import ChoiceKnob
from tunebench.targets.accel.dosa import evaluate_row, layer_spec, read_rows, settings_of, to_config
from tunebench.targets.accel.mapspace import make_mapspace
from tunebench.task import Measurement, Outcome, Task

log = logging.getLogger(__name__)

WORKLOAD = "dosa_firesim"
FIDELITIES = ("zigzag", "firesim")
OBJECTIVES = ("latency_s",)
HW_KNOBS = ("accumulator_kib", "scratchpad_kib")


@dataclass
class DosaLayer:
    """One layer of DOSA's data (a task's ``mod``): its number, every row, the rows of its space (config index
    -> row) and the rows that cannot be expressed with the reason."""

    number: int
    rows: list
    space_rows: list
    not_expressible: list  # (row, why)
    mapspace: object = None  # target=accel's mapspace of the layer (its knobs; capacities are the first row's)


def is_dosa(model) -> bool:
    return getattr(model, "workload", "") == WORKLOAD


def mapspace_of(row, base):
    """``target=accel``'s mapspace of the row's layer on the row's accelerator."""
    return make_mapspace(settings_of(row, base), {**layer_spec(row), "count": 1})


def dosa_layers(base, rows=None) -> list[DosaLayer]:
    """Every layer of the data set (module docstring), its rows split into expressible and not."""
    grouped: dict = collections.OrderedDict()
    for r in rows if rows is not None else read_rows():
        grouped.setdefault(r.layer, []).append(r)
    out = []
    for n, layer_rows in enumerate(grouped.values(), start=1):
        layer = DosaLayer(n, layer_rows, [], [])
        for r in layer_rows:
            try:
                ms = mapspace_of(r, base)
            except UserError as e:
                layer.not_expressible.append((r, f"layer: {e}"))
                continue
            config = to_config(r, ms)
            if isinstance(config, str):
                layer.not_expressible.append((r, config))
                continue
            layer.mapspace = layer.mapspace or ms
            layer.space_rows.append((r, config))
        out.append(layer)
    return out


def unexpressible_text(layer: DosaLayer) -> str:
    reasons = sorted({why for _, why in layer.not_expressible})
    return f"layer {layer.number} ({len(layer.rows)} rows): {'; '.join(reasons)}"


def selected_layers(base, numbers: list[int]) -> tuple[list[DosaLayer], list[DosaLayer]]:
    """``(layers to tune, layers left out for want of an expressible mapping)``: ``numbers`` ([] = every
    layer with one).

    Raises:
        UserError: a number that is no layer, or a layer asked for that has no expressible mapping.
    """
    layers = dosa_layers(base)
    for n in numbers:
        if not 1 <= n <= len(layers):
            raise UserError(f"model.layers: {n} is no DOSA layer; valid: 1..{len(layers)}")
        if not layers[n - 1].space_rows:
            raise UserError(f"model.layers: DOSA {unexpressible_text(layers[n - 1])}: no mapping target=accel can "
                            f"express; valid: {', '.join(str(x.number) for x in layers if x.space_rows)}")
    chosen = [layers[n - 1] for n in numbers] if numbers else [x for x in layers if x.space_rows]
    left = [x for x in layers if not x.space_rows and not numbers]
    return chosen, left


def check_dosa_model(settings, model) -> None:
    """Before anything is built: the data intact (sha256), the layers exist and can be searched, and the
    objectives are what FireSim measured (``target.objectives`` at its default is read as ``[latency_s]``).

    Raises:
        UserError: one line naming the value and what is valid.
    """
    if list(settings.objectives) not in ([*OBJECTIVES], list(type(settings)().objectives)):
        raise UserError(f"target.objectives={list(settings.objectives)}: model=dosa_firesim has FireSim's cycles "
                        f"only (no energy was measured); valid: {list(OBJECTIVES)}")
    selected_layers(settings, list(model.layers))


def space_of(layer: DosaLayer) -> ListedSpace:
    """The layer's recorded mappings as configs (module docstring)."""
    ms = layer.mapspace
    rows = [r for r, _ in layer.space_rows]
    values = {k: tuple(sorted({getattr(r, k) for r in rows})) for k in HW_KNOBS}
    knobs = [ChoiceKnob(k, values[k]) for k in HW_KNOBS] + list(ms.space.knobs)
    digits = [[values[k].index(getattr(r, k)) for k in HW_KNOBS] + ms.space.digits(c.index)
              for r, c in layer.space_rows]
    return ListedSpace(knobs, digits)


def load_dosa_tasks(settings, model, kind: str) -> tuple[list[Task], list[DosaLayer]]:
    """One task per selected layer (module docstring), and the layers left out (logged)."""
    chosen, left = selected_layers(settings, list(model.layers))
    for layer in left:
        log.warning("model=dosa_firesim: DOSA %s: no mapping target=accel can express; no task", unexpressible_text(layer))
    tasks = []
    for layer in chosen:
        for r, why in layer.not_expressible:
            log.info("model=dosa_firesim: layer %d, dataset.csv row %d (%s) not expressible: %s", layer.number,
                     r.index + 2, r.mapping, why)
        space = space_of(layer)
        loops = layer.mapspace.loops
        macs = math.prod(loops.values())
        key = json.dumps({"dosa_firesim": list(layer.rows[0].layer), "rows": [r.index for r, _ in layer.space_rows]})
        op = "dense" if loops["OY"] * loops["OX"] * loops["FY"] == 1 else "conv2d"
        shape = {**layer_spec(layer.rows[0]), "dosa_layer": layer.number, "recorded_mappings": len(layer.rows),
                 "mappings": len(layer.space_rows)}
        task = Task(id=hashlib.sha1(key.encode()).hexdigest()[:16], name=f"dosa{layer.number:02d}_{op}", kind=op,
                    mod=layer, shape=shape, flops=2 * macs, weight=1, target_kind=kind, space=space)
        tasks.append(task)
    return tasks, left


def details(layers_left: list[DosaLayer], tasks: list[Task]) -> dict:
    """What the run records of the data: its origin, the rows not expressible per layer (tasks and layers left out)."""
    out = {"model": "DOSA's FireSim measurements of Gemmini [Hong-MICRO23] (data/dosa_firesim/dataset.csv) replayed; "
                    "fidelity zigzag: zigzag-dse 3.9.1 CostModelEvaluation on each row's accelerator",
           "mapspace": False}
    rows = {}
    for layer in [t.mod for t in tasks] + layers_left:
        for r, why in layer.not_expressible:
            rows[f"layer {layer.number} row {r.index + 2}"] = why
    out["not_expressible"] = rows
    out["layers_without_task"] = [x.number for x in layers_left]
    return out


def _listed(task: Task, config) -> bool:
    space = task.space
    return 0 <= config.index < space.size and tuple(space.get(config.index).values) == tuple(config.values)


def measure(target, task: Task, configs, fidelity: str | None) -> list[Measurement]:
    """One measurement per config at ``fidelity`` (module docstring)."""
    fid = fidelity or FIDELITIES[-1]
    if fid not in FIDELITIES:
        raise UserError(f"fidelity={fid!r} is unknown for model=dosa_firesim; valid: {', '.join(FIDELITIES)}")
    out = []
    for c in configs:
        start = time.perf_counter()
        if not _listed(task, c):
            m = Measurement(task.id, c, Outcome.INFEASIBLE, error=f"not a recorded mapping of DOSA layer {task.mod.number}")
        else:
            row = task.mod.space_rows[c.index][0]
            m = _zigzag(target, task, c, row) if fid == "zigzag" else _firesim(target, task, c, row)
        if fid == "zigzag":
            took = time.perf_counter() - start
            m = replace(m, cost_s=took, run_s=took)
            target._stats["run_phase_s"] += m.cost_s
        out.append(replace(m, fidelity=fid))
    return out


def _valid(target, task: Task, config, cycles: float) -> Measurement:
    latency = cycles / target.settings.clock_hz
    return Measurement.timed(task.id, config, latency, gflops=task.flops / latency / 1e9)


def _zigzag(target, task: Task, config, row) -> Measurement:
    r = evaluate_row(row, target.settings)
    if "not_expressible" in r:
        return Measurement(task.id, config, Outcome.INFEASIBLE, error=f"ZigZag: {r['not_expressible']}")
    if not r["fits"]:
        return Measurement(task.id, config, Outcome.INFEASIBLE, error="does not fit: ZigZag's utilization of a buffer > 1")
    return _valid(target, task, config, r["cycles"])


def _firesim(target, task: Task, config, row) -> Measurement:
    if row.firesim_cycles is None:
        return Measurement(task.id, config, Outcome.RUN_ERROR, error=f"FireSim: no measurement (dataset.csv row "
                                                               f"{row.index + 2}: target.gemmini_cycle is not a positive number)")
    return _valid(target, task, config, row.firesim_cycles)


def check(target, task: Task, config) -> tuple[bool | None, str]:
    """The replay re-derived: dataset.csv read again (sha256 checked), the config's row found by its layer
    and accelerator, its mapping string parsed again to this very config and its FireSim cycles the same."""
    if not _listed(task, config):
        return False, f"not a recorded mapping of DOSA layer {task.mod.number}"
    old = task.mod.space_rows[config.index][0]
    new = read_rows()[old.index]
    same_hw = (new.layer, new.accumulator_kib, new.scratchpad_kib) == (old.layer, old.accumulator_kib, old.scratchpad_kib)
    again = to_config(new, mapspace_of(new, target.settings))
    hw_digits = task.space.digits(config.index)[:len(HW_KNOBS)]
    same = same_hw and not isinstance(again, str) and \
        task.space.digits(config.index) == hw_digits + task.mod.mapspace.space.digits(again.index) and \
        new.firesim_cycles == old.firesim_cycles
    return same, (f"dataset.csv row {new.index + 2} read again: {new.mapping!r} on accumulator {new.accumulator_kib:g} KiB, "
                  f"scratchpad {new.scratchpad_kib:g} KiB, FireSim {new.firesim_cycles} cycles; same config: {same}")


def best_metrics(target, task: Task, best: Measurement) -> dict[str, float]:
    """The best row's cycles (FireSim, ZigZag, Timeloop), Gemmini's own tiling of the layer on the same
    accelerator (``gemmini_auto_cycles``) and the best over the layer's accelerators, the layer's best recorded
    FireSim cycles (``regret`` = the best's over it)."""
    row = task.mod.space_rows[best.config.index][0]
    out: dict[str, float] = {}
    if row.firesim_cycles is not None:
        out["firesim_cycles"] = row.firesim_cycles
    z = evaluate_row(row, target.settings)
    if "cycles" in z:
        out["zigzag_cycles"] = z["cycles"]
    if row.timeloop_cycles is not None:
        out["timeloop_cycles"] = row.timeloop_cycles
    if row.firesim_auto_cycles is not None:
        out["gemmini_auto_cycles"] = row.firesim_auto_cycles
        if row.firesim_cycles is not None:
            out["speedup_over_gemmini_auto"] = row.firesim_auto_cycles / row.firesim_cycles
    autos = [r.firesim_auto_cycles for r in task.mod.rows if r.firesim_auto_cycles is not None]
    if autos:
        out["layer_gemmini_auto_best_cycles"] = min(autos)
    measured = [r.firesim_cycles for r, _ in task.mod.space_rows if r.firesim_cycles is not None]
    if measured and row.firesim_cycles is not None:
        out["layer_best_firesim_cycles"] = min(measured)
        out["regret"] = row.firesim_cycles / min(measured)
    return out


def run_metrics(rows: list[tuple[Task, dict[str, float]]]) -> dict[str, float]:
    """Over the tasks: FireSim cycles of the bests summed, Gemmini's own tiling on the same accelerators summed,
    their ratio, and the regrets' geometric mean."""
    both = [r for _, r in rows if "firesim_cycles" in r and "gemmini_auto_cycles" in r]
    regrets = [r["regret"] for _, r in rows if "regret" in r]
    out = {}
    if both:
        fs, auto = sum(r["firesim_cycles"] for r in both), sum(r["gemmini_auto_cycles"] for r in both)
        out.update(firesim_cycles_total=fs, gemmini_auto_cycles_total=auto, speedup_over_gemmini_auto=auto / fs)
    if regrets:
        out["regret_geomean"] = math.exp(sum(math.log(x) for x in regrets) / len(regrets))
    return out


def nominal_fields(settings) -> dict:
    """The :class:`~tunebench.targets.base.TargetInfo` fields of ``target=accel`` with this model."""
    return {"objectives": OBJECTIVES, "fidelities": FIDELITIES, "scale": None, "reference_point": None,
            "details": {**details([], []), "clock_hz": settings.clock_hz}}


__all__ = ["FIDELITIES", "OBJECTIVES", "WORKLOAD", "DosaLayer", "best_metrics", "check", "check_dosa_model",
           "dosa_layers", "is_dosa", "load_dosa_tasks", "measure", "nominal_fields", "run_metrics"]
