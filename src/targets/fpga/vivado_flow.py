"""The Xilinx flow for ``target=vivado``: project files per config and report parsers.

Per config, in ``<workdir>/<task>/<index>/``:

- ``<kernel>.cpp`` (from ``src/targets/fpga/hls_src``) and ``directives.tcl`` (``set_directive_unroll``,
  ``set_directive_array_partition`` per partitioned dim, ``set_directive_bind_storage`` (``storage``;
  ``reg`` = complete partitioning), ``set_directive_pipeline``,
  ``set_directive_bind_op -op mul -impl dsp|fabric``);
- ``hls.tcl``: Vitis HLS project, ``csynth_design`` (fidelity ``estimate``: the HLS report);
- ``vivado.tcl``: Vivado batch run on the HLS Verilog: ``synth_design`` (fidelity ``synth``), plus
  ``opt_design``/``place_design``/``route_design`` (``impl``), then ``report_utilization
  -hierarchical``, ``report_timing_summary`` and ``report_power`` (mW) into ``<stage>_*.rpt``.

Parsed: csynth.xml (worst-case latency in cycles, estimated clock period, LUT/FF/DSP/BRAM_18K),
Vivado utilization (Total LUTs, FFs, DSP Blocks, RAMB36/RAMB18), timing summary (WNS; achieved
period = target period - WNS) and power (Total On-Chip Power, mW).
"""

from __future__ import annotations

import glob
import os
import re
import xml.etree.ElementTree as ET

from tunebench.targets.fpga.kernels import Kernel

HLS_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hls_src")


def directives_tcl(kernel: Kernel, point: dict) -> str:
    """The directives TCL of one config (Vitis HLS ``set_directive_*`` commands)."""
    top = kernel.name
    lines = [f"# directives of {top}: {point}"]
    u = kernel.unrolls(point)
    for lp in kernel.loop_order:
        if u[lp] > 1:
            lines.append(f"set_directive_unroll -factor {u[lp]} {top}/L_{lp}")
    for a in kernel.arrays:
        if point[f"partition_{a}_factor"] > 1:
            for dim, f in enumerate(kernel.required_banks(a, u), start=1):
                if f > 1:
                    lines.append(f"set_directive_array_partition -type {point[f'partition_{a}_type']} "
                                 f"-factor {f} -dim {dim} {top} {a}")
    storage = point.get("storage", "auto")
    for a in kernel.arrays:
        if storage == "reg":  # registers: every bank completely partitioned
            lines.append(f"set_directive_array_partition -type complete -dim 0 {top} {a}")
        elif storage in ("bram", "lutram"):
            lines.append(f"set_directive_bind_storage -type ram_2p -impl {storage} {top} {a}")
    pipe = int(point["pipeline"])
    if pipe:
        lines.append(f"set_directive_pipeline -II 1 {top}/L_{kernel.loop_order[-1]}")
    impl = "dsp" if point["mul_core"] == "dsp" else "fabric"
    latency = f" -latency {pipe + 1}" if pipe else ""  # 1: product register; 2: + adder-tree register
    lines.append(f"set_directive_bind_op -op mul -impl {impl}{latency} {top} prod")
    return "\n".join(lines) + "\n"


def hls_tcl(kernel: Kernel, part: str, clock_ns: float) -> str:
    top = kernel.name
    return "\n".join([
        "open_project -reset hls_prj", f"set_top {top}", f"add_files {top}.cpp",
        "open_solution -reset solution1", f"set_part {{{part}}}", f"create_clock -period {clock_ns} -name default",
        "source directives.tcl", "csynth_design", "exit", ""])


def vivado_tcl(kernel: Kernel, part: str, clock_ns: float, stage: str) -> str:
    top = kernel.name
    lines = ["read_verilog [glob hls_prj/solution1/syn/verilog/*.v]",
             f"synth_design -top {top} -part {part} -mode out_of_context",
             f"create_clock -period {clock_ns} -name ap_clk [get_ports ap_clk]"]
    if stage == "impl":
        lines += ["opt_design", "place_design", "route_design"]
    lines += ["set_units -power mW",
              f"report_utilization -hierarchical -file {stage}_utilization.rpt",
              f"report_timing_summary -file {stage}_timing.rpt",
              f"report_power -file {stage}_power.rpt", "exit", ""]
    return "\n".join(lines)


def write_project(kernel: Kernel, point: dict, workdir: str, part: str, clock_ns: float) -> None:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(HLS_SRC, f"{kernel.name}.cpp")) as fh:
        src = fh.read()
    files = {f"{kernel.name}.cpp": src, "directives.tcl": directives_tcl(kernel, point),
             "hls.tcl": hls_tcl(kernel, part, clock_ns),
             "vivado_synth.tcl": vivado_tcl(kernel, part, clock_ns, "synth"),
             "vivado_impl.tcl": vivado_tcl(kernel, part, clock_ns, "impl")}
    for name, text in files.items():
        with open(os.path.join(workdir, name), "w") as fh:
            fh.write(text)


# ---------------------------------------------------------------- report parsers

def parse_csynth_xml(path: str) -> dict:
    """Vitis HLS ``csynth.xml``: cycles (worst case), clock period (ns), LUT/FF/DSP/BRAM_18K."""
    root = ET.parse(path).getroot()
    perf = root.find("PerformanceEstimates")
    timing = perf.find("SummaryOfTimingAnalysis")
    unit = (timing.findtext("unit") or "ns").strip()
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6}[unit]
    period_ns = float(timing.findtext("EstimatedClockPeriod")) * scale
    lat = perf.find("SummaryOfOverallLatency")
    cycles = lat.findtext("Worst-caseLatency") or lat.findtext("Best-caseLatency")
    res = root.find("AreaEstimates").find("Resources")
    return {"cycles": int(cycles), "period_ns": period_ns, "luts": float(res.findtext("LUT")),
            "ffs": float(res.findtext("FF")), "dsps": float(res.findtext("DSP") or res.findtext("DSP48E") or 0),
            "brams": float(res.findtext("BRAM_18K") or 0)}


def parse_utilization(text: str) -> dict:
    """Vivado ``report_utilization -hierarchical``: the top instance's row."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "Instance" in line and "Total LUTs" in line and "FFs" in line:
            header = [c.strip() for c in line.split("|")[1:-1]]
            row = [c.strip() for c in lines[i + 2].split("|")[1:-1]]
            vals = dict(zip(header, row))
            return {"luts": float(vals["Total LUTs"]), "ffs": float(vals["FFs"]),
                    "dsps": float(vals.get("DSP Blocks", 0) or 0),
                    "brams": 2 * float(vals.get("RAMB36", 0) or 0) + float(vals.get("RAMB18", 0) or 0)}
    raise ValueError("no hierarchical utilization table (Instance | Module | Total LUTs ...) in the report")


def parse_timing_summary(text: str) -> float:
    """Vivado ``report_timing_summary``: WNS in ns (first row under the WNS(ns) header)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "WNS(ns)" in line and "TNS(ns)" in line:
            return float(lines[i + 2].split()[0])
    raise ValueError("no 'WNS(ns)' design timing summary in the report")


def parse_power(text: str) -> float:
    """Vivado ``report_power`` (units mW): Total On-Chip Power."""
    m = re.search(r"\|\s*Total On-Chip Power \((mW|W)\)\s*\|\s*([0-9.]+)", text)
    if not m:
        raise ValueError("no 'Total On-Chip Power' row in the report")
    return float(m.group(2)) * (1000.0 if m.group(1) == "W" else 1.0)


def find_csynth(workdir: str) -> str | None:
    hits = glob.glob(os.path.join(workdir, "hls_prj", "solution1", "syn", "report", "csynth.xml"))
    return hits[0] if hits else None


def stage_metrics(workdir: str, stage: str, clock_ns: float, cycles: int) -> dict:
    """Metrics of a Vivado stage from its three reports (achieved period = clock - WNS)."""
    read = lambda name: open(os.path.join(workdir, f"{stage}_{name}.rpt")).read()  # noqa: E731
    util = parse_utilization(read("utilization"))
    wns = parse_timing_summary(read("timing"))
    power = parse_power(read("power"))
    period = max(clock_ns - wns, 1e-3)
    return {"cycles": cycles, "fmax_mhz": 1e3 / period, **util, "power_mw": power}
