"""Recorded FPGA design spaces (docs/USAGE.md §Recorded FPGA design spaces): designs measured by others,
shipped in the table form of :mod:`tunebench.targets.fpga.table` under ``data/fpga_recorded/`` and replayed
by ``target=table`` as ``model=machsuite_<kernel>`` / ``model=spector_<kernel>``.

The space is the recorded designs (a :class:`~tunebench.listed_space.ListedSpace` over the knobs the
source encodes, each knob's values sorted); the fidelities are the stages the source reports. Every file
is checked against its sha256 in ``MANIFEST.json`` before it is read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from functools import cache

import numpy as np
import pandas as pd

from tunebench.errors import UserError
from tunebench.listed_space import ListedSpace
from tunebench.resources import data_dir
from tunebench.search_space import ChoiceKnob
from tunebench.task import Task

ROOT = data_dir("fpga_recorded")
MANIFEST = os.path.join(ROOT, "MANIFEST.json")
NON_KNOBS = ("index", "sample")
#: the device capacity of each data set's models on target=table (a knob left at the table's default takes
#: it; objectives: the manifest's ``default_objectives`` per model)
DATASET_DEFAULTS = {
    "machsuite": {"capacity": {"luts": 303600, "ffs": 607200, "dsps": 2800, "brams": 2060}},  # XC7VX485T
    "spector": {"capacity": {"alms": 234720, "brams": 2560, "dsps": 256}},  # 5SGXEA7 (DE5)
}
REFERENCE = 1.1  # normalized reference point per objective (objectives scaled by the kernel's largest value)


@cache
def manifest() -> dict:
    """The shipped manifest: origin per data set and per model its file, sha256, fidelities, objectives."""
    if not os.path.exists(MANIFEST):
        raise UserError(f"{MANIFEST} is missing (reinstall tunebench or run scripts/convert_fpga_recorded.py)")
    with open(MANIFEST) as f:
        return json.load(f)


def recorded_names() -> list[str]:
    """Every recorded model's name (``machsuite_<kernel>``, ``spector_<kernel>``)."""
    return sorted(manifest()["models"])


def entry(name: str) -> dict:
    """The manifest entry of model ``name``; an unknown one raises :class:`UserError` naming the valid ones."""
    models = manifest()["models"]
    if name not in models:
        raise UserError(f"model.kernel={name!r} is not a recorded design space; valid: {', '.join(sorted(models))}")
    return models[name]


def table_path(name: str) -> str:
    return os.path.join(ROOT, entry(name)["file"])


def verify(name: str) -> str:
    """The path of ``name``'s table after checking it exists and its sha256 is the manifest's."""
    path, want = table_path(name), entry(name)["sha256"]
    if not os.path.exists(path):
        raise UserError(f"recorded table {path} of model {name} is missing (reinstall tunebench)")
    with open(path, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != want:
        raise UserError(f"recorded table {path} of model {name} was changed: sha256 {got[:12]}, the manifest "
                        f"has {want[:12]} (restore it or rerun scripts/convert_fpga_recorded.py)")
    return path


@cache
def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(verify(name), keep_default_na=False, na_values=[""], dtype=str)


def knob_columns(df: pd.DataFrame) -> list[str]:
    """The knob columns: those before the first ``<fidelity>.<x>`` column, less ``index`` and ``sample``."""
    out = []
    for c in df.columns:
        if "." in c:
            break
        if c not in NON_KNOBS:
            out.append(c)
    return out


def _entities(values) -> list:
    """A knob's distinct values in order: numbers ascending (as ints or floats), then the rest sorted."""
    def num(v):
        try:
            x = float(v)
        except ValueError:
            return None
        if not math.isfinite(x):
            return None
        return int(x) if x.is_integer() and "." not in v else x
    nums = sorted({num(v) for v in values if num(v) is not None})
    return nums + sorted({v for v in values if num(v) is None})


def recorded_space(df: pd.DataFrame) -> ListedSpace:
    """The space of the recorded designs: row i of ``df`` is config i."""
    knobs, digits = [], []
    for c in knob_columns(df):
        ents = _entities(df[c].tolist())
        knobs.append(ChoiceKnob(c, tuple(ents)))
        pos = {str(e): j for j, e in enumerate(ents)}
        digits.append([pos[v] for v in df[c]])
    space = ListedSpace(knobs, zip(*digits))
    if space.size != len(df):
        raise UserError(f"a recorded table repeats a design ({len(df)} rows, {space.size} distinct)")
    return space


def recorded_task(name: str, target_kind: str) -> Task:
    """The one task of model ``name``: ``mod`` = {name, dataset, table}, its space the recorded designs."""
    e = entry(name)
    df = _read(name)
    key = json.dumps({"recorded": name, "sha256": e["sha256"]}, sort_keys=True)
    tid = hashlib.sha256(key.encode()).hexdigest()[:16]
    t = Task(id=tid, name=name, kind="fpga_recorded",
             mod={"name": name, "dataset": dataset_of(name), "table": table_path(name)},
             shape={}, flops=0, weight=1, target_kind=target_kind)
    t.space = recorded_space(df)
    return t


def dataset_of(name: str) -> str:
    return name.split("_", 1)[0]


def kernel_scale(name: str, objectives: list[str], fidelity: str) -> dict[str, float]:
    """Each objective's largest recorded value at ``fidelity`` (the one the fronts are measured at): the
    normalization of a recorded model, so that every design lies within [0, 1] there."""
    df = _read(name)
    out = {}
    for o in objectives:
        col = f"{fidelity}.{o}"
        vals = pd.to_numeric(df[col], errors="coerce") if col in df.columns else pd.Series([], dtype=float)
        top = float(np.nanmax(vals)) if vals.notna().any() else 1.0
        out[o] = top if math.isfinite(top) and top > 0 else 1.0
    return out


def check_settings(name: str, fidelities: list[str], objectives: list[str]) -> None:
    """Every asked fidelity is a stage ``name`` records and every objective is recorded at each of them."""
    e = entry(name)
    for f in fidelities:
        if f not in e["fidelities"]:
            raise UserError(f"target.fidelities={fidelities}: {name} has no fidelity {f!r}; valid: "
                            f"{', '.join(e['fidelities'])}")
        for o in objectives:
            if o not in e["objectives"][f]:
                raise UserError(f"target.objectives={objectives}: {name} records no {o!r} at {f}; valid there: "
                                f"{', '.join(e['objectives'][f])}")


def adopt(settings, name: str):
    """``settings`` (TableSettings) with the recorded model's defaults where a knob is left at the table's
    own default: its data set's fidelities, the model's default objectives, the device's capacity, each
    objective's largest value at the top fidelity as its scale and a reference point of 1.1 per objective. The result is checked against the data set (:func:`check_settings`)."""
    base = type(settings)()
    d = DATASET_DEFAULTS[dataset_of(name)]
    change = {}
    if settings.fidelities == base.fidelities:
        change["fidelities"] = list(entry(name)["fidelities"])
    if settings.objectives == base.objectives:
        change["objectives"] = list(entry(name)["default_objectives"])
    objectives = change.get("objectives", settings.objectives)
    top = change.get("fidelities", settings.fidelities)[-1]
    if settings.capacity == base.capacity:
        change["capacity"] = dict(d["capacity"])
    if settings.scale == base.scale or any(o not in settings.scale for o in objectives):
        given = {} if settings.scale == base.scale else dict(settings.scale)
        change["scale"] = {**kernel_scale(name, objectives, top), **given}
    if settings.reference_point == base.reference_point:
        change["reference_point"] = [REFERENCE] * len(objectives)
    out = dataclasses.replace(settings, **change)
    check_settings(name, out.fidelities, out.objectives)
    missing = [o for o in out.objectives if o not in out.scale]
    if missing:
        raise UserError(f"target.scale={out.scale}: needs a scale for the objective(s) {', '.join(missing)}")
    if len(out.reference_point) != len(out.objectives):
        raise UserError(f"target.reference_point={out.reference_point}: needs one value per objective "
                        f"{out.objectives}")
    return out
