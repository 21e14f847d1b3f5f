"""``target=vivado``: the Xilinx flow (Vitis HLS + Vivado) where the tools are installed.

Fidelities: ``estimate`` = HLS C synthesis report (csynth.xml), ``synth`` = Vivado synthesis of the
HLS RTL, ``impl`` = Vivado place and route; objectives as in the target YAML (delay = HLS cycles x
achieved clock period). Project files and report parsers: :mod:`tunebench.targets.fpga.vivado_flow`.
Without ``vitis_hls``/``vivado`` on PATH: a one-line :class:`UserError` when the target is built.
"""

from __future__ import annotations

import shutil
import subprocess
import time

from tunebench.errors import UserError
from tunebench.targets.fpga import vivado_flow as vf
from tunebench.targets.fpga.common import ToolFlowTarget
from tunebench.targets.fpga.flow import StageResult, _last_error
from tunebench.targets.fpga.settings import VivadoSettings
from tunebench.targets.fpga.table import write_table

STAGE_CHAIN = {"estimate": ["hls"], "synth": ["hls", "synth"], "impl": ["hls", "impl"]}


class VivadoTarget(ToolFlowTarget):
    """The Xilinx flow; its stages per fidelity: :data:`STAGE_CHAIN`."""

    kind = "vivado"
    Settings = VivadoSettings
    lends = {"write_table": write_table}  # method=exhaustive writes this target's design-space table
    tmp_prefix = "tunebench-vivado-"

    def __init__(self, settings: VivadoSettings):
        super().__init__(settings)
        self.part = settings.part
        self.clock_ns = float(settings.clock_ns)
        self.tools = {}
        for name in ("vitis_hls", "vivado"):
            path = shutil.which(settings.tools.get(name) or name)
            if not path:
                raise UserError(f"target=vivado needs {name!r} on PATH (Xilinx Vitis HLS / Vivado); "
                                "use target=fpga_open (open-source flow) or target=table without them")
            self.tools[name] = path

    def details(self) -> dict:
        return {"part": self.part, "clock_ns": self.clock_ns, "tools": dict(self.tools)}

    def stage_chain(self, fidelity: str) -> list[str]:
        return STAGE_CHAIN[fidelity]

    def run_stage(self, kernel, point: dict, wd: str, stage: str, done: dict) -> StageResult:
        """``hls`` (Vitis HLS C synthesis), ``synth`` / ``impl`` (Vivado, on the HLS RTL)."""
        return self._stage(kernel, point, wd, stage, done.get("hls"))

    def _run(self, cmd, wd, stage) -> tuple[bool, str, float]:
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=wd, capture_output=True, text=True,
                               timeout=float(self.timeouts.get(stage, 3600)))
        except subprocess.TimeoutExpired:
            return False, f"{stage}: timeout", time.perf_counter() - t0
        ok = p.returncode == 0
        return ok, "" if ok else f"{stage}: {_last_error(p.stdout + p.stderr)}", time.perf_counter() - t0

    def _stage(self, kernel, point, wd, stage, hls) -> StageResult:
        if stage == "hls":
            vf.write_project(kernel, point, wd, self.part, self.clock_ns)
            ok, err, secs = self._run([self.tools["vitis_hls"], "-f", "hls.tcl"], wd, "hls")
            path = vf.find_csynth(wd)
            if not ok or not path:
                return StageResult(False, {}, err or "hls: no csynth.xml written", secs)
            try:
                r = vf.parse_csynth_xml(path)
            except (ValueError, AttributeError, TypeError) as exc:
                return StageResult(False, {}, f"hls: unreadable csynth.xml ({exc})", secs)
            return StageResult(True, {"cycles": r["cycles"], "fmax_mhz": 1e3 / r["period_ns"], "luts": r["luts"],
                                      "ffs": r["ffs"], "dsps": r["dsps"], "brams": r["brams"]}, "", secs)
        ok, err, secs = self._run([self.tools["vivado"], "-mode", "batch", "-source", f"vivado_{stage}.tcl"], wd, stage)
        if not ok:
            return StageResult(False, {}, err, secs)
        try:
            m = vf.stage_metrics(wd, stage, self.clock_ns, hls.metrics["cycles"])
        except (OSError, ValueError, KeyError) as exc:
            return StageResult(False, {}, f"{stage}: unreadable report ({exc})", secs)
        for key in ("luts", "ffs", "dsps", "brams"):
            if key in self.capacity and m[key] > self.capacity[key]:
                return StageResult(False, m, f"{stage}: does not fit: {m[key]:.0f} {key} > {self.capacity[key]}", secs)
        return StageResult(True, m, "", secs)
