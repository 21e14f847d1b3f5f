"""Glimpse's training data: measured configs grouped by (task, hardware), from earlier runs' record folders
(the run store the GAT training set reads), and static validity labels of GPU configs.

A :class:`Group` is one task on one hardware: its layer, its hardware (family, name, raw features), the
knobs, and per config the entity index of each knob, its normalized throughput (0 = invalid) and validity.
The hardware of a run comes from its ``config.yaml``: ``target.kind=llvm`` with ``target.mcpu``
(``native``: this machine's CPU model) and ``target.num_cores`` (null: this machine's CPU count).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np
import yaml

from tunebench.errors import UserError
from tunebench.methods.tensor_programs.glimpse.blueprint import Hardware, hardware_of
from tunebench.methods.tensor_programs.glimpse.encoding import entities_of_value, gather, value_features
from tunebench.record_file import read_records
from tunebench.run_lookup import local_run_folder

log = logging.getLogger(__name__)


@dataclass
class Group:
    """One task on one hardware (see the module docstring). ``y`` is None for validity-only groups."""

    hw: Hardware
    task_id: str
    kind: str
    shape: dict
    flops: int
    knobs: list[str]
    entities: list[list]  # per knob, its values
    digits: np.ndarray  # (n_configs, n_knobs) entity index per knob
    valid: np.ndarray  # (n_configs,) bool
    y: np.ndarray | None = None  # (n_configs,) throughput / the group's best, 0 when invalid
    feats: list[np.ndarray] = field(default_factory=list)  # per knob: (n_entities, dim) value features

    def __post_init__(self) -> None:
        self.feats = [np.array([value_features(v) for v in ents], dtype=np.float32) for ents in self.entities]

    def config_vectors(self) -> np.ndarray:
        """Every config's concatenated value features (the surrogate's input)."""
        return gather(self.feats, self.digits)


def group_from_values(hw: Hardware, task: dict, values: list[dict], valid: list[bool],
                      gflops: list[float] | None) -> Group | None:
    """A group from configs' knob values (``values``: knob -> value dicts of one task, same knobs)."""
    if not values:
        return None
    knobs = list(values[0])
    entities = []
    for k in knobs:
        seen = sorted({_key(v[k]) for v in values if k in v})
        entities.append(entities_of_value(values[0][k], [_unkey(s) for s in seen]))
    index = [{_key(e): i for i, e in enumerate(ents)} for ents in entities]
    rows, keep = [], []
    for j, v in enumerate(values):
        try:
            rows.append([index[i][_key(v[k])] for i, k in enumerate(knobs)])
            keep.append(j)
        except KeyError:  # a config of other knobs, or a value outside its axis: not of this space
            continue
    if not rows:
        return None
    ok = np.array([bool(valid[j]) for j in keep])
    y = None
    if gflops is not None:
        g = np.array([float(gflops[j]) if ok[i] else 0.0 for i, j in enumerate(keep)])
        y = g / g.max() if g.max() > 0 else g
    return Group(hw, str(task["task_id"]), str(task.get("kind", "")), dict(task.get("shape") or {}),
                 int(task.get("flops") or 0), knobs, entities, np.array(rows, dtype=np.int64), ok, y)


def _key(v):
    return tuple(v) if isinstance(v, list) else v


def _unkey(v):
    return list(v) if isinstance(v, tuple) else v


def run_hardware(run_dir: str) -> Hardware:
    """The hardware a run measured on, from its ``config.yaml`` (see the module docstring)."""
    path = os.path.join(run_dir, "config.yaml")
    try:
        with open(path) as fh:
            target = (yaml.safe_load(fh) or {}).get("target") or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"--records {run_dir}: no readable config.yaml ({exc})") from None
    if target.get("kind") != "llvm":
        raise UserError(f"--records {run_dir}: a target={target.get('kind')} run; measured training data comes "
                        "from target=llvm runs (GPU validity data: --gpu-static)")
    from tunebench.methods.tensor_programs.glimpse.cpu_specs import cpu_target

    mcpu = cpu_target().cpu_model(target.get("mcpu") or "native")
    return hardware_of({"kind": "llvm", "mcpu": mcpu, "num-cores": int(target.get("num_cores") or os.cpu_count())})


def groups_from_runs(refs: list[str], workdir: str = ".") -> list[Group]:
    """One group per (task, run) of the runs ``refs`` (run folders, record files or run ids under
    ``<workdir>/records``). Records of a MetaSchedule trace (no knob values) are left out."""
    groups = []
    for ref in refs:
        run_dir = local_run_folder(ref, workdir)
        if run_dir is None:
            raise UserError(f"--records {ref}: no such run folder, record file or run id under {workdir}/records")
        hw = run_hardware(run_dir)
        by_task: dict[str, list[dict]] = {}
        for rec in read_records(os.path.join(run_dir, "records.jsonl")):
            if isinstance(rec.get("config"), dict) and rec["config"] and "trace" not in rec["config"]:
                by_task.setdefault(rec["task_id"], []).append(rec)
        for tid, recs in by_task.items():
            task = {"task_id": tid, "kind": recs[0].get("task_kind"), "shape": recs[0].get("shape"),
                    "flops": recs[0].get("flops")}
            g = group_from_values(hw, task, [r["config"] for r in recs], [bool(r.get("valid")) for r in recs],
                                  [float(r.get("gflops") or 0.0) for r in recs])
            if g is not None:
                groups.append(g)
    if not groups:
        raise UserError(f"--records {' '.join(refs)}: no knob-space measurements found")
    return groups


def summary(groups: list[Group]) -> dict:
    """What a training set holds: hardware, tasks, configs, invalid ones."""
    return {"hardware": sorted({g.hw.name for g in groups}), "groups": len(groups),
            "tasks": len({g.task_id for g in groups}), "configs": int(sum(len(g.valid) for g in groups)),
            "invalid": int(sum(int((~g.valid).sum()) for g in groups)),
            "measured_groups": sum(g.y is not None for g in groups)}
