"""Whether this machine can run code LLVM compiles for CPU model ``target.mcpu``.

LLVM accepts any CPU name of its catalogue and emits that CPU's instructions; run on a machine without
them, a kernel dies of an illegal instruction (the measurement worker's exit code -4) mid-run. The check
compares the instruction-set extensions LLVM enables for ``mcpu`` with this machine's, as the Linux kernel
reports them in ``/proc/cpuinfo`` (which shows what a virtual machine really offers, not the CPU model
its host advertises). Tuning flags of LLVM's CPU models (``fast-gather``, ``slow-3ops-lea``, ...) are not
instructions and are not compared; where ``/proc/cpuinfo`` is absent (not Linux), nothing is checked. For
an RPC device, the features LLVM gives its CPU model (the name the remote reports) stand in for its flags.
"""

from __future__ import annotations

import functools

# LLVM's x86 feature name -> the kernel's cpuinfo flag, for the extensions that add instructions
_CPUINFO_FLAG = {
    "64bit": "lm", "cmov": "cmov", "cx8": "cx8", "cx16": "cx16", "mmx": "mmx", "sse": "sse", "sse2": "sse2",
    "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse4a": "sse4a", "popcnt": "popcnt",
    "lzcnt": "abm", "movbe": "movbe", "aes": "aes", "pclmul": "pclmulqdq", "avx": "avx", "avx2": "avx2",
    "fma": "fma", "fma4": "fma4", "xop": "xop", "f16c": "f16c", "bmi": "bmi1", "bmi2": "bmi2", "adx": "adx",
    "rdrnd": "rdrand", "rdseed": "rdseed", "sha": "sha_ni", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq",
    "gfni": "gfni", "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16", "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2",
    "avx512ifma": "avx512ifma", "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512vp2intersect": "avx512_vp2intersect", "avxvnni": "avx_vnni", "amx-tile": "amx_tile",
    "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
}


def cpuinfo_field(name: str, path: str = "/proc/cpuinfo") -> str | None:
    """The first ``name`` line's value in ``/proc/cpuinfo`` (None: no such file or line)."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


@functools.cache
def host_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """This machine's CPU flags (None: no such file, or no ``flags`` line: not checked)."""
    flags = cpuinfo_field("flags", path)
    return None if flags is None else frozenset(flags.split())


def missing_extensions(mcpu_features, flags) -> list[str]:
    """The instruction-set extensions of an LLVM CPU model (its feature names) that ``flags`` lack."""
    return sorted(f for f in set(mcpu_features) if f in _CPUINFO_FLAG and _CPUINFO_FLAG[f] not in flags)


@functools.cache
def mcpu_features(mcpu: str) -> frozenset[str]:
    """The features LLVM enables for CPU model ``mcpu``."""
    import tvm
    from tvm.target import codegen

    return frozenset(codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": str(mcpu)})))


def host_problem(mcpu: str, remote_cpu: str | None = None) -> str | None:
    """Why code for LLVM CPU ``mcpu`` cannot run here (None: it can, or this machine's flags are unknown);
    with ``remote_cpu`` (an RPC device's LLVM CPU name), there, as far as that CPU model's features say."""
    from tvm.target import codegen

    if remote_cpu:
        flags = frozenset(_CPUINFO_FLAG[f] for f in mcpu_features(remote_cpu) if f in _CPUINFO_FLAG)
        where = f"the RPC device's CPU ({remote_cpu})"
    else:
        flags, where = host_flags(), f"this machine's CPU ({codegen.llvm_get_system_cpu()})"
    if flags is None:
        return None
    missing = missing_extensions(mcpu_features(mcpu), flags)
    if not missing:
        return None
    here = [n for n in triple_cpus() if not missing_extensions(mcpu_features(n), flags)]
    there = "there" if remote_cpu else "here"
    return f"needs instructions {where} lacks: {', '.join(missing)}; valid {there}: native, {', '.join(here)}"


def fits_triple(mcpu: str) -> bool:
    """Whether LLVM CPU ``mcpu`` can take this machine's target triple (on x86_64: a 64-bit CPU; LLVM lists
    i386 ... pentium4 too, and aborts compiling 64-bit code for them)."""
    from tvm.target import codegen

    return not codegen.llvm_get_system_triple().startswith("x86_64") or "64bit" in mcpu_features(mcpu)


@functools.cache
def triple_cpus() -> tuple[str, ...]:
    """LLVM's CPU models for this machine's target triple (see :func:`fits_triple`), sorted."""
    import tvm
    from tvm.target import codegen

    return tuple(n for n in sorted(set(codegen.llvm_get_cpu_archlist(tvm.target.Target("llvm")))) if fits_triple(n))
