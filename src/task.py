"""Core value types shared by datasets, targets, methods and the harness."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tunebench.search_space import Config, ScheduleConfig, Space, TraceConfig


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


#: the error text of a config a target's static check rejected (``Target.static_check``) starts with this
STATIC_INVALID = "static: "


class Outcome(Enum):
    """What became of one measured config. Every invalid kind has an error text in
    :attr:`Measurement.error`; a record on disk stores that text, not the kind (:meth:`of_error` reads it back).

    - ``OK``: measured; its objectives are in :attr:`Measurement.objectives`.
    - ``STATIC_INVALID``: the target's static check rejected it before building it (``Target.static_check``;
      error ``"static: ..."``); the loop tells the method and, within ``budget.max_static_rejects``, takes no trial.
    - ``BUILD_ERROR``: its build failed (TVM's compile, an FPGA flow's HLS / synthesis / place and route;
      ``"build: ..."``, ``"hls: ..."``, ``"synth: ..."``, ``"impl: ..."``; a recorded design that failed at a stage).
    - ``RUN_ERROR``: it built but its run failed (a crash, an exception; ``"run: ..."``, an FPGA simulation
      that raised ``"sim: ..."``).
    - ``WRONG_OUTPUT``: it ran but its result is wrong (an FPGA simulation against numpy; ``target=memory``'s
      run disagreeing with the computed peak or the original graph's outputs).
    - ``TIMEOUT``: a build or run past its time limit (``"build: timeout: ..."``, ``"synth: timeout after ..."``).
    - ``INFEASIBLE``: measured, found not to be a design the target can have: it does not fit the hardware's
      resources (``target=accel``'s utilization, an FPGA device's capacity, ``target=memory``'s
      ``capacity_bytes``) or is not one of the target's configs (not a topological order, not a design of
      the table, a mapping ZigZag refuses or DOSA did not record, a Kernel Tuner cache's ``InvalidConfig``).
    """

    OK = "ok"
    STATIC_INVALID = "static_invalid"
    BUILD_ERROR = "build_error"
    RUN_ERROR = "run_error"
    WRONG_OUTPUT = "wrong_output"
    TIMEOUT = "timeout"
    INFEASIBLE = "infeasible"

    @classmethod
    def of_error(cls, valid: bool, error: str) -> Outcome:
        """The outcome that a record's ``valid`` and ``error`` text mean: records store the text only. Every
        error text a target writes reads back as the outcome it measured (tests/test_outcome.py); a text of
        none of the kinds (a table row's failure without a reason: ``"invalid in table"``) is a run error."""
        if valid:
            return cls.OK
        return next((kind for pattern, kind in _ERROR_KINDS if pattern.match(error or "")), cls.RUN_ERROR)

    @property
    def valid(self) -> bool:
        return self is Outcome.OK


#: an invalid measurement's error text (matched at its start, first match wins) -> its outcome
_ERROR_KINDS: tuple[tuple[re.Pattern, Outcome], ...] = tuple((re.compile(p), k) for p, k in (
    (re.escape(STATIC_INVALID), Outcome.STATIC_INVALID),
    (r"(\w+: )?timeout", Outcome.TIMEOUT),  # a worker's, a tool's: "build: timeout: ...", "synth: timeout after ..."
    (r"(\w+: )?does not fit|not an order of|not a topological order|not a design of the table|ZigZag: |not a recorded mapping"
     r"|InvalidConfig$|peak \d+ B exceeds", Outcome.INFEASIBLE),
    (r"sim: output differs|measured peak|outputs differ|\d+ dropped tensors", Outcome.WRONG_OUTPUT),
    (r"(build|hls|synth|impl): |failed at |CompilationFailedConfig$", Outcome.BUILD_ERROR),
))


#: objectives that are a measurement's latency (``delay_s``: an FPGA design's cycles / fmax)
LATENCY_OBJECTIVES = ("latency_s", "delay_s")


@dataclass(frozen=True)
class Measurement:
    """The result of measuring one config of one task; immutable (the loop adds the trial number and
    the search clock with :func:`dataclasses.replace`).

    Attributes:
        task_id: the task measured.
        config: the config measured: knob values (:class:`Config`), a schedule trace
            (:class:`TraceConfig`, MetaSchedule-based methods) or a graph's execution order
            (:class:`ScheduleConfig`, ``target=memory``).
        outcome: what became of it (:class:`Outcome`); :attr:`valid` when ``OK``.
        objectives: objective name -> value in raw units (all minimized) at ``fidelity``; empty unless
            valid. TVM targets: ``{"latency_s": ...}`` (:meth:`timed`); FPGA targets: the names in the
            target's ``objectives`` list (e.g. delay_s, luts, ffs). Each measured value is stored once:
            :attr:`latency_s` reads it from here.
        unscored_latency_s: the latency in seconds of a target that measures one that is not among its
            objectives (``target=accel`` minimizing energy, an FPGA target without ``delay_s``); ``inf`` else.
        latency_std_s: standard deviation of the repeats in seconds.
        gflops: ``task.flops / latency_s / 1e9``; 0 when invalid.
        error: the error text of an invalid measurement ("" when valid); records store it (not the
            outcome), and :meth:`Outcome.of_error` reads the outcome back from it.
        build_s: seconds spent building; run_s: seconds spent on the device.
        cost_s: seconds charged to the search clock for this measurement.
        search_s: the task's search clock (seconds since the task started) when it arrived.
        trial: 0-based trial number within the task (-1 until the loop counts it).
        fidelity: the fidelity measured at (TVM targets have one: "hw"; FPGA targets
            "estimate", "synth" or "impl").
        timestamp: wall-clock time (Unix seconds) when it was made.
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
    outcome: Outcome
    objectives: dict = field(default_factory=dict)
    unscored_latency_s: float = float("inf")
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
    stage_s: dict = field(default_factory=dict)
    latency_min_s: float = float("inf")
    noisy: bool = False
    noise: dict = field(default_factory=dict)
    device: str = ""

    def __post_init__(self):
        if not isinstance(self.outcome, Outcome):
            raise TypeError(f"Measurement.outcome={self.outcome!r}: must be an Outcome")
        if self.objectives and not self.valid:
            raise ValueError(f"an invalid measurement ({self.outcome.value}) has no objectives: {self.objectives}")
        if math.isfinite(self.unscored_latency_s) and any(n in self.objectives for n in LATENCY_OBJECTIVES):
            raise ValueError("the latency is stored once: unscored_latency_s is for a latency that is no objective")
        for name in ("objectives", "stage_s", "noise"):  # its own copies: no one else's dict changes it
            object.__setattr__(self, name, dict(getattr(self, name)))

    @classmethod
    def ok(cls, task_id: str, config, objectives: dict, latency_s: float = float("inf"), **fields) -> Measurement:
        """A valid measurement of ``objectives``; ``latency_s``, where the target measures one, is kept
        (as :attr:`unscored_latency_s`) only when no objective holds it."""
        held = any(n in objectives for n in LATENCY_OBJECTIVES)
        return cls(task_id, config, Outcome.OK, objectives=objectives,
                   unscored_latency_s=float("inf") if held else latency_s, **fields)

    @classmethod
    def timed(cls, task_id: str, config, latency_s: float, **fields) -> Measurement:
        """A valid measurement whose one objective is its latency (the TVM targets, replay)."""
        return cls(task_id, config, Outcome.OK, objectives={"latency_s": latency_s}, **fields)

    @property
    def valid(self) -> bool:
        """Measured (:attr:`Outcome.OK`): False when it failed validation, build or run (see ``error``)."""
        return self.outcome is Outcome.OK

    @property
    def latency_s(self) -> float:
        """Run time in seconds (the median or mean of the repeats, as configured): the objective
        ``latency_s`` (or an FPGA design's ``delay_s``), else :attr:`unscored_latency_s`; ``inf`` when invalid."""
        if not self.valid:
            return float("inf")
        name = next((n for n in LATENCY_OBJECTIVES if n in self.objectives), None)
        return self.unscored_latency_s if name is None else self.objectives[name]

    @property
    def score(self) -> float:
        """What a one-objective search minimizes: the measurement's only objective (``latency_s`` on
        targets that time kernels; e.g. ``energy_pj_per_mac`` on ``target=accel``), else ``latency_s``."""
        if len(self.objectives) == 1:
            return float(next(iter(self.objectives.values())))
        return self.latency_s if self.valid else float("inf")

    def to_record(self) -> dict:
        """One JSON-serializable record line."""
        lat = self.latency_s
        return {"task_id": self.task_id, "trial": self.trial, "index": self.config.index,
                "config": self.config.to_dict(), "valid": self.valid,
                "latency_s": lat if self.valid and math.isfinite(lat) else None,
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
        """The measurement of a record line (:meth:`to_record`; older lines too: without ``objectives``, a
        valid record's latency is its one objective). Its outcome is read from ``valid`` and ``error``."""
        valid = bool(rec["valid"])
        lat = rec.get("latency_s")
        lat = float(lat) if lat is not None else float("inf")
        objectives = {k: float(v) for k, v in (rec.get("objectives") or {}).items()} if valid else {}
        if valid and not objectives and lat != float("inf"):
            objectives = {"latency_s": lat}
        unscored = lat if valid and not any(n in objectives for n in LATENCY_OBJECTIVES) else float("inf")
        return cls(task_id=rec["task_id"], config=_record_config(rec, space),
                   outcome=Outcome.of_error(valid, rec.get("error", "")), objectives=objectives,
                   unscored_latency_s=unscored,
                   latency_std_s=rec.get("latency_std_s", 0.0), gflops=rec.get("gflops", 0.0),
                   error=rec.get("error", ""), build_s=rec.get("build_s", 0.0), run_s=rec.get("run_s", 0.0),
                   cost_s=rec.get("cost_s", 0.0), search_s=rec.get("search_s", 0.0),
                   trial=int(rec["trial"]), fidelity=rec.get("fidelity", "hw"),
                   timestamp=rec.get("timestamp", 0.0),
                   stage_s={k: float(v) for k, v in (rec.get("stage_s") or {}).items()},
                   latency_min_s=float(rec["latency_min_s"]) if rec.get("latency_min_s") is not None else float("inf"),
                   noisy=bool(rec.get("noisy", False)), noise=dict(rec.get("noise") or {}),
                   device=str(rec.get("device", "")))


def _record_config(rec: dict, space: Space) -> Config | TraceConfig | ScheduleConfig:
    """The config a record line names, checked against ``space`` when it is a knob config."""
    if "trace" in rec["config"]:
        return TraceConfig(int(rec["index"]), json.dumps(rec["config"]["trace"], separators=(",", ":")))
    if "order" in rec["config"]:
        return ScheduleConfig.from_dict(rec["index"], rec["config"])
    cfg = space.get(int(rec["index"]))
    if cfg.to_dict() != rec["config"]:
        raise ValueError(f"record of task {rec['task_id']} trial {rec['trial']}: index {rec['index']} "
                         "does not match its config in this space")
    return cfg
