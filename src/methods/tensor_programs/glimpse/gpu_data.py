"""Static GPU validity as Glimpse training data ([Ahn-PhD] §4.4.3): validity-only groups of CUDA configs of a
zoo model's tasks under the limits of TVM's GPU tags, each GPU with its datasheet row (its Blueprint).

Labels come from the knob values (:func:`~tunebench.methods.tensor_programs.glimpse.gpu_validity.static_labels`, which agrees
with ``verify_gpu_code`` on the lowered kernels); tags whose limits are equal share one labelling. With
TVM's static shared memory (48 KiB on every GPU) all tagged GPUs have the same limits: the labels then differ
by task and config only, not by GPU (docs/DESIGN_NOTES.md §method=glimpse).
"""

from __future__ import annotations

import numpy as np

from tunebench.methods.tensor_programs.glimpse.blueprint import Hardware
from tunebench.methods.tensor_programs.glimpse.dataset import Group, group_from_values


def table_tags() -> list[str]:
    """The tags of the GPUs with a datasheet row, in table order."""
    from tunebench.methods.tensor_programs.glimpse.gpu_specs import gpu_table

    return [s.tag for s in gpu_table()]


def gpu_hardware(tag: str) -> Hardware:
    from tunebench.methods.tensor_programs.glimpse.gpu_specs import gpu_features, spec_for_tag

    return Hardware("gpu", tag, tuple(gpu_features(spec_for_tag(tag))))


def gpu_limits(tag: str) -> dict:
    """The ``verify_gpu_code`` limits of the table's GPU ``tag``: those of its TVM tag (the tag of the GPU it
    shares its die with, where TVM has none of its own)."""
    from tunebench.methods.tensor_programs.glimpse.gpu_specs import spec_for_tag
    from tunebench.methods.tensor_programs.glimpse.gpu_validity import tag_limits

    return tag_limits(spec_for_tag(tag).tvm_tag)


def labelled_configs(n_configs: int, seed: int, model: str = "resnet18", tasks: int = 6) -> list[tuple]:
    """``[(task, template, space, indices)]``: ``n_configs`` random configs of each of the first ``tasks``
    distinct conv2d tasks of ``model`` on ``cuda``."""
    from tunebench.methods.tensor_programs.glimpse.gpu_validity import cuda_tasks

    rng = np.random.default_rng(seed)
    out = []
    for task, template, space in cuda_tasks(model)[:tasks]:
        out.append((task, template, space, space.sample(rng, min(n_configs, space.size))))
    return out


def static_groups_for(tags: list[str], configs: list[tuple]) -> list[Group]:
    """One validity-only group per (task, tag), labelled under the tag's limits."""
    from tunebench.methods.tensor_programs.glimpse.gpu_validity import static_labels

    cache: dict[tuple, np.ndarray] = {}
    groups = []
    for tag in tags:
        limits = gpu_limits(tag)
        hw = gpu_hardware(tag)
        for task, template, space, indices in configs:
            key = (task.id, tuple(sorted(limits.items())))
            if key not in cache:
                cache[key] = static_labels(task, template, space, indices, limits)
            g = group_from_values(hw, {"task_id": task.id, "kind": task.kind, "shape": task.shape,
                                       "flops": task.flops}, [space.get(int(i)).to_dict() for i in indices],
                                  list(cache[key]), None)
            if g is not None:
                groups.append(g)
    return groups


def static_groups(n_tags: int, n_configs: int, seed: int = 0) -> list[Group]:
    """Validity-only groups of the first ``n_tags`` GPUs of the table (``glimpse train --gpu-static-tags``)."""
    return static_groups_for(table_tags()[:n_tags], labelled_configs(n_configs, seed))
