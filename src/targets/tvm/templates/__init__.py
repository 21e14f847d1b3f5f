"""AutoTVM-style tuning templates for fused Relax tasks, on ``tvm.s_tir`` schedules.

Usage::

    from tunebench.targets.tvm.templates import get_template, TEMPLATE_KINDS
    tpl = get_template("conv2d", "cuda")
    space = tpl.make_space(task.mod)              # tunebench.space.Space
    sched = tpl.apply(task.mod, space.get(i))     # scheduled IRModule, ready for tvm.compile
    err = tpl.check(task.mod, space.get(i), limits)   # cuda: GPU limits from the knobs alone
    err = tpl.verify(sched, limits)               # cuda: verify_gpu_code on the lowered kernel

``TEMPLATE_KINDS`` maps each supported ``(task_kind, target_kind)`` pair to its template class.
The templates and their knobs are documented in :mod:`.cuda` and :mod:`.cpu`; the analysis of
a fused function (main block, pad and epilogue blocks, extents) in :mod:`.fused`.
"""

from __future__ import annotations

from .cpu import CpuConv2d, CpuDense, CpuDepthwiseConv2d
from .cuda import CudaConv2dDirect, CudaDense, CudaDepthwiseConv2d
from .fused import FusedInfo, Template, analyze

TASK_KINDS = ("conv2d", "depthwise_conv2d", "dense")
TARGET_KINDS = ("llvm", "cuda")

#: (task_kind, target_kind) -> template class
TEMPLATE_KINDS: dict[tuple[str, str], type[Template]] = {
    ("conv2d", "llvm"): CpuConv2d,
    ("depthwise_conv2d", "llvm"): CpuDepthwiseConv2d,
    ("dense", "llvm"): CpuDense,
    ("conv2d", "cuda"): CudaConv2dDirect,
    ("depthwise_conv2d", "cuda"): CudaDepthwiseConv2d,
    ("dense", "cuda"): CudaDense,
}


def get_template(task_kind: str, target_kind: str) -> Template:
    """The template for ``task_kind`` (``"conv2d"``, ``"depthwise_conv2d"``, ``"dense"``) on
    ``target_kind`` (``"llvm"``, ``"cuda"``).

    Raises:
        ValueError: for an unknown task or target kind, naming the valid ones.
    """
    if task_kind not in TASK_KINDS:
        raise ValueError(f"unknown task kind {task_kind!r}; valid: {', '.join(TASK_KINDS)}")
    if target_kind not in TARGET_KINDS:
        raise ValueError(f"unknown target kind {target_kind!r}; valid: {', '.join(TARGET_KINDS)}")
    return TEMPLATE_KINDS[(task_kind, target_kind)]()


__all__ = ["TASK_KINDS", "TARGET_KINDS", "TEMPLATE_KINDS", "FusedInfo", "Template", "analyze",
           "get_template"]
