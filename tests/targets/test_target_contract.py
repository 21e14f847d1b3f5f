"""The Target contract (src/targets/base.py): every real target and the tests' fake implement it,
describe themselves with a filled TargetInfo, have the capabilities (src/targets/capabilities.py) they
declare, and the two tool flows charge tool time alike."""
import dataclasses
import inspect
import json
import os

import numpy as np
import pytest

from conftest import TESTS, measure_settings, target_settings
from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.errors import UserError
from tunebench.targets import TARGETS, capabilities, make_target, target_with
from tunebench.targets.base import STAT_KEYS, Target, TargetInfo
from tunebench.targets.capabilities import TimesKernels
from tunebench.targets.fpga.table_target import TableTarget
from tunebench.targets.fpga.tasks import fpga_tasks
from tunebench.targets.tvm.llvm import LLVMTarget
from tunebench.testing.fakes import FakeTarget

STANDIN = os.path.join(TESTS, "standin_xilinx")
FPGA_KEYS = {"kind", "name", "objectives", "fidelities", "reference_point", "scale", "capacity"}


@pytest.fixture
def standin_path(monkeypatch):
    monkeypatch.setenv("PATH", STANDIN + os.pathsep + os.environ["PATH"])


def _fpga(kind: str, tmp_path) -> Target:
    return make_target(target_settings(kind, workdir=str(tmp_path)))


def _check_contract(t: Target, kind: str) -> TargetInfo:
    """What every target must offer: a filled TargetInfo consistent with the target's members, a
    JSON-ready description, stats with the fixed keys."""
    assert isinstance(t, Target)
    info = t.info
    assert isinstance(info, TargetInfo) and info.kind == kind == t.kind and info.name == t.name
    assert info.device_name and info.objectives == tuple(t.objectives) and info.fidelities == tuple(t.fidelities)
    assert info.batch_size == t.batch_size >= 1 and info.top_fidelity == t.fidelities[-1]
    assert set(t.stats) == set(STAT_KEYS) and all(v == 0.0 for v in t.stats.values())
    d = t.describe()
    assert json.loads(json.dumps(d)) == d and d["name"] == info.device_name and d["kind"] == kind
    return info


def test_every_target_class_implements_the_contract():
    for cls in (*TARGETS.values(), FakeTarget):
        assert issubclass(cls, Target) and not inspect.isabstract(cls), cls
        assert cls is FakeTarget or cls.Settings().kind == cls.kind, cls  # its settings name its class


#: the overridable members of the core contract (docs/ARCHITECTURE.md §A new target counts them)
CORE = {"measure", "load_tasks", "check_model", "nominal_info", "info_fields", "start", "close", "stats"}

#: each shipped target's capabilities
CAPABILITIES = {
    "llvm": {"TimesKernels", "ChecksOutputs", "MeasuresSpaces", "HasRunSteps", "DescribesCPUs", "ExtractsTasks"},
    "cuda": {"TimesKernels", "ChecksOutputs", "StaticChecks", "MeasuresSpaces", "HasRunSteps", "DescribesGPUs",
             "ExtractsTasks"},
    "fpga_open": {"ChecksOutputs"}, "vivado": {"ChecksOutputs"}, "table": {"ChecksOutputs", "HasTables"},
    "memory": {"ChecksOutputs", "ReportsMetrics"}, "accel": {"ChecksOutputs", "ReportsMetrics"}, "replay": set(),
}


def test_the_core_contract_is_small_and_capabilities_are_declared_by_methods():
    """The core has at most 8 members a target overrides; a capability is implemented by its methods, and the
    core defines none of them (else every target would seem to have it)."""
    overridable = {n for n, v in vars(Target).items() if not n.startswith("_") and n not in (
        "info", "task_info", "describe") and not isinstance(v, type) and (callable(v) or isinstance(v, (property, classmethod)))}
    assert overridable == CORE and len(CORE) <= 8
    names = [n for n, v in vars(capabilities).items() if isinstance(v, type) and getattr(v, "_is_protocol", False)
             and v.__module__ == capabilities.__name__]
    assert not any(issubclass(Target, getattr(capabilities, n)) for n in names)
    for kind, expected in CAPABILITIES.items():
        assert {n for n in names if issubclass(TARGETS[kind], getattr(capabilities, n))} == expected, kind


def test_target_with_a_capability_names_those_that_have_it():
    """What a method asks of a target class without building one (its offline commands): the class of a kind
    with the capability, else one line naming the kinds that have it."""
    assert target_with("cuda", capabilities.ExtractsTasks) is TARGETS["cuda"]
    assert target_with("llvm", capabilities.DescribesCPUs).cpu_model("haswell") == "haswell"
    with pytest.raises(UserError, match=r"kind='table' does not offer ExtractsTasks; valid: llvm, cuda"):
        target_with("table", capabilities.ExtractsTasks)


def test_only_a_target_that_times_kernels_gets_the_measurement_settings(tmp_path):
    """``make_target``: a target is built from its settings alone; one that times kernels also gets the
    experiment's measurement settings (its noise policy and machine cache folder)."""
    table = make_target(target_settings("table"), measure_settings(cache_dir=str(tmp_path / "unused")))
    assert isinstance(table, TableTarget) and not os.path.exists(tmp_path / "unused")
    llvm = make_target(target_settings("llvm", lock_dir=str(tmp_path)), measure_settings(cache_dir=str(tmp_path / "c"),
                                                                                        retime={"top_k": 3}))
    assert llvm._retime_k == 3 and llvm.machine.dir.startswith(str(tmp_path / "c"))
    for kind in ("table", "memory", "accel", "replay"):
        assert list(inspect.signature(TARGETS[kind]).parameters) == ["settings"], kind


def test_table_target_info():
    t = TableTarget(target_settings("table"))
    info = _check_contract(t, "table")
    assert info.multi_objective and t.simulated_clock and not isinstance(t, TimesKernels)
    assert info.objectives == ("delay_s", "luts", "ffs") and info.fidelities == ("estimate", "synth", "impl")
    assert len(info.reference_point) == 3 and set(info.scale) == set(info.objectives) and info.capacity["dsps"] > 0
    assert info.tvm_target is None and info.threads is None and info.precision is None
    assert set(t.describe()) == FPGA_KEYS | {"table"}


def test_tool_flow_targets_info(tmp_path, standin_path):
    info = _check_contract(_fpga("fpga_open", tmp_path / "open"), "fpga_open")
    assert info.details["device"]["family"] == "ecp5" and "yosys" in info.details["tools"]
    info = _check_contract(_fpga("vivado", tmp_path / "viv"), "vivado")
    assert info.details["part"] and info.details["clock_ns"] > 0 and set(info.details["tools"]) == {"vitis_hls", "vivado"}
    assert set(_fpga("vivado", tmp_path / "v2").describe()) == FPGA_KEYS | {"part", "clock_ns", "tools"}


def test_llvm_target_info(tmp_path):
    t = LLVMTarget(target_settings("llvm", lock_dir=str(tmp_path)), measure_settings(cache_dir=str(tmp_path / "cache")))  # no worker starts before start()
    info = _check_contract(t, "llvm")
    assert isinstance(t, TimesKernels) and not info.multi_objective and info.objectives == ("latency_s",)
    assert info.tvm_target["kind"] == "llvm" and info.threads == t.threads >= 1 and info.precision == "float32"
    assert info.device_name == t.device["name"] and info.capacity is None and info.reference_point is None
    assert set(t.describe()) == {"kind", "name", "mcpu", "num_cores", "host", "tvm_target", "objectives",
                                 "fidelities", "threads", "precision", "template"}
    assert info.details["template"] == "packed"  # target.template's default on llvm


def test_target_info_is_frozen_and_to_dict_is_a_copy():
    info = FakeTarget(objectives=("a", "b"), fidelities=("lo", "hi"), capacity={"luts": 10},
                      reference_point=[1, 2], scale={"a": 1.0, "b": 2.0}).info
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.name = "other"
    with pytest.raises(TypeError):
        info.capacity["luts"] = 20
    d = info.to_dict()
    d["capacity"]["luts"] = 20
    assert info.capacity["luts"] == 10 and d["reference_point"] == [1.0, 2.0] and d["fidelities"] == ["lo", "hi"]


def test_methods_get_the_typed_info_and_the_fake_counts_calls():
    from helpers import small_task as _task
    from tunebench.harness.loop import tune_task
    from tunebench.methods import Budget, make_method

    method = make_method({"name": "random"})
    target = FakeTarget(fail=lambda c, fid: "injected" if c.index % 2 else None)
    res = tune_task(_task(), method, target, Budget(8), np.random.default_rng(0))
    assert isinstance(method.target_info, TargetInfo) and method.target_info.name == "fake"
    assert len(target.calls) == 2 and len(target.measured) == 8
    assert all(m.valid == (m.config.index % 2 == 0) for m in res.measurements)
    assert all(m.error == "injected" for m in res.measurements if not m.valid)


@pytest.mark.parametrize("kind", ["fpga_open", "vivado"])
def test_tool_flows_charge_tool_time_as_build_time(kind, tmp_path, standin_path):
    """fpga_open and vivado share one measure loop: a stage's tool seconds are the measurement's cost,
    ``tool_s`` and ``build_phase_s`` (not harness overhead); a stage run before is not charged again."""
    t = _fpga(kind, tmp_path)
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], kind)[0]
    try:
        first = t.measure(task, [task.space.get(0), task.space.get(1)], "estimate")
        assert all(m.valid for m in first), [m.error for m in first]
        cost = sum(m.cost_s for m in first)
        assert cost > 0 and t.stats["tool_s"] == pytest.approx(cost) == t.stats["build_phase_s"]
        again = t.measure(task, [task.space.get(0)], "estimate")[0]
        assert again.cost_s == 0 and again.stage_s == {} and t.stats["build_phase_s"] == pytest.approx(cost)
        assert t.stats["run_phase_s"] == 0.0
    finally:
        t.close()


def test_a_targets_nominal_info_is_what_it_offers_once_built():
    """The facts a method's compatibility is checked against before anything is built (nominal_info)
    are those of the built target."""
    table = TableTarget(target_settings("table")).info
    for kind in ("fpga_open", "table", "vivado"):
        nominal = TARGETS[kind].nominal_info()
        assert (nominal.objectives, nominal.fidelities) == (table.objectives, table.fidelities)
        assert nominal.tvm_target is None
    llvm = TARGETS["llvm"].nominal_info()
    assert llvm.tvm_target and llvm.objectives == ("latency_s",) and llvm.fidelities == ("hw",)
