"""target.mcpu is checked against what this machine can run, before any run exists."""

import pytest

from tunebench.errors import UserError
from tunebench.targets.tvm import host_isa
from tunebench.targets.tvm.llvm import llvm_cpu
from tunebench.targets.tvm.settings import LLVMSettings

ZNVER3_FLAGS = frozenset(
    "fpu sse sse2 lm cmov cx8 cx16 mmx pni ssse3 sse4_1 sse4_2 sse4a popcnt abm movbe aes pclmulqdq avx avx2 "
    "fma f16c bmi1 bmi2 adx rdrand rdseed sha_ni vaes vpclmulqdq".split())


def test_the_avx512_extensions_are_what_an_avx2_machine_lacks():
    assert host_isa.missing_extensions(host_isa.mcpu_features("haswell"), ZNVER3_FLAGS) == []
    missing = host_isa.missing_extensions(host_isa.mcpu_features("skylake-avx512"), ZNVER3_FLAGS)
    assert missing == ["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"]
    # an SSE-only machine cannot run AVX2 code, whatever LLVM's tuning flags say
    sse_only = frozenset(f for f in ZNVER3_FLAGS if not f.startswith(("avx", "fma", "f16c", "bmi")))
    assert "avx2" in host_isa.missing_extensions(host_isa.mcpu_features("haswell"), sse_only)


def test_cpuinfo_flags_are_read_and_an_absent_file_checks_nothing(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse2 avx2 lm\n")
    assert host_isa.host_flags(str(info)) == frozenset({"fpu", "sse2", "avx2", "lm"})
    assert host_isa.host_flags(str(tmp_path / "absent")) is None


def test_32_bit_cpus_are_not_offered_on_x86_64():
    cpus = host_isa.triple_cpus()
    assert "haswell" in cpus and "pentium4" not in cpus and "i686" not in cpus
    with pytest.raises(UserError, match="target.mcpu='pentium4' is not an LLVM CPU for x86_64"):
        llvm_cpu("pentium4")


def test_a_cpu_this_machine_cannot_run_is_refused_naming_what_it_lacks(monkeypatch):
    from tunebench.targets.tvm.llvm import LLVMTarget

    monkeypatch.setattr(host_isa, "host_flags", lambda: ZNVER3_FLAGS)
    target = LLVMTarget.__new__(LLVMTarget)
    target.settings = LLVMSettings(mcpu="skylake-avx512", num_cores=1)
    target.threads = 1
    with pytest.raises(UserError, match=r"target.mcpu='skylake-avx512' needs instructions this machine's CPU .* "
                                        r"lacks: avx512bw, avx512cd, avx512dq, avx512f, avx512vl; valid here: "
                                        r"native, .*haswell"):
        target._probe_local()
    target.settings = LLVMSettings(mcpu="haswell", num_cores=1)
    target._probe_local()
    assert target.tvm_target["mcpu"] == "haswell"


def test_an_rpc_device_is_checked_by_the_cpu_model_it_reports():
    from tunebench.targets.tvm.llvm import remote_cpu

    info = {"cpu": "haswell", "max_threads": 4, "cpu_count": 4, "server": "127.0.0.1:9190"}
    rpc = {"key": "board"}
    with pytest.raises(UserError, match=r"target.mcpu='skylake-avx512' needs instructions the RPC device's CPU "
                                        r"\(haswell\) lacks: .*avx512f, avx512vl.*; valid there: native, .*nehalem"):
        remote_cpu(LLVMSettings(mcpu="skylake-avx512", num_cores=2), info, rpc)
    assert remote_cpu(LLVMSettings(mcpu="nehalem", num_cores=2), info, rpc) == ("nehalem", 2)
    assert remote_cpu(LLVMSettings(mcpu=None, num_cores=None), info, rpc) == ("haswell", 4)
    # a remote that cannot name its CPU, or names one of another architecture, is not checked
    for cpu in (None, "cortex-a72"):
        assert remote_cpu(LLVMSettings(mcpu="skylake-avx512", num_cores=2), {**info, "cpu": cpu}, rpc)[0] == \
            "skylake-avx512"
