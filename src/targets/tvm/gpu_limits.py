"""The per-block limits of a CUDA GPU, from its TVM target tag or from the device itself.

A CUDA kernel cannot launch when it breaks one of its GPU's per-block limits: threads per block, the
extent of each thread dimension, or the bytes of shared memory it allocates; AutoTVM also bounds the
virtual threads per axis. The limits are a dict with the keys of ``verify_gpu_code``
(``max_threads_per_block``, ``max_thread_x/y/z``, ``max_vthread``, ``max_shared_memory_per_block``),
which the CUDA templates check (:mod:`tunebench.targets.tvm.templates.cuda`).

- :func:`tag_limits`: the limits of the GPU of a TVM target tag (``"nvidia/nvidia-h100"``): no GPU needed;
- :func:`device_limits`: the limits a live CUDA device reports;
- :func:`tightest`: the smaller value of each limit of two dicts (a tag's and the device's);
- :func:`tag_problem`: why a string is not a CUDA target tag of this TVM (the ``target.tag`` check).

TVM is imported inside the functions: importing this module is cheap.
"""

from __future__ import annotations

import re

from tunebench.errors import UserError

#: the largest x, y, z extent of a thread block, the same for every compute capability >= 2.0 (NVIDIA CUDA
#: C++ Programming Guide, table "Technical Specifications per Compute Capability": maximum x- or
#: y-dimension of a block 1024, maximum z-dimension of a block 64)
MAX_THREAD_DIMS = (1024, 1024, 64)

#: the shared memory a block may allocate statically (``__shared__`` arrays, which is what TVM emits for
#: ``"shared"`` buffers): 48 KiB on every GPU. More needs dynamic shared memory and a per-kernel opt-in
#: (``cudaFuncSetAttribute``), NVIDIA CUDA C++ Programming Guide, shared memory of compute capability 7.x+.
STATIC_SHARED_BYTES = 48 * 1024

#: how to list the tags this TVM knows (named in the error of a bad ``target.tag``)
LIST_TAGS = ("python -c \"import tvm; print(sorted(t for t in tvm.target.tag.list_tags() "
             "if t.startswith('nvidia/')))\"")


def compute_capability(arch: str) -> float:
    """``"sm_86"`` -> 8.6, ``"sm_90a"`` -> 9.0, ``"sm_120"`` -> 12.0 (the last digit is the minor version)."""
    m = re.fullmatch(r"sm_(\d+)(\d)[a-z]?", arch)
    if m is None:
        raise ValueError(f"not a CUDA arch: {arch!r}")
    return int(m.group(1)) + int(m.group(2)) / 10


def tag_attrs(tag: str) -> dict:
    """The attributes of a TVM target tag (``dict(Target(tag).attrs)``).

    Raises:
        UserError: TVM has no such tag.
    """
    import tvm

    if tag not in tvm.target.tag.list_tags():
        raise UserError(f"TVM {tvm.__version__} has no target tag {tag!r} (tvm.target.tag.list_tags())")
    return dict(tvm.target.Target(tag).attrs)


def nvidia_tags() -> list[str]:
    """Every ``nvidia/...`` target tag of this TVM, sorted."""
    import tvm

    return sorted(t for t in tvm.target.tag.list_tags() if t.startswith("nvidia/"))


def tag_problem(tag) -> str | None:
    """Why ``tag`` is not the tag of a CUDA GPU of compute capability 2.0 or newer that this TVM knows, in
    the words of a knob check (None: it is one)."""
    import tvm

    if not isinstance(tag, str) or tag not in tvm.target.tag.list_tags():
        return (f"not a target tag of TVM {tvm.__version__}; valid: a CUDA GPU's tag, e.g. nvidia/nvidia-h100, "
                f"nvidia/nvidia-a100, nvidia/geforce-rtx-3090; list them all: {LIST_TAGS}")
    target = tvm.target.Target(tag)
    if target.kind.name != "cuda":
        return f"the tag of a {target.kind.name} target, not of a CUDA GPU; list the CUDA tags: {LIST_TAGS}"
    if compute_capability(str(target.attrs["arch"])) < 2.0:
        return "a GPU older than compute capability 2.0 (other block limits)"
    return None


def tag_limits(tag: str, max_vthread: int = 8, static_shared: bool = True) -> dict:
    """The ``verify_gpu_code`` limits of the GPU of a TVM target tag (``"nvidia/geforce-rtx-3090"``).

    ``max_threads_per_block`` and ``max_shared_memory_per_block`` from the tag, ``max_thread_x/y/z`` from
    :data:`MAX_THREAD_DIMS`, ``max_vthread`` as given (AutoTVM's limit on virtual threads per axis): the keys
    of :func:`device_limits`. With ``static_shared`` the shared memory is capped at
    :data:`STATIC_SHARED_BYTES`, the limit of the templates' kernels; a tag's larger value
    (``nvidia/jetson-agx-thor``: 232,448 bytes) is the opt-in maximum, which the device attribute
    ``max_shared_memory_per_block`` a live device reports does not include either.

    Raises:
        UserError: TVM has no such tag.
        ValueError: the tag's GPU is older than compute capability 2.0.
    """
    attrs = tag_attrs(tag)
    if compute_capability(str(attrs["arch"])) < 2.0:
        raise ValueError(f"{tag}: compute capability below 2.0 has other block limits")
    shared = int(attrs["max_shared_memory_per_block"])
    if static_shared:
        shared = min(shared, STATIC_SHARED_BYTES)
    return device_limits({"max_threads_per_block": attrs["max_threads_per_block"], "max_shared_memory_per_block": shared,
                          "max_thread_dimensions": MAX_THREAD_DIMS}, max_vthread)


def tag_gpu(tag: str) -> dict:
    """The properties of the GPU of a CUDA tag, in the form a live device reports them
    (:func:`device_limits`' input): ``name`` (the tag), ``compute_version`` (``"9.0"``),
    ``max_threads_per_block``, ``max_shared_memory_per_block`` (capped at :data:`STATIC_SHARED_BYTES`),
    ``warp_size``, ``max_thread_dimensions``."""
    attrs, limits = tag_attrs(tag), tag_limits(tag)
    cc = compute_capability(str(attrs["arch"]))
    return {"name": tag, "compute_version": f"{int(cc)}.{round(cc * 10) % 10}",
            "max_threads_per_block": limits["max_threads_per_block"],
            "max_shared_memory_per_block": limits["max_shared_memory_per_block"],
            "warp_size": int(attrs["thread_warp_size"]), "max_thread_dimensions": list(MAX_THREAD_DIMS)}


def device_limits(gpu: dict, max_vthread: int) -> dict:
    """The ``verify_gpu_code`` limits of a GPU from its properties (``gpu``: ``max_threads_per_block``,
    ``max_shared_memory_per_block``, ``max_thread_dimensions`` as a live device or :func:`tag_gpu` gives
    them)."""
    dims = gpu["max_thread_dimensions"]
    return {"max_threads_per_block": int(gpu["max_threads_per_block"]),
            "max_shared_memory_per_block": int(gpu["max_shared_memory_per_block"]),
            "max_thread_x": int(dims[0]), "max_thread_y": int(dims[1]), "max_thread_z": int(dims[2]),
            "max_vthread": int(max_vthread)}


def tightest(a: dict, b: dict) -> dict:
    """Every limit of ``a`` and ``b``, the smaller value where both have it."""
    return {k: min(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}
