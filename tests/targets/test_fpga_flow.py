"""target=fpga_open: the three fidelities on the smallest design, stage reuse, and invalid designs."""
import subprocess
import sys

import pytest

from conftest import target_settings
from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.targets import make_target
from tunebench.targets.fpga import flow
from tunebench.targets.fpga.tasks import fpga_tasks


def _target(tmp_path, **over):
    return make_target(target_settings("fpga_open", workdir=str(tmp_path), **over))


@pytest.mark.slow  # ~10-40 s: Yosys + nextpnr on a one-lane GEMM (longer on a loaded machine)
def test_three_fidelities_on_the_smallest_design(tmp_path):
    t = _target(tmp_path)
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "fpga_open")[0]
    c = task.space.get(0)  # one lane, DSP multiplier, no product register
    est, syn, imp, again = (t.measure(task, [c], f)[0] for f in ("estimate", "synth", "impl", "impl"))
    for m in (est, syn, imp):
        assert m.valid, m.error
        assert set(m.objectives) == {"delay_s", "luts", "ffs"}
        assert all(v > 0 for v in m.objectives.values())
    assert est.stage_s.keys() == {"estimate"} and syn.stage_s.keys() == {"sim", "synth"}
    assert imp.stage_s.keys() == {"impl"}  # synth netlist reused, only impl charged
    assert again.stage_s == {} and again.cost_s == 0 and again.objectives == imp.objectives
    assert imp.cost_s == pytest.approx(imp.stage_s["impl"]) and imp.stage_s["impl"] > 0.1
    # impl delay uses nextpnr's achieved Fmax: cycles / Fmax with 515 cycles at tens of MHz
    assert 515 / 400e6 < imp.objectives["delay_s"] < 515 / 10e6
    assert imp.objectives["ffs"] == syn.objectives["ffs"] > 0  # the same netlist
    t.close()


def test_synth_invalid_when_the_design_does_not_fit(tmp_path):
    t = _target(tmp_path, capacity={"luts": 24288, "ffs": 24288, "dsps": 0, "brams": 56})
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "fpga_open")[0]
    c = task.space.get(0)  # uses one MULT18X18D
    m = t.measure(task, [c], "synth")[0]
    assert not m.valid and "does not fit" in m.error and m.objectives == {}
    m2 = t.measure(task, [c], "impl")[0]  # impl needs synth: the same error, not charged again
    assert not m2.valid and "does not fit" in m2.error and m2.cost_s == 0


def test_tool_timeout_is_an_invalid_measurement(tmp_path):
    t = _target(tmp_path, timeout_s={"synth": 0.01, "impl": 5})
    task = fpga_tasks(MODEL_OPTIONS["hls_conv"], "fpga_open")[0]
    m = t.measure(task, [task.space.get(0)], "synth")[0]
    assert not m.valid and "timeout" in m.error


def test_yosys_stat_parser():
    text = """
=== top ===
     9846 cells
      310   CCU2C
     6930   LUT4
        3   MULT18X18D
      949   TRELLIS_FF
"""
    c = flow.parse_yosys_stat(text)
    assert c["LUT4"] == 6930 and c["CCU2C"] == 310 and c["MULT18X18D"] == 3 and c["TRELLIS_FF"] == 949
    assert c["DP16KD"] == 0


def test_estimate_is_analytical_and_monotone_in_lanes():
    from tunebench.targets.fpga.kernels import get_kernel

    k = get_kernel("gemm")
    sp = k.space
    one = flow.estimate(k, sp.get(0).to_dict()).metrics
    cfg8 = next(sp.get(i).to_dict() for i in range(sp.size) if sp.get(i)["unroll_k"] == 4
                and sp.get(i)["mul_core"] == "lut" and sp.get(i)["unroll_j"] == 1)
    eight = flow.estimate(k, cfg8).metrics
    assert eight["cycles"] < one["cycles"] and eight["luts"] > one["luts"]


def test_the_targets_import_without_amaranth():
    """Amaranth is imported when an FPGA design is first built: the registry and the harness load without it
    (a GPU machine that has TVM and torch but not the FPGA tools runs target=cuda)."""
    code = ("import sys\nclass Block:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'amaranth':\n            raise ImportError('no amaranth here')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import tunebench.targets, tunebench.harness.experiment\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
