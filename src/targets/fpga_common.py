"""Pieces shared by the FPGA targets (fpga_open, table, vivado): config checks, objectives,
the per-task stage cache that decides which tool seconds a measurement is charged."""

from __future__ import annotations

import os
import shutil
import tempfile

from tunebench.errors import UserError

OBJECTIVE_UNITS = {"delay_s": "s", "luts": "LUT", "ffs": "FF", "dsps": "DSP", "brams": "BRAM"}
STAGES = ("estimate", "synth", "impl")  # fidelities, cheapest first
TOOL_STAGES = ("estimate", "sim", "synth", "impl")  # what runs (sim = functional check before synth)


def stage_chain(fidelity: str) -> list[str]:
    """Tool stages a measurement at ``fidelity`` needs, in order (impl needs synth's netlist)."""
    return ["estimate"] if fidelity == "estimate" else ["sim", "synth", "impl"][:2 + (fidelity == "impl")]


class FPGATargetBase:
    """Config handling common to FPGA targets. Subclasses implement ``measure``."""

    simulated_clock = False  # True: the loop adds each measurement's cost_s to the search clock
    times_kernels = False  # tool reports, not timings: no calibration, re-timing or peak

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.kind = cfg["kind"]
        self.name = cfg.get("name", self.kind)
        self.fidelities = list(cfg.get("fidelities") or STAGES)
        self.objectives = list(cfg.get("objectives") or ["delay_s", "luts", "ffs"])
        for o in self.objectives:
            if o not in OBJECTIVE_UNITS:
                raise UserError(f"target.objectives: {o!r} is unknown; valid: {', '.join(OBJECTIVE_UNITS)}")
        for f in self.fidelities:
            if f not in STAGES:
                raise UserError(f"target.fidelities: {f!r} is unknown; valid: {', '.join(STAGES)}")
        self.capacity = dict(cfg.get("capacity") or {})
        self.scale = [float(cfg["scale"][o]) for o in self.objectives]
        self.reference_point = [float(v) for v in cfg["reference_point"]]
        if len(self.reference_point) != len(self.objectives):
            raise UserError(f"target.reference_point={self.reference_point}: needs one value per objective "
                            f"{self.objectives}")
        self.batch_size = int(cfg.get("batch_size", 3))
        self.stats = {"build_phase_s": 0.0, "run_phase_s": 0.0, "check_s": 0.0, "tool_s": 0.0,
                      "protocol_s": 0.0, "lock_wait_s": 0.0}

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

    def describe_base(self) -> dict:
        return {"name": self.name, "kind": self.kind, "objectives": list(self.objectives),
                "fidelities": list(self.fidelities), "reference_point": list(self.reference_point),
                "scale": dict(zip(self.objectives, self.scale)), "capacity": dict(self.capacity)}

    def validate_tasks(self, tasks) -> None:
        """Check, before a run is created, that every task can be measured (no-op here)."""

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def check(self, task, config):
        return True, "checked in simulation when generated (tests/test_fpga_generator.py)"


class ToolFlowTarget(FPGATargetBase):
    """An FPGA target that runs tools (fpga_open, vivado): a work directory for the run (``workdir``
    from the config, kept; else a temporary one, removed on ``close``), the tools' timeouts, and the
    per-config stage results of this run (``_results``) so a later fidelity reuses earlier stages."""

    tmp_prefix = "tunebench-fpga-"

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.timeouts = dict(cfg.get("timeout_s") or {})
        self._workroot = cfg.get("workdir")
        self._tmp = None
        self._results: dict = {}

    def start(self) -> None:
        if self._tmp is None:
            self._tmp = self._workroot or tempfile.mkdtemp(prefix=self.tmp_prefix)
            os.makedirs(self._tmp, exist_ok=True)

    def close(self) -> None:
        if self._tmp and not self._workroot:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None
