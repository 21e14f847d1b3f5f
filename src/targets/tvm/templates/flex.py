"""Template-free schedule spaces (``target.template=flex``), derived from a task's loop nest as
[Zheng-ASPLOS20] (FlexTensor) §4 derives them: no hand-written template per operator.

The main block is the function's one reduction block; its iteration variables are its *spatial* axes
(data parallel) and *reduce* axes. Blocks before it (padding, zero insertion of a transposed
convolution, a kernel flip) are *producers*; elementwise blocks after it (bias, residual, ReLU of a
fused Relax task) are the *epilogue*. Every task kind with one reduction block has a space, the
operators of ``model=ops`` and the fused conv2d / depthwise / dense tasks of a model alike.

Knobs, in this order (FlexTensor's CPU space, §4.2 and its published code):

- ``sp_<axis>``: every spatial axis split into 4 factors (outermost first), divisors only;
- ``re_<axis>``: every reduce axis split into 4 factors (FlexTensor's CPU space uses as many reduce
  levels as spatial ones);
- ``unroll``: the largest loop (iterations) TVM unrolls inside a tile, in (0, 16, 64, 512), unrolled
  explicitly: FlexTensor's unroll sub-space, (0, 1, 512, 1500) x explicit or not, which its CPU
  schedule leaves out; here it is applied, with steps that fit a CPU's code size, always explicit
  (LLVM ignores the hint otherwise);
- ``inline_<block>``: 1 = compute a producer inside the main loop nest, 0 = compute it once before
  (FlexTensor's graph-level inline choice).

The schedule (§5.3, CPU): the loops become ``S0 S1 R0 R1 S2 R2 R3 S3`` (``Sk``: the k-th factor of every
spatial axis, ``Rk`` of every reduce axis); the ``S0`` loops are fused into one ``parallel`` loop; the
innermost ``S3`` loop of the last spatial axis is vectorized; the epilogue is computed per ``S1`` tile,
vectorized along its innermost axis; unrolling is annotated on the first ``S1`` loop.

2D convolutions (main block ``conv2d_nchw``: ``c2d``, ``dil`` and the models' conv2d tasks) are rewritten
to the NCHWc layout as FlexTensor's CPU convolution search does (§6.3: "FlexTensor uses NCHWC layout for
C2D"; ``rewrite=True`` in its published conv2d script): with ``vlen2`` the innermost factor of the
output-channel split and ``vlen1`` that of the input-channel split, the weights are read packed as
``[K/vlen2, C/vlen1, kh, kw, vlen1, vlen2]`` (once per model, not per call) and the result accumulates
in ``[N, K/vlen2, H, W, vlen2]`` (:func:`.fused.block_conv_nchwc`); the output-channel ``S3`` loop is the
innermost, vectorized one. The input stays NCHW (FlexTensor also packs it ``NCHW[vlen1]c``): the kernel
reads it one scalar at a time, broadcast against the weight vector, as the packed templates do; the
epilogue (or a copy) writes the result back to NCHW per iteration of the parallel ``S0`` loop, outside
the unrolled loops (unrolled, its blocked indexing took LLVM up to a minute per build).

Space sizes: the product of the knobs' entity counts (:attr:`tunebench.search_space.Space.size`), 1.3e8 to
7.1e10 over YOLO-v1's 15 convolutions (FlexTensor reports 3.9e9 to 2.4e12 for its spaces, whose GPU
versions also hold reorder and fuse choices).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm.s_tir as st

from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob

from .fused import FusedInfo, Template, analyze, block_conv_nchwc, main_func

#: split levels of spatial and reduce axes on a CPU
CPU_LEVELS = 4
#: ``auto_unroll_max_step`` choices, unrolled explicitly (LLVM's code generator ignores unroll hints)
CPU_UNROLL = (0, 16, 64, 512)

_SPATIAL, _REDUCE = 0, 2  # IterVar iter_type of a data-parallel / a reduction block var


@dataclass(frozen=True)
class LoopNest:
    """The blocks and axes of a function with one reduction block.

    Attributes:
        main: the reduction block's name.
        producers: names of the blocks before it.
        epilogues: names of the blocks after it, in program order.
        spatial: ``(axis name, extent)`` of the main block's spatial iteration variables, in order.
        reduce: ``(axis name, extent)`` of its reduce variables, in order.
        order: ``"s"`` / ``"r"`` per iteration variable, in the block's order (its loops' order).
    """

    main: str
    producers: tuple[str, ...]
    epilogues: tuple[str, ...]
    spatial: tuple[tuple[str, int], ...]
    reduce: tuple[tuple[str, int], ...]
    order: str


def _axis_name(var_name: str) -> str:
    return var_name[2:] if var_name.startswith("v_") else var_name


def loop_nest(mod: tvm.IRModule) -> LoopNest:
    """The :class:`LoopNest` of ``mod``'s main function.

    Raises:
        ValueError: not exactly one reduction block, or a block kind other than producer / epilogue.
    """
    sch = st.Schedule(tvm.IRModule({"main": main_func(mod)}))
    blocks = [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]
    mains = [i for i, b in enumerate(blocks) if any(int(iv.iter_type) == _REDUCE for iv in b.iter_vars)]
    if len(mains) != 1:
        raise ValueError(f"the flex space needs exactly one reduction block, found "
                         f"{[blocks[i].name_hint for i in mains]}")
    blk = blocks[mains[0]]
    kinds = [int(iv.iter_type) for iv in blk.iter_vars]
    if any(k not in (_SPATIAL, _REDUCE) for k in kinds):
        raise ValueError(f"block {blk.name_hint!r} has iteration variables that are neither spatial nor reduce")
    axes = [(_axis_name(iv.var.name), int(iv.dom.extent), k) for iv, k in zip(blk.iter_vars, kinds)]
    return LoopNest(main=blk.name_hint, producers=tuple(b.name_hint for b in blocks[:mains[0]]),
                    epilogues=tuple(b.name_hint for b in blocks[mains[0] + 1:]),
                    spatial=tuple((n, e) for n, e, k in axes if k == _SPATIAL),
                    reduce=tuple((n, e) for n, e, k in axes if k == _REDUCE),
                    order="".join("s" if k == _SPATIAL else "r" for k in kinds))


def split_axes(sch: st.Schedule, block, nest: LoopNest, config: Config) -> tuple[list, list]:
    """Split every loop of ``block`` (the main block) by its knob (``sp_<axis>`` / ``re_<axis>``): the
    split loops of each spatial axis and of each reduce axis, outermost factor first."""
    loops = sch.get_loops(block)[-len(nest.order):]
    sp, re = iter(nest.spatial), iter(nest.reduce)
    parts_s, parts_r = [], []
    for loop, kind in zip(loops, nest.order):
        name, prefix, parts = (next(sp)[0], "sp", parts_s) if kind == "s" else (next(re)[0], "re", parts_r)
        parts.append(sch.split(loop, list(config[f"{prefix}_{name}"])))
    return parts_s, parts_r


class FlexCpu(Template):
    """The template-free CPU (llvm) space of any task with one reduction block (module docstring)."""

    target_kind = "llvm"

    def __init__(self, task_kind: str = ""):
        self.task_kind = task_kind

    def make_space(self, mod: tvm.IRModule) -> Space:
        nest = loop_nest(mod)
        return Space([SplitKnob(f"sp_{n}", e, CPU_LEVELS) for n, e in nest.spatial]
                     + [SplitKnob(f"re_{n}", e, CPU_LEVELS) for n, e in nest.reduce]
                     + [ChoiceKnob("unroll", CPU_UNROLL)]
                     + [ChoiceKnob(f"inline_{p}", (1, 0)) for p in nest.producers])

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        nest = loop_nest(mod)
        sch = st.Schedule(tvm.IRModule({"main": main_func(mod)}))
        for p in nest.producers:
            if config[f"inline_{p}"]:
                sch.compute_inline(sch.get_sblock(p))
        for name in nest.epilogues[:-1]:
            sch.compute_inline(sch.get_sblock(name))
        acc = sch.get_sblock(nest.main)
        out = sch.get_sblock(nest.epilogues[-1]) if nest.epilogues else None
        conv = _conv2d(mod)
        if conv is not None:
            out = _rewrite_nchwc(sch, acc, out, nest, conv, config)
        parts_s, parts_r = split_axes(sch, acc, nest, config)  # per axis: its CPU_LEVELS loops
        level = lambda parts, k: [p[k] for p in parts]  # noqa: E731
        s1, s3 = level(parts_s, 1), level(parts_s, 3)
        vector = s3.pop(1) if conv is not None else s3.pop()  # NCHWc: the output-channel block
        sch.reorder(*level(parts_s, 0), *s1, *level(parts_r, 0), *level(parts_r, 1), *level(parts_s, 2),
                    *level(parts_r, 2), *level(parts_r, 3), *s3, vector)
        outer = sch.fuse(*level(parts_s, 0))
        sch.parallel(outer)
        if out is not None:
            sch.reverse_compute_at(out, outer if conv is not None else s1[-1], preserve_unit_loops=True)
            _vectorize(sch, sch.get_loops(out)[-1])
        _vectorize(sch, vector)
        if parts_r:
            sch.decompose_reduction(acc, parts_r[0][0])
        if step := int(config["unroll"]):
            sch.annotate(s1[0], "pragma_auto_unroll_max_step", step)
            sch.annotate(s1[0], "pragma_unroll_explicit", 1)
        for p in nest.producers:
            if not config[f"inline_{p}"]:
                _parallel_outer(sch, sch.get_sblock(p))
        return sch.mod


def _conv2d(mod: tvm.IRModule) -> FusedInfo | None:
    """The analysis of a 2D convolution's function (main block ``conv2d_nchw``), else None."""
    try:
        info = analyze(mod)
    except ValueError:  # another operator: no NCHWc rewrite
        return None
    return info if info.kind == "conv2d" else None


def _rewrite_nchwc(sch: st.Schedule, acc, out, nest: LoopNest, conv: FusedInfo, config: Config):
    """FlexTensor's NCHWc rewrite of a 2D convolution (module docstring): packed weights, a blocked
    accumulator; returns the block that writes the function's output (``out``, or a new copy)."""
    (f, _), (rc, _) = nest.spatial[1], nest.reduce[0]  # conv2d_nchw: (n, f, y, x), (rc, ry, rx)
    vlen2, vlen1 = config[f"sp_{f}"][-1], config[f"re_{rc}"][-1]
    if out is None:
        out = sch.cache_write(acc, 0, "global")
    block_conv_nchwc(sch, acc, conv.weight_read, vlen1, vlen2)
    return out


def _vectorize(sch: st.Schedule, loop) -> None:
    if int(sch.get(loop).extent) > 1:
        sch.vectorize(loop)


def _parallel_outer(sch: st.Schedule, block) -> None:
    """A producer computed before the main loop nest: its outer two loops fused and parallel."""
    loops = sch.get_loops(block)
    sch.parallel(sch.fuse(*loops[:2]) if len(loops) > 1 else loops[0])
