"""Static validity of CUDA template configs under a GPU's limits, without a GPU.

A config of a CUDA template (:mod:`tunebench.targets.tvm.templates.cuda`) is invalid on a GPU when its
kernel breaks one of the GPU's per-block limits: threads per block, the extent of each thread dimension,
virtual threads per dimension, or the bytes of its staged shared-memory tiles. Both verdicts of a template
need only the limits, so they can be computed for any GPU TVM knows by a target tag: these are the
validity labels a hardware-aware model of Glimpse learns from ([Ahn-PhD] Ch. 4).

- :func:`tag_limits`: the ``verify_gpu_code`` limits of a tag (the keys the ``cuda`` target takes from a
  live device; what the target offers, :class:`~tunebench.targets.capabilities.DescribesGPUs`);
- :func:`cuda_tasks`: a model's CUDA tasks with their template and space (task extraction and lowering
  need no GPU);
- :func:`static_labels`: valid / invalid per config, from the knobs alone or from the lowered kernel.
"""

from __future__ import annotations

import numpy as np

from tunebench.methods.tensor_programs.glimpse.gpu_specs import gpu_target


def tag_limits(tag: str, **options) -> dict:
    """The per-block limits of the GPU of the TVM target tag ``tag`` (the target's,
    :meth:`~tunebench.targets.capabilities.DescribesGPUs.gpu_tag_limits`, with its ``options``)."""
    return gpu_target().gpu_tag_limits(tag, **options)


def cuda_tasks(model_name: str = "resnet18", kinds: tuple[str, ...] = ("conv2d",),
               variant: str | None = None) -> list[tuple]:
    """``[(task, template, space)]``: the CUDA tasks of a zoo model whose kind is in ``kinds``, in model
    order, with the CUDA template of each in ``variant`` (None: the default) and its knob space
    (``task.space`` set as well).

    The model is imported for the ``cuda`` target kind (what the target extracts offline,
    :class:`~tunebench.targets.capabilities.ExtractsTasks`; cached in-process); nothing here needs a GPU.
    """
    from tunebench.targets import target_with
    from tunebench.targets.capabilities import ExtractsTasks

    cuda = target_with("cuda", ExtractsTasks)
    out = []
    for task in cuda.model_tasks({"name": model_name}):
        if task.kind not in kinds:
            continue
        template = cuda.task_template(task, variant)
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
