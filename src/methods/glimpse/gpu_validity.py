"""Static validity of CUDA template configs under a GPU's limits, without a GPU.

A config of a CUDA template (:mod:`tunebench.targets.tvm.templates.cuda`) is invalid on a GPU when its
kernel breaks one of the GPU's per-block limits: threads per block, the extent of each thread dimension,
virtual threads per dimension, or the bytes of its staged shared-memory tiles. Both verdicts of a template
need only the limits, so they can be computed for any GPU TVM knows by a target tag: these are the
validity labels a hardware-aware model of Glimpse learns from ([Ahn-PhD] Ch. 4).

- :func:`tag_limits`: the ``verify_gpu_code`` limits of a tag (the keys ``CUDATarget`` takes from a live
  device);
- :func:`cuda_tasks`: a model's CUDA tasks with their template and space (task extraction and lowering
  need no GPU);
- :func:`static_labels`: valid / invalid per config, from the knobs alone or from the lowered kernel.
"""

from __future__ import annotations

import numpy as np

from tunebench.methods.glimpse.gpu_specs import compute_capability, tag_attrs

#: the largest x, y, z extent of a thread block, the same for every compute capability >= 2.0 (NVIDIA CUDA
#: C++ Programming Guide, table "Technical Specifications per Compute Capability": maximum x- or
#: y-dimension of a block 1024, maximum z-dimension of a block 64)
MAX_THREAD_DIMS = (1024, 1024, 64)

#: the shared memory a block may allocate statically (``__shared__`` arrays, which is what TVM emits for
#: ``"shared"`` buffers): 48 KiB on every GPU. More needs dynamic shared memory and a per-kernel opt-in
#: (``cudaFuncSetAttribute``), NVIDIA CUDA C++ Programming Guide, shared memory of compute capability 7.x+.
STATIC_SHARED_BYTES = 48 * 1024


def tag_limits(tag: str, max_vthread: int = 8, static_shared: bool = True) -> dict:
    """The ``verify_gpu_code`` limits of the GPU of a TVM target tag (``"nvidia/geforce-rtx-3090"``).

    Keys as ``CUDATarget._set_gpu`` builds them from a live device: ``max_threads_per_block`` and
    ``max_shared_memory_per_block`` from the tag, ``max_thread_x/y/z`` from :data:`MAX_THREAD_DIMS`,
    ``max_vthread`` as given (AutoTVM's limit on virtual threads per axis). With ``static_shared`` the
    shared memory is capped at :data:`STATIC_SHARED_BYTES`, the limit of the templates' kernels; a tag's
    larger value (``nvidia/jetson-agx-thor``: 232,448 bytes) is the opt-in maximum, which the
    device attribute ``max_shared_memory_per_block`` a live device reports does not include either.

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
    x, y, z = MAX_THREAD_DIMS
    return {"max_threads_per_block": int(attrs["max_threads_per_block"]), "max_shared_memory_per_block": shared,
            "max_thread_x": x, "max_thread_y": y, "max_thread_z": z, "max_vthread": int(max_vthread)}


def nvidia_tags() -> list[str]:
    """Every ``nvidia/...`` target tag of this TVM, sorted."""
    import tvm

    return sorted(t for t in tvm.target.tag.list_tags() if t.startswith("nvidia/"))


def cuda_tasks(model_name: str = "resnet18", kinds: tuple[str, ...] = ("conv2d",)) -> list[tuple]:
    """``[(task, template, space)]``: the CUDA tasks of a zoo model whose kind is in ``kinds``, in model
    order, with the default CUDA template of each and its knob space (``task.space`` set as well).

    The model is imported for the ``cuda`` target kind (:func:`tunebench.datasets.tasks.model_tasks`, cached
    in-process); nothing here needs a GPU.
    """
    from tunebench.datasets.tasks import model_tasks
    from tunebench.targets.tvm.templates import get_template

    tasks, _ = model_tasks({"name": model_name}, "cuda")
    out = []
    for task in tasks:
        if task.kind not in kinds:
            continue
        template = get_template(task.kind, "cuda")
        task.space = template.make_space(task.mod)
        out.append((task, template, task.space))
    return out


def static_labels(task, template, space, indices, limits: dict, lowered: bool = False) -> np.ndarray:
    """Validity (True = valid) of the configs ``indices`` of ``space`` under ``limits``.

    ``lowered=False``: from the knob values alone (``template.check``: thread extents of the tile knobs and
    the bytes of the staged tiles); 0.7-1.0 ms a config on a 2-core VM (four ResNet-18 conv tasks).
    ``lowered=True``: the schedule is applied (``template.apply``), lowered up to storage rewrite and checked
    by TVM's ``verify_gpu_code`` (``template.verify``); 20-36 ms a config on the same machine and tasks. The
    two agree (the templates' tests, and tests/methods/test_glimpse_gpu.py on ResNet-18).
    """
    out = np.zeros(len(indices), dtype=bool)
    for i, index in enumerate(indices):
        config = space.get(int(index))
        if lowered:
            reason = template.verify(template.apply(task.mod, config), limits)
        else:
            reason = template.check(task.mod, config, limits)
        out[i] = reason is None
    return out
