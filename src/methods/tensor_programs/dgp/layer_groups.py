"""Layer groups for transfer learning ([Sun-ICCV21] §4.2; docs/METHODS.md §dgp step 1).

Layers are grouped by (operator type, kernel size, padding, stride); knowledge is learned and
transferred only within a group. The paper lists type, kernel size and padding; the reported group
counts (VGG-16 1, ResNet-18 4, AlexNet 3, MobileNet-v1 4) come out only with the stride included.
Dense layers (which the paper leaves to TVM's defaults) form one group of their own, so that every
task of a model is tuned; :func:`count_conv_groups` counts only the convolution groups the paper counts.
A measured space with no layer (kind ``measured``: a Kernel Tuner cache) groups with the same kernel
measured elsewhere (another GPU): the same kernel name and the same knobs; a kernel with other knobs
(e.g. fewer of them) is a group of its own.
"""

from __future__ import annotations

CONV_KINDS = ("conv2d", "depthwise_conv2d")
MEASURED = "measured"


def group_key(kind: str, shape: dict, name: str = "", knobs=()) -> tuple:
    """The group of a layer: ``(kind, kernel, padding, stride)`` for convolutions, ``("measured", kernel
    name, knob names)`` for a measured kernel with no layer, ``(kind,)`` otherwise.

    Args:
        kind: the task kind (``"conv2d"``, ``"depthwise_conv2d"``, ``"dense"``, ``"measured"``).
        shape: the task's shape parameters (conv: ``kernel``, ``padding``, ``stride`` as ints or pairs).
        name, knobs: the task's name and its space's knob names (used for kind ``measured`` only).
    """
    if kind in CONV_KINDS:
        return (kind, _pair(shape["kernel"]), _pair(shape["padding"]), _pair(shape["stride"]))
    if kind == MEASURED:
        return (kind, str(name), tuple(sorted(knobs)))
    return (kind,)


def _pair(v) -> tuple:
    if isinstance(v, (list, tuple)):
        return tuple(int(x) for x in v)
    return (int(v), int(v))


def task_group(task) -> tuple:
    """:func:`group_key` of a :class:`~tunebench.task.Task` (or anything with ``kind``, ``shape``, ``name``
    and ``space``)."""
    space = getattr(task, "space", None)
    return group_key(task.kind, task.shape, getattr(task, "name", ""),
                     [k.name for k in space.knobs] if space is not None else ())


def history_group(task) -> tuple:
    """:func:`group_key` of a :class:`~tunebench.history.HistoryTask`: its kernel name and knob names from
    its first record (``task_name``, the keys of ``config``)."""
    first = task.records[0] if task.records else {}
    return group_key(task.kind, task.shape, first.get("task_name", ""), list((first.get("config") or {}).keys()))


def layer_groups(tasks) -> dict[tuple, list]:
    """Tasks by group, groups and their tasks in model order (the first task of a group is its source)."""
    out: dict[tuple, list] = {}
    for t in tasks:
        out.setdefault(task_group(t), []).append(t)
    return out


def count_conv_groups(tasks) -> int:
    """Number of convolution groups, the count [Sun-ICCV21] §4.2 reports per model."""
    return sum(1 for key in layer_groups(tasks) if key[0] in CONV_KINDS)


def group_name(key: tuple) -> str:
    """A readable name, e.g. ``conv2d_k3x3_p1x1_s1x1`` or ``dense``."""
    if len(key) == 1:
        return key[0]
    if key[0] == MEASURED:
        return f"{key[1]} ({', '.join(key[2])})"
    kind, k, p, s = key
    return f"{kind}_k{k[0]}x{k[1]}_p{p[0]}x{p[1]}_s{s[0]}x{s[1]}"
