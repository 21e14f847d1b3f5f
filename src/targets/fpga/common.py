"""Pieces shared by the FPGA targets (fpga_open, table, vivado): config checks, objectives,
the per-task stage cache that decides which tool seconds a measurement is charged, and the
measure loop of the targets that run tools (:class:`ToolFlowTarget`)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from abc import abstractmethod

from tunebench.errors import UserError
from tunebench.targets.base import Target
from tunebench.targets.fpga.settings import OBJECTIVE_UNITS, STAGES, FPGASettings  # noqa: F401  (re-exported)
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)

TOOL_STAGES = ("estimate", "sim", "synth", "impl")  # what runs (sim = functional check before synth)


def stage_chain(fidelity: str) -> list[str]:
    """Tool stages a measurement at ``fidelity`` needs, in order (impl needs synth's netlist)."""
    return ["estimate"] if fidelity == "estimate" else ["sim", "synth", "impl"][:2 + (fidelity == "impl")]


def tool_flow_chain(fidelity: str) -> list[str]:
    """Tool stages a report at ``fidelity`` needs in a flow where each stage starts from the one before
    (HLS, then synthesis, then implementation; an OpenCL compile's estimate, then its fit): a recorded
    flow's costs (docs/USAGE.md §Recorded FPGA design spaces)."""
    order = ["estimate", "synth", "impl"]
    return order[:order.index(fidelity) + 1] if fidelity in order else [fidelity]


def cumulative_costs(stage_means: dict[str, float], fidelities, chain) -> dict[str, float] | None:
    """T_f per fidelity: the summed mean seconds of the stages ``chain(f)`` runs from scratch; None
    when a needed stage has no mean."""
    out = {}
    for f in fidelities:
        stages = chain(f)
        if any(s not in stage_means for s in stages):
            return None
        out[f] = float(sum(stage_means[s] for s in stages))
    return out


def table_stage_means(df) -> dict[str, float]:
    """Mean recorded seconds per tool stage of a design-space table (rows that ran the stage)."""
    out = {}
    for s in TOOL_STAGES:
        col = f"{s}.tool_s"
        if col in df.columns:
            ran = df[col][df[col] > 0]
            if len(ran):
                out[s] = float(ran.mean())
    return out


class FPGATargetBase(Target):
    """What the FPGA targets share: their settings (:class:`~.settings.FPGASettings`: fidelities,
    objectives, capacity, scales, reference point), tasks from an FPGA kernel model, the output check
    (:class:`~tunebench.targets.capabilities.ChecksOutputs`: done in simulation when a design is generated).
    Subclasses implement ``measure``."""

    Settings = FPGASettings
    workloads = ("hls_kernel",)

    def __init__(self, settings: FPGASettings):
        super().__init__()
        self.apply_settings(settings)

    def apply_settings(self, settings: FPGASettings) -> None:
        """Take the fidelities, objectives, capacity, scales and reference point of ``settings``."""
        self.settings = settings
        self.name = settings.name
        self.fidelities = list(settings.fidelities)
        self.objectives = list(settings.objectives)
        self.capacity = dict(settings.capacity)
        self.scale = [float(settings.scale.get(o, 1.0)) for o in self.objectives]  # a recorded model sets it later
        self.reference_point = [float(v) for v in settings.reference_point]
        self.batch_size = int(settings.batch_size)

    def load_tasks(self, model, own_schedules: bool = False) -> tuple[list[Task], None]:
        """The kernel's one task, its space the kernel's pruned directive space."""
        from tunebench.targets.fpga.tasks import fpga_tasks

        return fpga_tasks(model, self.kind), None

    def fidelity_of(self, fidelity: str | None) -> str:
        f = fidelity or self.fidelities[-1]
        if f not in self.fidelities:
            raise UserError(f"fidelity={f!r} is unknown for target {self.name}; valid: {', '.join(self.fidelities)}")
        return f

    def objective_values(self, m: dict) -> dict:
        out = {}
        for o in self.objectives:
            out[o] = m["cycles"] / (m["fmax_mhz"] * 1e6) if o == "delay_s" else float(m[o])
        return out

    def info_fields(self, task: Task | None = None) -> dict:
        """The hypervolume reference point, the objectives' scales, the device capacity and the
        target's own details (:meth:`details`); of a task, the fidelities' costs (:meth:`fidelity_costs`)."""
        costs = self.fidelity_costs(task) if task is not None else None
        return {**super().info_fields(task), **({"fidelity_costs": costs} if costs else {}), "reference_point": tuple(self.reference_point),
                "scale": dict(zip(self.objectives, self.scale)), "capacity": dict(self.capacity),
                "details": self.details()}

    def details(self) -> dict:
        """What the target adds to its description (device, tools, table); none here."""
        return {}

    def fidelity_costs(self, task) -> dict[str, float] | None:
        """Seconds to a report at each fidelity from scratch (``TargetInfo.fidelity_costs``); None here."""
        return None

    def check(self, task, config):
        return True, "checked in simulation when generated (tests/targets/test_fpga_generator.py)"


class ToolFlowTarget(FPGATargetBase):
    """An FPGA target that runs tools (fpga_open, vivado): a work directory for the run (``workdir``
    from the config, kept; else a temporary one, removed on ``close``), the tools' timeouts, and the
    per-config stage results of this run (``_results``) so a later fidelity reuses earlier stages."""

    tmp_prefix = "tunebench-fpga-"

    def __init__(self, settings):
        super().__init__(settings)
        self.timeouts = dict(settings.timeout_s)
        self._workroot = settings.workdir
        self._tmp = None
        self._results: dict = {}
        self._stage_seconds: dict[str, list[float]] = {}  # every stage run so far: the running means

    def fidelity_costs(self, task) -> dict[str, float] | None:
        """The running means of the stages this target has run; before every stage has run, the
        recorded seconds of the kernel's shipped table (:meth:`recorded_stage_means`), else None."""
        means = {s: sum(v) / len(v) for s, v in self._stage_seconds.items() if v}
        costs = cumulative_costs(means, self.fidelities, self.stage_chain)
        if costs is None:
            costs = cumulative_costs(self.recorded_stage_means(task), self.fidelities, self.stage_chain)
        return costs

    def recorded_stage_means(self, task) -> dict[str, float]:
        """Stage seconds recorded by an earlier exhaustive run of this flow for ``task``; none here."""
        return {}

    def start(self) -> None:
        if self._tmp is None:
            self._tmp = self._workroot or tempfile.mkdtemp(prefix=self.tmp_prefix)
            os.makedirs(self._tmp, exist_ok=True)

    def close(self) -> None:
        if self._tmp and not self._workroot:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None

    # ---- the measure loop shared by the tool flows ---------------------------------------------
    @abstractmethod
    def stage_chain(self, fidelity: str) -> list[str]:
        """Tool stages a measurement at ``fidelity`` needs, in order (a flow's own names)."""

    @abstractmethod
    def run_stage(self, kernel, point: dict, wd: str, stage: str, done: dict):
        """Run one tool ``stage`` of the design ``point`` in the folder ``wd``; ``done``: this
        config's earlier stage results by stage name. Returns a :class:`tunebench.targets.fpga.flow.StageResult`."""

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        """Each config at ``fidelity`` through the flow's stages; stages already run for a config in
        this run are reused and not charged again."""
        from tunebench.targets.fpga.kernels import get_kernel

        self.start()
        fid = self.fidelity_of(fidelity)
        kernel = get_kernel(task.mod["name"])
        return [self._measure_one(task, kernel, c, fid) for c in configs]

    def _measure_one(self, task: Task, kernel, c, fid: str) -> Measurement:
        """One config at ``fid``: the stages it lacks run (stopping at an invalid one); their tool
        seconds are its cost and count as build time (``tool_s`` and ``build_phase_s``)."""
        point = c.to_dict()
        cache = self._results.setdefault((task.id, c.index), {})
        wd = os.path.join(self._tmp, task.id, str(c.index))
        stage_s: dict[str, float] = {}
        res = None
        for stage in self.stage_chain(fid):
            if stage not in cache:
                cache[stage] = self.run_stage(kernel, point, wd, stage, cache)
                stage_s[stage] = cache[stage].tool_s
                self._stage_seconds.setdefault(stage, []).append(float(cache[stage].tool_s))
            res = cache[stage]
            if not res.valid:
                break
        tool = sum(stage_s.values())
        self._stats["tool_s"] += tool
        self._stats["build_phase_s"] += tool
        if not res.valid:
            log.info("config %d at %s invalid: %s", c.index, fid, res.error)
            return Measurement(task.id, c, res.outcome, error=res.error, cost_s=tool, build_s=tool, fidelity=fid,
                               stage_s=stage_s)
        obj = self.objective_values(res.metrics)
        delay = res.metrics["cycles"] / (res.metrics["fmax_mhz"] * 1e6)
        return Measurement.ok(task.id, c, obj, delay, gflops=task.flops / delay / 1e9,
                              cost_s=tool, build_s=tool, fidelity=fid, stage_s=stage_s)
