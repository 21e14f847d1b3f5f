"""``target=accel``'s settings: a Gemmini-like DNN accelerator as ZigZag models it.

The defaults are Gemmini's published default configuration ([Genc-DAC21]; ``GemminiConfigs.defaultConfig``
in ``src/main/scala/gemmini/Configs.scala`` of ucb-bar/gemmini, checked at its commit 8c3f992: ``meshRows`` =
``meshColumns`` = 16 with ``tileRows`` = ``tileColumns`` = 1, 8-bit ``inputType``/``weightType``, 32-bit
``accType``, ``sp_capacity`` 256 KiB in ``sp_banks`` = 4 banks of 16-byte rows, ``acc_capacity`` 64 KiB in
``acc_banks`` = 2, ``dma_buswidth`` = 128 bits). Gemmini's default ``dataflow`` is ``BOTH`` (output- or
weight-stationary at run time); the weight-stationary one is modelled, as in [Dinh-MLArchSys23]. Energies per bit accessed are 45 nm figures of
[Horowitz-ISSCC14] (8-bit multiply 0.2 pJ + 32-bit add 0.1 pJ per MAC; 64-bit SRAM reads of 10 pJ at 8 KB,
20 pJ at 32 KB and 100 pJ at 1 MB, interpolated in log size for 64 KiB and 256 KiB; DRAM about 2 nJ per
64 bits). The memory hierarchy is the four levels of [Dinh-MLArchSys23] §III: a weight register per PE,
the accumulator (outputs), the scratchpad (inputs and weights), DRAM (everything).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import TargetSettings
from tunebench.config.knobs import NAME, POS_INT, POS_NUM, bad, is_num, join, knob, rule

OBJECTIVES = ("energy_pj_per_mac", "latency_s", "edp")  # all minimized
OBJECTIVE_DOC = {"energy_pj_per_mac": "energy per MAC (pJ), [Dinh-MLArchSys23]'s metric",
                 "latency_s": "modelled latency (s): ZigZag's cycles / clock",
                 "edp": "energy-delay product (J s)"}


def _objective_list(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and len(set(v)) == len(v) and all(o in OBJECTIVES for o in v)


OBJECTIVE_LIST = rule(_objective_list, f"must be a non-empty list of distinct names from {', '.join(OBJECTIVES)}")


@dataclass
class AccelSettings(TargetSettings):
    """A Gemmini-like accelerator (module docstring); every size and cost is a knob, so that hardware
    configurations can be varied (transfer across memory configurations)."""

    name: str = knob("accel", NAME, "the target")
    kind: str = knob("accel", NAME, "the target class")
    batch_size: int = knob(1, POS_INT, "mappings evaluated per round of the tuning loop")
    objectives: list[str] = knob(["energy_pj_per_mac"], OBJECTIVE_LIST,
                                 "all minimized; one: a single-objective search; several: Pareto fronts. "
                                 + "; ".join(f"{k}: {v}" for k, v in OBJECTIVE_DOC.items()))
    array_rows: int = knob(16, POS_INT, "PE rows (D1, input channels C unrolled); Gemmini meshRows x tileRows = 16")
    array_cols: int = knob(16, POS_INT, "PE columns (D2, output channels K unrolled); Gemmini meshColumns x "
                                        "tileColumns = 16")
    weight_reg_bits: int = knob(8, POS_INT, "weight register per PE (bits): one 8-bit weight (weight-stationary)")
    accumulator_kib: float = knob(64, POS_NUM, "accumulator capacity (KiB, 32-bit partial sums); Gemmini acc_capacity")
    scratchpad_kib: float = knob(256, POS_NUM, "scratchpad capacity (KiB, 8-bit inputs and weights); Gemmini "
                                               "sp_capacity")
    accumulator_bw_bits: int = knob(1024, POS_INT, "accumulator bits per cycle (2 banks x 16 x 32 bit)")
    scratchpad_bw_bits: int = knob(512, POS_INT, "scratchpad bits per cycle (4 banks x 16-byte rows)")
    dram_bw_bits: int = knob(128, POS_INT, "DRAM bits per cycle (Gemmini's 128-bit DMA bus)")
    input_bits: int = knob(8, POS_INT, "input and weight precision (bits)")
    psum_bits: int = knob(32, POS_INT, "partial-sum precision in the accumulator (bits)")
    output_bits: int = knob(8, POS_INT, "final output precision written to DRAM (bits)")
    mac_pj: float = knob(0.3, POS_NUM, "energy of one MAC (pJ): 8-bit multiply 0.2 + 32-bit add 0.1 "
                                       "[Horowitz-ISSCC14]")
    weight_reg_pj_per_bit: float = knob(0.004, POS_NUM, "weight register energy per bit (pJ): an 8-bit add's "
                                                        "0.03 pJ over 8 bits [Horowitz-ISSCC14]")
    accumulator_pj_per_bit: float = knob(0.43, POS_NUM, "accumulator energy per bit (pJ): 64 KiB SRAM, "
                                                        "[Horowitz-ISSCC14] interpolated")
    scratchpad_pj_per_bit: float = knob(0.82, POS_NUM, "scratchpad energy per bit (pJ): 256 KiB SRAM, "
                                                       "[Horowitz-ISSCC14] interpolated")
    dram_pj_per_bit: float = knob(31.0, POS_NUM, "DRAM energy per bit (pJ): about 2 nJ per 64 bits "
                                                 "[Horowitz-ISSCC14]")
    clock_hz: float = knob(1.0e9, POS_NUM, "clock (Hz): latency_s = cycles / clock_hz")
    scale: dict[str, float] = knob({"energy_pj_per_mac": 10.0, "latency_s": 1.0e-3, "edp": 1.0e-6}, None,
                                   "normalization per objective (hypervolume, several objectives)")

    def check(self, prefix: str) -> None:
        for o in self.objectives:
            if not (is_num(self.scale.get(o)) and self.scale[o] > 0):
                raise bad(join(prefix, "scale"), self.scale, f"needs a positive scale for the objective {o!r}")
        if self.psum_bits < self.input_bits:
            raise bad(join(prefix, "psum_bits"), self.psum_bits,
                      f"must be at least input_bits={self.input_bits} (partial sums hold products)")
        if self.weight_reg_bits < self.input_bits:
            raise bad(join(prefix, "weight_reg_bits"), self.weight_reg_bits,
                      f"must hold one weight of input_bits={self.input_bits}")
        spad_bits, acc_bits = self.scratchpad_kib * 8192, self.accumulator_kib * 8192
        # the smallest tile of any layer: one weight per PE and one input per row in the scratchpad,
        # one partial sum per column in the accumulator
        need_spad = (self.array_rows * self.array_cols + self.array_rows) * self.input_bits
        if spad_bits < need_spad:
            raise bad(join(prefix, "scratchpad_kib"), self.scratchpad_kib,
                      f"too small for one tile of a {self.array_rows}x{self.array_cols} array "
                      f"({need_spad / 8192:.3f} KiB: its weights and one input column); valid: >= {need_spad / 8192:.3f}")
        if acc_bits < self.array_cols * self.psum_bits:
            raise bad(join(prefix, "accumulator_kib"), self.accumulator_kib,
                      f"too small for one row of {self.array_cols} partial sums of {self.psum_bits} bits; "
                      f"valid: >= {self.array_cols * self.psum_bits / 8192:.3f}")
