"""The specification sheet of a CPU variant: an LLVM CPU model (``target.mcpu``) at a thread count
(``target.num_cores``) on this machine, the raw vector that Glimpse's Blueprint compresses ([Ahn-PhD] §4.4.1).

A schedule sees the same silicon compiled for another CPU model as other hardware: the instruction set
LLVM may use (SSE4.2, AVX, AVX2 + FMA, AVX-512) sets the vector width and the register file, and with them
the best tiles. What the variant's "data sheet" says:

- from LLVM (``tvm.target.codegen.llvm_get_cpu_features`` of the CPU model): the widest vector ISA
  (128 / 256 / 512 bits), FMA, AVX-512 BW and VNNI, LLVM's ``prefer-256-bit`` tuning flag, the number of
  architectural vector registers (32 with AVX-512, else 16) and how many ISA features the model has;
- the threads the kernels run on;
- from this machine: L1d, L2 and L3 sizes (sysfs ``/sys/devices/system/cpu/cpu0/cache``) and the clock
  (``cpufreq/cpuinfo_max_freq``, else ``/proc/cpuinfo``'s MHz rounded to 100 MHz);
- the peak FP32 GFLOPS the ISA allows: lanes x 2 (two vector ports: add + multiply, or two FMA pipes) x
  (2 with FMA) x clock x threads. A formula from the specification, not a measured peak: the same for
  every run, as a data sheet is (Zen 1's single 256-bit FMA path, for one, is over-counted by 2x).

Every quantity spanning orders of magnitude enters as log2. Values are deterministic on one machine.
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

#: LLVM x86 CPU models of the Blueprint's PCA catalogue (Intel and AMD generations, SSE4.2 to AVX-512)
CATALOGUE = ("nehalem", "westmere", "sandybridge", "ivybridge", "haswell", "broadwell", "skylake", "skylake-avx512",
             "cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake", "rocketlake", "alderlake",
             "sapphirerapids", "znver1", "znver2", "znver3", "znver4")
#: thread counts of the catalogue
CATALOGUE_THREADS = (1, 2, 4, 8, 16, 32, 64)

FEATURES = ("log2_vector_bits", "fma", "avx512bw", "vnni", "prefer_256_bit", "log2_vector_registers",
            "log2_isa_features", "log2_threads", "log2_l1d_kib", "log2_l2_kib", "log2_l3_kib", "clock_ghz",
            "log2_peak_gflops")


def _cache_kib() -> dict[str, float]:
    """L1d, L2 and L3 sizes in KiB of cpu0 from sysfs (0 where absent)."""
    out = {"L1d": 0.0, "L2": 0.0, "L3": 0.0}
    base = "/sys/devices/system/cpu/cpu0/cache"
    for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            with open(os.path.join(base, entry, "level")) as fh:
                level = fh.read().strip()
            with open(os.path.join(base, entry, "type")) as fh:
                kind = fh.read().strip()
            with open(os.path.join(base, entry, "size")) as fh:
                size = fh.read().strip()
        except OSError:
            continue
        key = "L1d" if level == "1" and kind == "Data" else f"L{level}" if level in ("2", "3") else None
        if key and size.endswith("K"):
            out[key] = float(size[:-1])
        elif key and size.endswith("M"):
            out[key] = float(size[:-1]) * 1024
    return out


def _clock_ghz() -> float:
    """This CPU's clock: cpufreq's maximum, else /proc/cpuinfo's MHz rounded to 100 MHz; 2.0 if neither."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as fh:
            return round(int(fh.read()) / 1e6, 1)
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            mhz = [float(line.split(":")[1]) for line in fh if line.startswith("cpu MHz")]
        if mhz:
            return round(max(mhz) / 100.0) / 10.0
    except (OSError, ValueError):
        pass
    return 2.0


@functools.cache
def machine_facts() -> tuple[float, float, float, float]:
    """``(L1d KiB, L2 KiB, L3 KiB, clock GHz)`` of this machine (read once)."""
    c = _cache_kib()
    return c["L1d"], c["L2"], c["L3"], _clock_ghz()


def cpu_target():
    """The class of ``target=llvm``, which describes the CPU models LLVM knows
    (:class:`~tunebench.targets.capabilities.DescribesCPUs`)."""
    from tunebench.targets import target_with
    from tunebench.targets.capabilities import DescribesCPUs

    return target_with("llvm", DescribesCPUs)


@functools.cache
def isa_facts(mcpu: str) -> dict[str, float]:
    """What LLVM says of CPU model ``mcpu`` (see the module docstring). Raises UserError for a name LLVM
    does not know, listing the catalogue."""
    cpus = cpu_target()
    cpus.cpu_model(str(mcpu))  # an unknown name: the target's own one-line error
    feats = cpus.cpu_isa(str(mcpu))
    bits = 512 if "avx512f" in feats else 256 if "avx" in feats else 128
    return {"vector_bits": bits, "fma": float("fma" in feats), "avx512bw": float("avx512bw" in feats),
            "vnni": float("avx512vnni" in feats or "avxvnni" in feats),
            "prefer_256_bit": float("prefer-256-bit" in feats), "vector_registers": 32 if "avx512f" in feats else 16,
            "isa_features": float(len(feats))}


def cpu_features(mcpu: str, threads: int) -> np.ndarray:
    """The raw specification vector of ``mcpu`` at ``threads`` threads (float64, in :data:`FEATURES` order)."""
    isa = isa_facts(str(mcpu))
    l1, l2, l3, ghz = machine_facts()
    lanes = isa["vector_bits"] / 32
    peak = lanes * 2 * (2 if isa["fma"] else 1) * ghz * threads
    return np.array([math.log2(isa["vector_bits"]), isa["fma"], isa["avx512bw"], isa["vnni"], isa["prefer_256_bit"],
                     math.log2(isa["vector_registers"]), math.log2(isa["isa_features"]), math.log2(threads),
                     math.log2(1 + l1), math.log2(1 + l2), math.log2(1 + l3), ghz, math.log2(peak)], dtype=np.float64)


def catalogue_features() -> np.ndarray:
    """The feature matrix of every catalogue model at every catalogue thread count (rows: models x threads)."""
    return np.stack([cpu_features(m, t) for m in CATALOGUE for t in CATALOGUE_THREADS])


def variant_name(mcpu: str, threads: int) -> str:
    """How a CPU variant is named in reports and training sets: ``<mcpu>/<threads>t``."""
    return f"{mcpu}/{int(threads)}t"
