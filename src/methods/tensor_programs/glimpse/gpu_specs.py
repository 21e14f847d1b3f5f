"""The datasheet of an NVIDIA GPU: the raw vector that Glimpse's Blueprint compresses ([Ahn-PhD] §4.4.1).

Each row of ``data/glimpse/gpus.csv`` (data/glimpse/README.md: columns, sources, the variant chosen for an
ambiguous tag) holds the public datasheet numbers of one GPU that TVM knows by a target tag
(``tvm.target.tag.list_tags()``); :func:`gpu_table` joins it with the tag's attributes (compute
capability, shared memory and registers per block, warp size, L2 where the tag gives it). :func:`gpu_features`
turns a row into the feature vector of :data:`FEATURES`; :func:`spec_for_device_name` finds the row of a CUDA
device name (``tvm.cuda(0).device_name``).

TVM is imported inside the functions: importing this module is cheap.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import re
from dataclasses import dataclass

import numpy as np

from tunebench.errors import UserError

#: the csv's columns, in order
COLUMNS = ("tag", "name", "sm_count", "cuda_cores", "base_clock_mhz", "boost_clock_mhz", "memory_gb",
           "memory_bandwidth_gbs", "fp32_gflops", "tdp_w", "source", "limits_from")

#: the raw datasheet features, in :func:`gpu_features` order
FEATURES = ("log2_sm_count", "log2_cuda_cores", "log2_boost_clock_mhz", "log2_memory_gb", "log2_memory_bandwidth_gbs",
            "log2_fp32_gflops", "log2_tdp_w", "log2_shared_memory_per_block", "log2_registers_per_block",
            "compute_capability")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: its datasheet row (units in the field names; ``base_clock_mhz`` is None where the vendor
    states no base clock) and the facts of its TVM target tag: ``tvm_tag``, the row's own tag, or for a GPU
    this TVM has no tag for, the tag of the GPU it shares its die and limits with (the csv's ``limits_from``)."""

    tag: str
    name: str
    sm_count: int
    cuda_cores: int
    base_clock_mhz: float | None
    boost_clock_mhz: float
    memory_gb: float
    memory_bandwidth_gbs: float
    fp32_gflops: float
    tdp_w: float
    source: str
    tvm_tag: str
    arch: str  # "sm_86"
    compute_capability: float  # 8.6
    max_shared_memory_per_block: int  # bytes
    max_threads_per_block: int
    registers_per_block: int
    warp_size: int
    l2_bytes: int  # 0 where the tag does not give it


def gpu_target():
    """The class of ``target=cuda``, which describes the GPUs TVM knows by a target tag
    (:class:`~tunebench.targets.capabilities.DescribesGPUs`)."""
    from tunebench.targets import target_with
    from tunebench.targets.capabilities import DescribesGPUs

    return target_with("cuda", DescribesGPUs)


def compute_capability(arch: str) -> float:
    """``"sm_86"`` -> 8.6 (the target's reading of a CUDA arch)."""
    return gpu_target().compute_capability(arch)


def csv_path() -> str:
    """The shipped table ``data/glimpse/gpus.csv``."""
    from tunebench.resources import data_dir

    return os.path.join(data_dir("glimpse"), "gpus.csv")


def _row_spec(row: dict[str, str]) -> GpuSpec:
    """A csv row joined with its tag's attributes (those of ``limits_from`` where it is set)."""
    tvm_tag = row["limits_from"].strip() or row["tag"]
    attrs = gpu_target().gpu_tag_attrs(tvm_tag)
    arch = str(attrs["arch"])
    base = row["base_clock_mhz"].strip()
    return GpuSpec(
        tag=row["tag"], name=row["name"], sm_count=int(row["sm_count"]), cuda_cores=int(row["cuda_cores"]),
        base_clock_mhz=float(base) if base else None, boost_clock_mhz=float(row["boost_clock_mhz"]),
        memory_gb=float(row["memory_gb"]), memory_bandwidth_gbs=float(row["memory_bandwidth_gbs"]),
        fp32_gflops=float(row["fp32_gflops"]), tdp_w=float(row["tdp_w"]), source=row["source"],
        tvm_tag=tvm_tag, arch=arch, compute_capability=compute_capability(arch),
        max_shared_memory_per_block=int(attrs["max_shared_memory_per_block"]),
        max_threads_per_block=int(attrs["max_threads_per_block"]),
        registers_per_block=int(attrs["registers_per_block"]), warp_size=int(attrs["thread_warp_size"]),
        l2_bytes=int(attrs.get("l2_cache_size_bytes") or 0))


@functools.lru_cache(maxsize=4)
def _table(path: str) -> tuple[GpuSpec, ...]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise UserError(f"{path}: columns {reader.fieldnames}, expected {list(COLUMNS)}")
        rows = list(reader)
    tags = [r["tag"] for r in rows]
    if len(set(tags)) != len(tags):
        raise UserError(f"{path}: a tag appears twice: {sorted({t for t in tags if tags.count(t) > 1})}")
    return tuple(_row_spec(r) for r in rows)


def gpu_table(path: str | None = None) -> list[GpuSpec]:
    """Every GPU of the table (``path``, default the shipped csv), in file order.

    Raises:
        UserError: unexpected columns, a repeated tag, or a tag TVM does not know (named).
    """
    return list(_table(path or csv_path()))


def spec_for_tag(tag: str) -> GpuSpec:
    """The row of a TVM target tag (``"nvidia/geforce-rtx-3090"``).

    Raises:
        UserError: no row has that tag.
    """
    for spec in gpu_table():
        if spec.tag == tag:
            return spec
    raise UserError(f"no row of {csv_path()} has the tag {tag!r}")


def gpu_features(spec: GpuSpec) -> np.ndarray:
    """The raw datasheet vector of ``spec`` (float64, in :data:`FEATURES` order).

    Quantities spanning orders of magnitude across the table enter as log2:

    - ``log2_sm_count``: streaming multiprocessors (1 on a Jetson Nano to 132 on an H100);
    - ``log2_cuda_cores``: FP32 cores (128 to 16,896);
    - ``log2_boost_clock_mhz``: the clock the FP32 peak is computed at;
    - ``log2_memory_gb``: device memory (shared with the CPU on a Jetson);
    - ``log2_memory_bandwidth_gbs``: peak DRAM bandwidth (25.6 to 3,350 GB/s);
    - ``log2_fp32_gflops``: peak FP32 (2 x cores x boost clock);
    - ``log2_tdp_w``: board power / TDP (10 to 700 W);
    - ``log2_shared_memory_per_block``, ``log2_registers_per_block``: the tag's per-block limits;
    - ``compute_capability``: e.g. 8.6, linear (it orders the architecture generations).

    The tag's L2 size is not a feature: TVM's tags give it for a handful of GPUs only.
    """
    values = (spec.sm_count, spec.cuda_cores, spec.boost_clock_mhz, spec.memory_gb, spec.memory_bandwidth_gbs,
              spec.fp32_gflops, spec.tdp_w, spec.max_shared_memory_per_block, spec.registers_per_block)
    return np.array([math.log2(v) for v in values] + [spec.compute_capability], dtype=np.float64)


# ---- CUDA device names -----------------------------------------------------------------------

_BRANDS = {"nvidia", "geforce", "tesla", "quadro"}
_FORMS = re.compile(r"(sxm\d?|pcie|nvl)")  # board form factors that change the numbers
_MEMORY = re.compile(r"(\d+)gb")
_SUFFIXES = {"k20c": "k20", "k20m": "k20", "k40c": "k40", "k40m": "k40", "k40s": "k40", "k40t": "k40"}


def _words(text: str) -> list[str]:
    """Lower-case alphanumeric words of ``text``, parenthesized parts dropped."""
    return re.findall(r"[a-z0-9]+", re.sub(r"\([^)]*\)", " ", text.lower()))


def _model_words(words: list[str]) -> tuple[str, ...]:
    """The words naming the model: no brand, memory size, memory type or form factor."""
    keep = []
    for w in words:
        if w in _BRANDS or _MEMORY.fullmatch(w) or _FORMS.fullmatch(w) or re.fullmatch(r"(hbm|gddr)\w*", w):
            continue
        keep.append(_SUFFIXES.get(w, w))
    return tuple(keep)


def _qualifiers(words: list[str]) -> tuple[set[str], set[str]]:
    """``(form factors, memory sizes)`` named among ``words``."""
    return {w for w in words if _FORMS.fullmatch(w)}, {w for w in words if _MEMORY.fullmatch(w)}


def spec_for_device_name(device_name: str) -> GpuSpec | None:
    """The row of a CUDA device name (``"NVIDIA GeForce RTX 3090"``, ``"NVIDIA H100 80GB HBM3"``,
    ``"Tesla V100-SXM2-16GB"``), or None when no row matches.

    The model words (brand, memory size and type, form factor removed) must equal those of a row's tag; a
    form factor (SXM2, PCIe, ...) or memory size the device name states must not contradict the row's name
    (an ``"NVIDIA H100 PCIe"`` is not the SXM5 row). Jetson modules report their SoC (``"Orin"``,
    ``"NVIDIA Tegra X1"``), which does not tell the module apart: use :func:`spec_for_tag` for them.
    """
    words = _words(device_name)
    model = _model_words(words)
    if not model:
        return None
    forms, sizes = _qualifiers(words)
    for spec in gpu_table():
        if _model_words(_words(spec.tag.split("/", 1)[1].replace("-", " "))) != model:
            continue
        row_forms, row_sizes = _qualifiers(_words(spec.name))
        if (forms and row_forms and forms != row_forms) or (sizes and row_sizes and sizes != row_sizes):
            continue
        return spec
    return None
