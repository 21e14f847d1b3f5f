"""The settings of the FPGA targets: ``fpga_open`` (Amaranth -> Yosys -> nextpnr-ecp5), ``vivado``
(Vitis HLS -> Vivado) and ``table`` (a replayed design-space table)."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import TargetSettings
from tunebench.config.knobs import NAME, NONNEG_INT, POS_INT, POS_NUM, Settings, bad, is_num, join, knob, opt, rule

OBJECTIVE_UNITS = {"delay_s": "s", "luts": "LUT", "ffs": "FF", "dsps": "DSP", "brams": "BRAM", "power_w": "W",
                   "alms": "ALM", "runtime": "the source's runtime unit (Spector)"}
STAGES = ("estimate", "synth", "impl")  # fidelities, cheapest first


def _names(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x for x in v)


def _positive_list(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(is_num(x) and x > 0 for x in v)


FIDELITY_NAMES = rule(_names, "must be a non-empty list of fidelity names")
OBJECTIVE_NAMES = rule(_names, "must be a non-empty list of objective names")
POSITIVE_LIST = rule(_positive_list, "must be a list of positive numbers")


@dataclass
class FPGASettings(TargetSettings):
    """What every FPGA target declares: fidelities, objectives, the device's capacity, the objectives'
    scales and the hypervolume reference point."""

    fidelities: list[str] = knob(list(STAGES), FIDELITY_NAMES,
                                 "cheapest first; impl runs synth first unless this run already did")
    objectives: list[str] = knob(["delay_s", "luts", "ffs"], OBJECTIVE_NAMES,
                                 "all minimized: delay = cycles / Fmax (s), LUT count, flip-flops")
    capacity: dict[str, float] = knob({"luts": 24288, "ffs": 24288, "dsps": 28, "brams": 56}, None,
                                      "LFE5U-25F: TRELLIS_COMB, TRELLIS_FF, MULT18X18D, DP16KD")
    scale: dict[str, float] = knob({"delay_s": 1.0e-5, "luts": 24288, "ffs": 24288}, None,
                                   "normalization: resources by capacity, delay by 10 us")
    reference_point: list[float] = knob([1.2, 0.45, 0.09], POSITIVE_LIST,
                                        "normalized hypervolume reference (delay 12 us, 10930 LUT, 2186 FF): holds "
                                        "every design of the shipped tables (benchmarks/fpga_table_stats.py checks)")
    batch_size: int = knob(3, POS_INT, "configs per ask (exhaustive: one config at its three fidelities)")

    def check(self, prefix: str) -> None:
        self.check_names(prefix)
        self.check_scale(prefix)

    def check_names(self, prefix: str) -> None:
        """Every objective and fidelity is known; every tool timeout positive."""
        for o in self.objectives:
            if o not in OBJECTIVE_UNITS:
                raise bad(join(prefix, "objectives"), self.objectives,
                          f"{o!r} is unknown; valid: {', '.join(OBJECTIVE_UNITS)}")
        for f in self.fidelities:
            if f not in STAGES:
                raise bad(join(prefix, "fidelities"), self.fidelities, f"{f!r} is unknown; valid: {', '.join(STAGES)}")
        for stage, seconds in getattr(self, "timeout_s", {}).items():
            if not (is_num(seconds) and seconds > 0):
                raise bad(join(prefix, f"timeout_s.{stage}"), seconds, "must be a positive number")

    def check_scale(self, prefix: str) -> None:
        """A scale per objective and one reference-point value per objective."""
        for o in self.objectives:
            if o not in self.scale:
                raise bad(join(prefix, "scale"), self.scale, f"needs a scale for the objective {o!r}")
        if len(self.reference_point) != len(self.objectives):
            raise bad(join(prefix, "reference_point"), self.reference_point,
                      f"needs one value per objective {self.objectives}")


@dataclass
class FPGADevice(Settings):
    size: str = knob("25k", NAME, "nextpnr-ecp5 --25k")
    package: str = knob("CABGA381", NAME, "nextpnr-ecp5 --package")
    freq_mhz: float = knob(100.0, POS_NUM, "clock constraint given to nextpnr; the achieved Fmax is what counts")
    seed: int = knob(1, NONNEG_INT, "nextpnr placer seed (fixed: the table is one sample of the tool's noise)")


@dataclass
class FPGAOpenSettings(FPGASettings):
    """Open-source FPGA flow (docs/USAGE.md §FPGA design-space exploration): Amaranth generator -> Yosys
    synth_ecp5 -> nextpnr-ecp5, all from PyPI (yowasp-*). Lattice ECP5 LFE5U-25F (capacities from
    nextpnr's utilization report)."""

    name: str = knob("fpga_open", NAME, "the target")
    kind: str = knob("fpga_open", NAME, "the target class")
    device: FPGADevice = knob(factory=FPGADevice, doc="the ECP5 device and nextpnr's settings")
    timeout_s: dict[str, float] = knob({"synth": 900.0, "impl": 900.0}, None,
                                       'a stage slower than this is an invalid measurement ("timeout")')
    workdir: str | None = knob(None, opt(NAME), "tool work folders; null = a temporary folder removed at the end")


@dataclass
class VivadoSettings(FPGASettings):
    """Xilinx flow: Vitis HLS csynth (fidelity estimate) -> Vivado synth -> Vivado place and route. Runs
    only where vitis_hls and vivado are on PATH; otherwise a one-line error. [Sun-PhD] §3.6 used a VC707."""

    name: str = knob("vivado", NAME, "the target")
    kind: str = knob("vivado", NAME, "the target class")
    part: str = knob("xc7vx485tffg1761-2", NAME, "Virtex-7 VC707 ([Sun-PhD] §3.6)")
    clock_ns: float = knob(10.0, POS_NUM, "HLS and Vivado clock constraint (100 MHz)")
    fidelities: list[str] = knob(list(STAGES), FIDELITY_NAMES,
                                 "HLS report, post-synthesis, post-route")
    objectives: list[str] = knob(["delay_s", "luts", "ffs"], OBJECTIVE_NAMES,
                                 "delay = HLS worst-case cycles x achieved period (clock - WNS)")
    capacity: dict[str, float] = knob({"luts": 303600, "ffs": 607200, "dsps": 2800, "brams": 2060}, None,
                                      "XC7VX485T (LUTs, FFs, DSP48E1, RAMB18)")
    scale: dict[str, float] = knob({"delay_s": 1.0e-5, "luts": 303600, "ffs": 607200}, None,
                                   "normalization: resources by capacity, delay by 10 us")
    reference_point: list[float] = knob([1.0, 0.05, 0.01], POSITIVE_LIST,
                                        "normalized hypervolume reference point")
    tools: dict[str, str] = knob({"vitis_hls": "vitis_hls", "vivado": "vivado"}, None,
                                 "executables (names on PATH or paths)")
    timeout_s: dict[str, float] = knob({"hls": 1800.0, "synth": 3600.0, "impl": 3600.0}, None,
                                       'a stage slower than this is an invalid measurement ("timeout")')
    workdir: str | None = knob(None, opt(NAME), "project folders; null = a temporary folder removed at the end")


@dataclass
class TableSettings(FPGASettings):
    """Replay of a design-space table written by method=exhaustive on a live FPGA target. Charges each
    design's recorded tool seconds to the search clock (no sleeping); a stage already run for that
    config in this task (e.g. synth before impl) is not charged twice. With a recorded model
    (``model=machsuite_*`` / ``spector_*``), fidelities, objectives, capacity, scale and reference point
    left at their defaults take the data set's (docs/USAGE.md §Recorded FPGA design spaces)."""

    name: str = knob("table", NAME, "the target")
    kind: str = knob("table", NAME, "the target class")
    table: str | None = knob(None, opt(NAME), "CSV path; null = the shipped table of the task's kernel: "
                                              "data/fpga/<kernel>.csv, or data/fpga_recorded/ for a "
                                              "recorded model")
    capacity: dict[str, float] = knob({"luts": 24288, "ffs": 24288, "dsps": 28, "brams": 56}, None,
                                      "of the device the table was made on (fpga_open)")

    def check(self, prefix: str) -> None:
        """Names only: a recorded model supplies the scale and reference point a knob leaves at its
        default (``TableTarget.check_model`` checks them against the model)."""
        self.check_names(prefix)
