"""Core value types shared by datasets, targets, methods and the harness."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from tunebench.space import Config, ScheduleConfig, Space, TraceConfig


@dataclass
class Task:
    """One tunable unit of a model.

    Attributes:
        id: stable id, a hash of the workload and the target kind (same in every process).
        name: readable name, e.g. ``"fused_conv2d_add_relu"``.
        kind: ``"conv2d"``, ``"depthwise_conv2d"`` or ``"dense"``.
        mod: the workload, a ``tvm.IRModule`` holding one PrimFunc ``"main"`` (fused ops included).
        shape: the main operator's shape parameters (conv2d: batch, in_channels, height, width,
            out_channels, kernel, stride, padding, groups; dense: batch, in_features, out_features).
        flops: floating-point operations of the main operator (2 x multiply-accumulates).
        weight: how many times this workload occurs in the model.
        target_kind: ``"llvm"`` or ``"cuda"``; the space depends on it.
        template: the template variant the space comes from (``target.template``; ``""`` before a
            space is attached, and for FPGA kernels).
        space: the knob space of this task on that target (set by the template).
    """

    id: str
    name: str
    kind: str
    mod: Any
    shape: dict
    flops: int
    weight: int = 1
    target_kind: str = "llvm"
    space: Space | None = None
    template: str = ""

    def summary(self) -> dict:
        return {"id": self.id, "name": self.name, "kind": self.kind, "shape": self.shape,
                "flops": self.flops, "weight": self.weight, "target_kind": self.target_kind,
                "template": self.template or None,
                "space_size": self.space.size if self.space is not None else None}


@dataclass
class Measurement:
    """The result of measuring one config of one task.

    Attributes:
        task_id: the task measured.
        config: the config measured: knob values (:class:`Config`), a schedule trace
            (:class:`TraceConfig`, MetaSchedule-based methods) or a graph's execution order
            (:class:`ScheduleConfig`, ``target=memory``).
        valid: False when the config failed validation, build or run (see ``error``).
        latency_s: median (or mean, as configured) run time in seconds; ``inf`` when invalid.
        latency_std_s: standard deviation of the repeats in seconds.
        gflops: ``task.flops / latency_s / 1e9``; 0 when invalid.
        error: the error text for an invalid measurement ("" when valid).
        build_s: seconds spent building; run_s: seconds spent on the device.
        cost_s: seconds charged to the search clock for this measurement.
        search_s: the task's search clock (seconds since the task started) when it arrived.
        trial: 0-based trial number within the task.
        fidelity: the fidelity measured at (TVM targets have one: "hw"; FPGA targets
            "estimate", "synth" or "impl").
        timestamp: wall-clock time (Unix seconds) when it arrived.
        objectives: objective name -> value in raw units (all minimized) at ``fidelity``; empty when
            invalid. TVM targets: ``{"latency_s": latency_s}`` (filled in automatically); FPGA
            targets: the names in the target's ``objectives`` list (e.g. delay_s, luts, ffs).
        stage_s: tool seconds per stage run for this measurement, e.g. ``{"synth": 4.1, "impl": 2.0}``
            (FPGA targets; empty for TVM).
        latency_min_s: the fastest repeat (TVM targets; ``inf`` when invalid or unknown).
        noisy: the timing stayed noisy after re-measuring (:mod:`tunebench.protocol.noise`); its
            latency is kept but marked.
        noise: the signals it was judged on: ``cv`` of the repeats, ``foreign_cpu`` (cores other
            processes used meanwhile), ``attempts`` (timings taken), ``reasons`` (when noisy).
        device: which device measured it, where a target has several (the RPC server's
            ``host:port`` with ``target.rpc``); "" for a local device.
    """

    task_id: str
    config: Config | TraceConfig | ScheduleConfig
    valid: bool
    latency_s: float = float("inf")
    latency_std_s: float = 0.0
    gflops: float = 0.0
    error: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    cost_s: float = 0.0
    search_s: float = 0.0
    trial: int = -1
    fidelity: str = "hw"
    timestamp: float = field(default_factory=time.time)
    objectives: dict = field(default_factory=dict)
    stage_s: dict = field(default_factory=dict)
    latency_min_s: float = float("inf")
    noisy: bool = False
    noise: dict = field(default_factory=dict)
    device: str = ""

    def __post_init__(self):
        if self.valid and not self.objectives and self.latency_s != float("inf"):
            self.objectives = {"latency_s": self.latency_s}
        if not self.valid:
            self.objectives = {}

    @property
    def score(self) -> float:
        """What a one-objective search minimizes: the measurement's only objective (``latency_s`` on
        targets that time kernels; e.g. ``energy_pj_per_mac`` on ``target=accel``), else ``latency_s``."""
        if len(self.objectives) == 1:
            return float(next(iter(self.objectives.values())))
        return self.latency_s if self.valid else float("inf")

    def to_record(self) -> dict:
        """One JSON-serializable record line."""
        return {"task_id": self.task_id, "trial": self.trial, "index": self.config.index,
                "config": self.config.to_dict(), "valid": self.valid,
                "latency_s": self.latency_s if self.valid and math.isfinite(self.latency_s) else None,
                "latency_std_s": self.latency_std_s, "gflops": self.gflops, "error": self.error,
                "build_s": round(self.build_s, 6), "run_s": round(self.run_s, 6),
                "cost_s": round(self.cost_s, 6), "search_s": round(self.search_s, 6),
                "fidelity": self.fidelity, "timestamp": self.timestamp,
                "objectives": dict(self.objectives) if self.valid else {},
                "stage_s": {k: round(v, 6) for k, v in self.stage_s.items()},
                "latency_min_s": self.latency_min_s if self.valid and self.latency_min_s != float("inf") else None,
                "noisy": self.noisy, "noise": dict(self.noise), **({"device": self.device} if self.device else {})}

    @classmethod
    def from_record(cls, rec: dict, space: Space) -> Measurement:
        if "trace" in rec["config"]:
            cfg = TraceConfig(int(rec["index"]), json.dumps(rec["config"]["trace"], separators=(",", ":")))
        elif "order" in rec["config"]:
            cfg = ScheduleConfig.from_dict(rec["index"], rec["config"])
        else:
            cfg = space.get(int(rec["index"]))
            if cfg.to_dict() != rec["config"]:
                raise ValueError(f"record of task {rec['task_id']} trial {rec['trial']}: index {rec['index']} "
                                 "does not match its config in this space")
        lat = rec.get("latency_s")
        return cls(task_id=rec["task_id"], config=cfg, valid=bool(rec["valid"]),
                   latency_s=float(lat) if lat is not None else float("inf"),
                   latency_std_s=rec.get("latency_std_s", 0.0), gflops=rec.get("gflops", 0.0),
                   error=rec.get("error", ""), build_s=rec.get("build_s", 0.0), run_s=rec.get("run_s", 0.0),
                   cost_s=rec.get("cost_s", 0.0), search_s=rec.get("search_s", 0.0),
                   trial=int(rec["trial"]), fidelity=rec.get("fidelity", "hw"),
                   timestamp=rec.get("timestamp", 0.0),
                   objectives={k: float(v) for k, v in (rec.get("objectives") or {}).items()},
                   stage_s={k: float(v) for k, v in (rec.get("stage_s") or {}).items()},
                   latency_min_s=float(rec["latency_min_s"]) if rec.get("latency_min_s") is not None else float("inf"),
                   noisy=bool(rec.get("noisy", False)), noise=dict(rec.get("noise") or {}),
                   device=str(rec.get("device", "")))
