"""target=vivado with stand-in vitis_hls/vivado executables (tests/standin_xilinx) that write
reports in the tools' formats: project files, report parsing, fidelities, errors."""
import os
import re

import pytest

from conftest import TESTS, target_settings
from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.errors import UserError
from tunebench.targets import make_target
from tunebench.targets.fpga import vivado_flow as vf
from tunebench.targets.fpga.kernels import KERNELS, get_kernel
from tunebench.targets.fpga.tasks import fpga_tasks

STANDIN = os.path.join(TESTS, "standin_xilinx")


@pytest.fixture
def vivado_target(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", STANDIN + os.pathsep + os.environ["PATH"])
    return make_target(target_settings("vivado", workdir=str(tmp_path)))


def test_missing_tools_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UserError) as exc:
        make_target(target_settings("vivado"))
    assert "vitis_hls" in str(exc.value) and "\n" not in str(exc.value)


def test_directives_tcl():
    k = get_kernel("gemm")
    cfg = dict(unroll_i=1, unroll_j=2, unroll_k=4, partition_A_type="cyclic", partition_A_factor=4,
               partition_B_type="cyclic", partition_B_factor=8, pipeline=1, mul_core="lut",
               storage="lutram")
    tcl = vf.directives_tcl(k, cfg).splitlines()[1:]
    assert tcl == ["set_directive_unroll -factor 2 gemm/L_j", "set_directive_unroll -factor 4 gemm/L_k",
                   "set_directive_array_partition -type cyclic -factor 4 -dim 2 gemm A",
                   "set_directive_array_partition -type cyclic -factor 4 -dim 1 gemm B",
                   "set_directive_array_partition -type cyclic -factor 2 -dim 2 gemm B",
                   "set_directive_bind_storage -type ram_2p -impl lutram gemm A",
                   "set_directive_bind_storage -type ram_2p -impl lutram gemm B",
                   "set_directive_pipeline -II 1 gemm/L_k",
                   "set_directive_bind_op -op mul -impl fabric -latency 2 gemm prod"]
    tcl = vf.directives_tcl(k, dict(cfg, storage="reg", pipeline=2)).splitlines()[1:]
    assert "set_directive_array_partition -type complete -dim 0 gemm A" in tcl
    assert tcl[-1] == "set_directive_bind_op -op mul -impl fabric -latency 3 gemm prod"


def test_every_kernel_has_an_hls_source_with_the_directive_labels():
    """The directives TCL names loop labels ``L_<loop>``, the arrays and the product ``prod``; each
    kernel's C++ source must have them, or Vitis HLS would ignore the directive."""
    for name in KERNELS:
        k = get_kernel(name)
        with open(os.path.join(vf.HLS_SRC, f"{name}.cpp")) as fh:
            src = fh.read()
        assert f"void {name}(" in src
        assert all(f"L_{lp}:" in src for lp in k.loop_order)
        assert all(re.search(rf"\b{a}\[", src) for a in [*k.arrays, k.spec["output"]["name"]])
        assert "unsigned int prod =" in src


def test_three_fidelities_and_report_parsing(vivado_target, tmp_path):
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "vivado")[0]
    c = next(task.space.get(i) for i in range(task.space.size)
             if task.space.get(i)["unroll_k"] == 4 and task.space.get(i)["unroll_j"] == 1
             and task.space.get(i)["pipeline"] == 0 and task.space.get(i)["mul_core"] == "dsp")
    est, syn, imp = (vivado_target.measure(task, [c], f)[0] for f in ("estimate", "synth", "impl"))
    assert est.valid and syn.valid and imp.valid, (est.error, syn.error, imp.error)
    # csynth.xml: 512/4 + 2 = 130 cycles at the estimated 7.9 ns; 120 + 90*4 LUTs; 60 + 40*4 FFs
    assert est.objectives["delay_s"] == pytest.approx(130 * 7.9e-9)
    assert est.objectives["luts"] == 480 and est.objectives["ffs"] == 220
    # synth: 0.9 x the HLS numbers; achieved period = 10 ns - WNS 2.0 ns
    assert syn.objectives == pytest.approx({"delay_s": 130 * 8.0e-9, "luts": 432, "ffs": 198})
    # impl: 0.8 x, WNS 1.234 ns; the HLS run is reused, only Vivado impl is charged
    assert imp.objectives == pytest.approx({"delay_s": 130 * 8.766e-9, "luts": 384, "ffs": 176})
    assert set(est.stage_s) == {"hls"} and set(syn.stage_s) == {"synth"} and set(imp.stage_s) == {"impl"}
    wd = os.path.join(str(tmp_path), task.id, str(c.index))
    assert "set_directive_unroll -factor 4 gemm/L_k" in open(os.path.join(wd, "directives.tcl")).read()
    assert vf.parse_power(open(os.path.join(wd, "impl_power.rpt")).read()) == pytest.approx(262.0)


def test_hls_failure_is_invalid(vivado_target, monkeypatch):
    monkeypatch.setenv("STANDIN_FAIL", "hls")
    task = fpga_tasks(MODEL_OPTIONS["hls_conv"], "vivado")[0]
    m = vivado_target.measure(task, [task.space.get(0)], "impl")[0]
    assert not m.valid and m.error.startswith("hls: ERROR: [HLS 200-70]")


def test_power_in_watts_is_converted():
    assert vf.parse_power("| Total On-Chip Power (W)  | 0.262 |") == pytest.approx(262.0)
    with pytest.raises(ValueError):
        vf.parse_power("nothing here")
