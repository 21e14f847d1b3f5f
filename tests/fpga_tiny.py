"""A tiny synthetic FPGA design-space table (the layout of tunebench.targets.fpga.table) and a stand-in replay target.

The table is generated from closed-form formulas (below), NOT from any tool: it only exercises the
methods' logic (three fidelities whose objectives are related non-linearly, invalid designs at
``impl``, per-stage tool seconds). 4 x 4 x 2 x 2 = 64 designs, objectives delay_s, lut, dsp.
"""

from __future__ import annotations

import csv
import math
import os

import numpy as np

from tunebench.search_space import ChoiceKnob, Space
from tunebench.task import Measurement, Outcome, Task
from tunebench.testing.fakes import FakeTarget

FIDELITIES = ["estimate", "synth", "impl"]
OBJECTIVES = ["delay_s", "lut", "dsp"]
CAPACITY = {"lut": 24288, "ff": 24288, "dsp": 28}
STAGE_S = {"estimate": 0.01, "synth": 4.0, "impl": 2.0}
TABLE = os.path.join(os.path.dirname(__file__), "data", "tiny_fpga_table.csv")


def tiny_space() -> Space:
    return Space([ChoiceKnob("unroll_i", (1, 2, 4, 8)), ChoiceKnob("unroll_j", (1, 2, 4, 8)),
                  ChoiceKnob("partition", ("cyclic", "block")), ChoiceKnob("pipeline", (0, 1))])


def _objectives(c) -> dict:
    """Per-fidelity objectives of one config (formulas; see the module docstring)."""
    ui, uj, block, pipe = c["unroll_i"], c["unroll_j"], c["partition"] == "block", c["pipeline"]
    lanes = ui * uj
    cycles = 4096 / lanes * (1.0 if pipe else 2.5) * (1.3 if block and uj > 1 else 1.0) + 40
    out = {}
    lut = 300 + 120 * lanes * (1.25 if pipe else 1.0)
    out["estimate"] = {"delay_s": cycles / 100e6, "lut": lut, "dsp": float(lanes)}
    lut_s = 1.1 * lut + 35 * math.log2(lanes) ** 2 + (60 if block else 0)
    fmax_s = 100e6 * (1 - 0.04 * math.log2(lanes))
    out["synth"] = {"delay_s": cycles / fmax_s, "lut": lut_s, "dsp": float(lanes)}
    fmax_i = fmax_s * (0.92 - 0.03 * pipe - 0.02 * math.sin(3 * ui + uj))
    out["impl"] = {"delay_s": cycles / fmax_i, "lut": 0.95 * lut_s + 15 * lanes ** 1.3 % 97, "dsp": float(lanes)}
    return out


def write_table(path: str = TABLE) -> str:
    space = tiny_space()
    header = ["index"] + list(space.names)
    for f in FIDELITIES:
        header += [f"{f}.{o}" for o in OBJECTIVES] + [f"{f}.valid", f"{f}.error"]
    header += [f"{s}.tool_s" for s in FIDELITIES]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(space.size):
            c = space.get(i)
            objs = _objectives(c)
            row = [i] + list(c.values)
            for f in FIDELITIES:
                bad = f == "impl" and objs[f]["dsp"] > CAPACITY["dsp"]
                row += ["" if bad else repr(objs[f][o]) for o in OBJECTIVES]
                row += [0 if bad else 1, "does not fit: DSP > 28" if bad else ""]
            row += [STAGE_S[s] * (1 + 0.1 * (i % 5)) for s in FIDELITIES]
            w.writerow(row)
    return path


def read_table(path: str = TABLE) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


class TinyTableTarget(FakeTarget):
    """Replays the tiny table as the FPGA targets do: measure(task, configs, fidelity); a measurement
    at fidelity f charges the tool seconds of f's own stage (the cheaper stages are cached per design)."""

    kind = "table"

    def __init__(self, path: str = TABLE, costs: dict | None = None):
        super().__init__(name="table", objectives=OBJECTIVES, fidelities=FIDELITIES, batch_size=1,
                         reference_point=[1.0, 1.0, 1.0], capacity=CAPACITY)
        self.rows = {int(r["index"]): r for r in read_table(path)}
        self.costs = costs  # declared fidelity costs (TargetInfo.fidelity_costs); None: none declared

    def info_fields(self, task=None) -> dict:
        out = super().info_fields(task)
        if task is not None and self.costs:
            out["fidelity_costs"] = self.costs
        return out

    def evaluate(self, configs, fidelity) -> list[dict]:
        return [{} for _ in configs]  # measurement() reads the row

    def measurement(self, task, c, fidelity, values) -> Measurement:
        r = self.rows[c.index]
        valid = r[f"{fidelity}.valid"] == "1"
        error, tool_s = r[f"{fidelity}.error"], float(r[f"{fidelity}.tool_s"])
        return Measurement(task.id, c, Outcome.of_error(valid, error), error=error, fidelity=fidelity,
                           objectives={o: float(r[f"{fidelity}.{o}"]) for o in OBJECTIVES} if valid else {},
                           stage_s={fidelity: tool_s}, cost_s=tool_s)

    def true_front(self) -> np.ndarray:
        """Raw impl objectives [n, 3] of the valid designs (for ADRS-style checks)."""
        return np.array([[float(r[f"impl.{o}"]) for o in OBJECTIVES] for r in self.rows.values()
                         if r["impl.valid"] == "1"])


def tiny_task() -> Task:
    return Task(id="tiny_gemm", name="tiny_gemm", kind="hls_gemm", mod={}, shape={}, flops=0, space=tiny_space())


def run_method(method, target, task, trials: int, seed: int = 0) -> list[Measurement]:
    """The harness loop (``tune_task``) with a trial budget only; returns the measurements."""
    from tunebench.harness.loop import tune_task
    from tunebench.methods.base import Budget

    return tune_task(task, method, target, Budget(trials), np.random.default_rng(seed)).measurements


if __name__ == "__main__":
    print(write_table())
