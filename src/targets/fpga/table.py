"""Design-space tables (docs/USAGE.md §FPGA design-space exploration): one CSV row per pruned config.

Columns: ``index``, one per knob (knob name), then per fidelity ``f`` and objective ``o``: ``f.o``
(raw units, empty when invalid), ``f.valid`` (0/1), ``f.error`` (text), and per tool stage ``s``:
``s.tool_s`` (seconds the stage took). Written by ``method=exhaustive``, replayed by ``target=table``.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from tunebench.errors import UserError
from tunebench.resources import data_dir
from tunebench.targets.fpga.common import TOOL_STAGES, stage_chain
from tunebench.task import Measurement, Outcome

DATA_DIR = data_dir("fpga")


def default_table(kernel: str) -> str:
    """The shipped table of ``kernel``: ``data/fpga/<kernel>.csv``, or a recorded model's
    (``data/fpga_recorded/``, checked against its sha256)."""
    from tunebench.datasets.fpga_recorded import manifest, verify

    if kernel in manifest()["models"]:
        return verify(kernel)
    return os.path.join(DATA_DIR, f"{kernel}.csv")


def shipped_table(task, fidelities: list[str], objectives: list[str]) -> pd.DataFrame | None:
    """The shipped table of ``task``'s kernel (``data/fpga/<kernel>.csv``, checked against its space);
    None when the kernel has none, or the task is no FPGA kernel (e.g. a layer's mapspace on
    ``target=accel``). A table of another space raises :class:`UserError`."""
    if not isinstance(task.mod, dict) or "name" not in task.mod:
        return None
    path = default_table(task.mod["name"])
    return read_table(path, task.space, fidelities, objectives) if os.path.exists(path) else None


def write_table(path: str, space, fidelities: list[str], objectives: list[str], measurements) -> pd.DataFrame:
    """Write the table of ``measurements`` (every config x fidelity of ``space``) to ``path``."""
    rows = {}
    for i in range(space.size):
        point = space.get(i).to_dict()
        rows[i] = {"index": i, **point}
        for f in fidelities:
            rows[i].update({f"{f}.{o}": np.nan for o in objectives})
            rows[i].update({f"{f}.valid": 0, f"{f}.error": "not measured"})
        for s in TOOL_STAGES:
            rows[i][f"{s}.tool_s"] = 0.0
    for m in measurements:
        r = rows[m.config.index]
        f = m.fidelity
        r[f"{f}.valid"] = int(m.valid)
        r[f"{f}.error"] = m.error
        for o in objectives:
            r[f"{f}.{o}"] = m.objectives.get(o, np.nan) if m.valid else np.nan
        for s, secs in m.stage_s.items():
            r[f"{s}.tool_s"] = round(float(secs), 4)
    df = pd.DataFrame([rows[i] for i in range(space.size)])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    df.to_csv(path, index=False)
    return df


def read_table(path: str, space, fidelities: list[str], objectives: list[str]) -> pd.DataFrame:
    """Load a table and check it matches ``space`` (same configs at the same indices)."""
    if not os.path.exists(path):
        raise UserError(f"target.table={path!r} does not exist (make it with method=exhaustive; see docs/USAGE.md)")
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    need = ["index", *space.names] + [f"{f}.{c}" for f in fidelities for c in (*objectives, "valid", "error")]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise UserError(f"target.table={path!r} lacks column(s) {', '.join(missing)}")
    if len(df) != space.size:
        raise UserError(f"target.table={path!r} has {len(df)} rows but the pruned space has {space.size} configs")
    for i in (0, space.size - 1):
        point = space.get(i).to_dict()
        row = {k: df.loc[i, k] for k in space.names}
        if any(str(row[k]) != str(v) for k, v in point.items()):
            raise UserError(f"target.table={path!r}: row {i} is {row}, the space has {point} there")
    df["error"] = ""
    for f in fidelities:
        col = df[f"{f}.error"]  # all-empty error columns are read as float NaN
        df[f"{f}.error"] = col.astype(object).where(col.notna(), "").astype(str)
    return df.set_index("index", drop=False)


def charge_stages(row, fidelity: str, charged: set[str], chain=stage_chain) -> dict[str, float]:
    """Tool seconds per stage that a measurement at ``fidelity`` is charged from a table row: the
    stages it needs (``chain``: the open flow's :func:`stage_chain` by default) not yet in ``charged``
    (updated), with recorded seconds > 0."""
    stage_s = {s: float(row[f"{s}.tool_s"]) for s in chain(fidelity)
               if s not in charged and f"{s}.tool_s" in row and float(row[f"{s}.tool_s"]) > 0}
    charged.update(chain(fidelity))
    return stage_s


def row_measurement(task, config, row, fidelity: str, objectives: list[str], stage_s: dict) -> Measurement:
    """The measurement a table row holds for ``config`` at ``fidelity``, charged ``stage_s`` (tool
    seconds per stage; ``cost_s`` is their sum)."""
    cost = sum(stage_s.values())
    if int(row[f"{fidelity}.valid"]) != 1:
        err = row[f"{fidelity}.error"]
        text = err if isinstance(err, str) and err else "invalid in table"
        return Measurement(task.id, config, Outcome.of_error(False, text), error=text, cost_s=cost, build_s=cost,
                           fidelity=fidelity, stage_s=stage_s)
    obj = {o: float(row[f"{fidelity}.{o}"]) for o in objectives}
    delay = obj.get("delay_s", math.inf)
    return Measurement(task.id, config, Outcome.OK,
                       gflops=task.flops / delay / 1e9 if math.isfinite(delay) else 0.0,
                       cost_s=cost, build_s=cost, fidelity=fidelity, objectives=obj, stage_s=stage_s)


def table_measurements(path: str, task, fidelities: list[str], objectives: list[str]) -> list[Measurement]:
    """The measurements stored in an earlier table, for the rows whose knob values are a config of
    ``task.space`` (matched by knob values, so a table of a smaller space counts; rows of configs this
    space prunes are left out). Each config's stage seconds are attributed as an exhaustive run charges
    them, cheapest fidelity first: ``estimate`` -> estimate, ``synth`` -> sim + synth, ``impl`` -> impl."""
    if not os.path.exists(path):
        raise UserError(f"table {path!r} does not exist")
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    space = task.space
    missing = [c for c in space.names if c not in df.columns]
    if missing:
        raise UserError(f"table {path!r} lacks knob column(s) {', '.join(missing)}")
    out = []
    for _, row in df.iterrows():
        try:
            point = space.from_dict({k: row[k].item() if hasattr(row[k], "item") else row[k] for k in space.names})
        except ValueError:
            continue
        charged: set[str] = set()
        for f in fidelities:
            if f"{f}.valid" not in row:
                continue
            out.append(row_measurement(task, point, row, f, objectives, charge_stages(row, f, charged)))
    return out


def true_front(df: pd.DataFrame, fidelity: str, objectives: list[str]) -> np.ndarray:
    """The true Pareto front (objective rows, raw units) of the valid designs at ``fidelity``."""
    from tunebench.pareto import pareto_front

    Y = df.loc[df[f"{fidelity}.valid"] == 1, [f"{fidelity}.{o}" for o in objectives]].to_numpy(dtype=float)
    return Y[pareto_front(Y)]
