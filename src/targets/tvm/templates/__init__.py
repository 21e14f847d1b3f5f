"""AutoTVM-style tuning templates for fused Relax tasks, on ``tvm.s_tir`` schedules.

Usage::

    from tunebench.targets.tvm.templates import get_template, TEMPLATE_KINDS
    tpl = get_template("conv2d", "cuda")
    space = tpl.make_space(task.mod)              # tunebench.search_space.Space
    sched = tpl.apply(task.mod, space.get(i))     # scheduled IRModule, ready for tvm.compile
    err = tpl.check(task.mod, space.get(i), limits)   # cuda: GPU limits from the knobs alone
    err = tpl.verify(sched, limits)               # cuda: verify_gpu_code on the lowered kernel

``TEMPLATE_KINDS`` maps each supported ``(task_kind, target_kind, variant)`` to its template class.
A target kind has one or more template *variants* (``VARIANTS``; the first is the default):
``llvm`` has ``packed`` (conv2d and dense on weights pre-packed once per model: AutoTVM's x86
``conv2d_NCHWc`` and ``dense_pack``, :mod:`.cpu_packed`; output channels without a vector-wide
divisor padded, :mod:`.cpu_packed_pad`) and ``nchw`` (tiled NCHW loop nests on the
weights as they are, :mod:`.cpu`); depthwise conv2d uses the NCHW template in both. ``cuda`` has
``direct`` (:mod:`.cuda`; dense of one row, a batch-1 layer, takes the split-K GEMV template of
:mod:`.cuda_gemv`) and ``winograd`` (3×3 stride-1 conv2d by Winograd's minimal filtering, :mod:`.cuda_winograd`;
every other task as in ``direct``). ``flex`` (llvm and cuda) is no template: a space derived from any task's loop nest
(:mod:`.flex`, :mod:`.flex_cuda`, [Zheng-ASPLOS20]), for every task kind, the single operators of ``model=ops`` included.
The analysis of a fused function (main block, pad and epilogue blocks, extents) is in :mod:`.fused`.
"""

from __future__ import annotations

from ..variants import VARIANTS
from .cpu import CpuConv2d, CpuDense, CpuDepthwiseConv2d
from .cpu_packed import CpuDensePacked
from .cpu_packed_pad import CpuConv2dPackedPadded
from .cuda import CudaConv2dDirect, CudaDepthwiseConv2d
from .cuda_gemv import CudaDenseDirect
from .cuda_winograd import CudaConv2dWinograd
from .flex import FlexCpu
from .flex_cuda import FlexCuda
from .fused import FusedInfo, Template, analyze

TASK_KINDS = ("conv2d", "depthwise_conv2d", "dense")
TARGET_KINDS = ("llvm", "cuda")
#: variants that are no template: a space for any task kind, from its loop nest
FLEX = {("llvm", "flex"): FlexCpu, ("cuda", "flex"): FlexCuda}


#: (task_kind, target_kind, variant) -> template class
TEMPLATE_KINDS: dict[tuple[str, str, str], type[Template]] = {
    ("conv2d", "llvm", "packed"): CpuConv2dPackedPadded,  # CpuConv2dPacked, channels padded where needed
    ("depthwise_conv2d", "llvm", "packed"): CpuDepthwiseConv2d,
    ("dense", "llvm", "packed"): CpuDensePacked,
    ("conv2d", "llvm", "nchw"): CpuConv2d,
    ("depthwise_conv2d", "llvm", "nchw"): CpuDepthwiseConv2d,
    ("dense", "llvm", "nchw"): CpuDense,
    ("conv2d", "cuda", "direct"): CudaConv2dDirect,
    ("depthwise_conv2d", "cuda", "direct"): CudaDepthwiseConv2d,
    ("dense", "cuda", "direct"): CudaDenseDirect,  # M = 1: CudaGemv, else CudaDense
    ("conv2d", "cuda", "winograd"): CudaConv2dWinograd,  # 3×3 stride 1: CudaWinograd, else CudaConv2dDirect
    ("depthwise_conv2d", "cuda", "winograd"): CudaDepthwiseConv2d,
    ("dense", "cuda", "winograd"): CudaDenseDirect,
}


def missing_template(task_kind: str, target_kind: str, variant: str) -> str | None:
    """Why ``variant`` of ``target_kind`` has no template for ``task_kind`` tasks (None: it has one, or
    it is a ``FLEX`` variant, which has a space for every kind)."""
    if (target_kind, variant) in FLEX or task_kind in TASK_KINDS:
        return None
    flex = [v for t, v in FLEX if t == target_kind]
    return (f"no {variant} template for {task_kind!r} tasks (it has {', '.join(TASK_KINDS)})"
            + (f"; target.template={flex[0]} searches any task" if flex else ""))


def get_template(task_kind: str, target_kind: str, variant: str | None = None) -> Template:
    """The template for ``task_kind`` (``"conv2d"``, ``"depthwise_conv2d"``, ``"dense"``; any kind in a
    ``FLEX`` variant) on ``target_kind`` (``"llvm"``, ``"cuda"``) in ``variant`` (None or ``""``: the
    target kind's default).

    Raises:
        ValueError: for an unknown task kind, target kind or variant, naming the valid ones.
    """
    if target_kind not in TARGET_KINDS:
        raise ValueError(f"unknown target kind {target_kind!r}; valid: {', '.join(TARGET_KINDS)}")
    variant = variant or VARIANTS[target_kind][0]
    if variant not in VARIANTS[target_kind]:
        raise ValueError(f"unknown template {variant!r} for {target_kind}; valid: {', '.join(VARIANTS[target_kind])}")
    if (target_kind, variant) in FLEX:
        return FLEX[(target_kind, variant)](task_kind)
    if problem := missing_template(task_kind, target_kind, variant):
        raise ValueError(problem)
    return TEMPLATE_KINDS[(task_kind, target_kind, variant)]()


__all__ = ["TASK_KINDS", "TARGET_KINDS", "TEMPLATE_KINDS", "FLEX", "FusedInfo", "Template", "analyze",
           "get_template", "missing_template"]
