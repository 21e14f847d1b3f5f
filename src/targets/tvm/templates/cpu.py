"""CPU (llvm) templates: x86-style tiled schedules for conv2d, depthwise conv2d and dense.

One structure for the three kinds (after AutoTVM's x86 templates, on the NCHW layout the
tasks come in): the output is tiled by 2-way splits of its spatial axes; all outer tile loops
are fused into one ``parallel`` loop (one task per tile); inside a tile the main block
accumulates into a tile-local buffer (the main block's result buffer, compacted to the tile),
with the inner width factor (columns N for dense) ``vectorize``-d and a loop order chosen by a
knob; then the fused epilogue (bias, residual, relu) is computed for the tile, vectorized along
the width. A real pad block (padding > 0) is computed once before the convolution, parallel over
batch x channels; a pad block that only copies (padding 0) is inlined.

Knob values of splits are ``(outer, inner)`` factors; ``order`` values name the loop order of
the tile's inner loops (listed per template, outermost first; the vectorized width loop is
always innermost).
"""

from __future__ import annotations

import tvm

from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob

from .fused import Template, new_schedule, pad_once, stage_output

#: dense: the inner reduction loop is unrolled only up to this many iterations (code size)
MAX_UNROLL_K = 32


class CpuTemplate(Template):
    """Shared CPU schedule: tile, parallelize, vectorize, order, unroll, epilogue at the tile.

    Subclasses define ``axes`` (the main block's loop names in order), ``splits``
    (knob -> axis split 2 ways), ``spatial`` (spatial axes in order; the last is the vectorized
    width), ``orders`` (order name -> inner loop names, the split inner parts named
    ``<axis>_i`` and outer reduction parts ``<axis>_o``) and ``unroll_axis``.
    """

    target_kind = "llvm"
    axes: tuple[str, ...] = ()
    splits: tuple[tuple[str, str], ...] = ()
    spatial: tuple[str, ...] = ()
    orders: dict[str, tuple[str, ...]] = {}
    unroll_axis: str = ""
    max_unroll: int | None = None

    def make_space(self, mod: tvm.IRModule) -> Space:
        e = self.analyze(mod).extents
        return Space([SplitKnob(knob, e[axis], 2) for knob, axis in self.splits]
                     + [ChoiceKnob("order", tuple(self.orders)), ChoiceKnob("unroll_kw", (0, 1))])

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        sch = new_schedule(mod)
        pad_once(sch, info)
        out, acc = stage_output(sch, info, "global")

        # tile the main block: <axis>_o / <axis>_i loops for every split knob
        loops = dict(zip(self.axes, sch.get_loops(acc)))
        for knob, axis in self.splits:
            loops[axis + "_o"], loops[axis + "_i"] = sch.split(loops.pop(axis), list(config[knob]))
        outer = [loops.get(a + "_o", loops.get(a)) for a in self.spatial]
        inner = [loops[name] for name in self.orders[config["order"]]] + [loops[self.spatial[-1] + "_i"]]
        sch.reorder(*outer, *inner)
        tile = sch.fuse(*outer)
        sch.parallel(tile)

        # epilogue per tile (its result buffer is then compacted to the tile), vectorized width
        sch.reverse_compute_at(out, tile, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(out)[-1])
        sch.vectorize(inner[-1])
        sch.decompose_reduction(acc, inner[0])  # the init loops inherit the vectorized width
        unroll = loops[self.unroll_axis]
        if config["unroll_kw"] and (self.max_unroll is None or int(sch.get(unroll).extent) <= self.max_unroll):
            sch.unroll(unroll)
        return sch.mod


class CpuConv2d(CpuTemplate):
    """CPU conv2d (NCHW) template.

    Knobs (in this order):

    - ``tile_f``: out-channels F split (F_o, F_i); F_o is a parallel tile loop.
    - ``tile_y``: output height split (Y_o, Y_i); Y_o is a parallel tile loop.
    - ``tile_x``: output width split (X_o, X_i); X_o is a parallel tile loop, X_i is
      vectorized (innermost).
    - ``tile_rc``: in-channels split (RC_o, RC_i); RC_o is outermost within the tile, so the
      accumulator tile F_i x Y_i x X_i stays hot while RC_i channels are reduced into it.
    - ``order``, the tile's inner loop order (outermost first, then the vectorized X_i):

      - ``"reduce_outer"``: RC_o, RC_i, KH, KW, F_i, Y_i -- each (c, kh, kw) step updates the
        whole accumulator tile;
      - ``"spatial_outer"``: RC_o, F_i, Y_i, RC_i, KH, KW -- one output row vector is fully
        accumulated over RC_i x KH x KW before the next;
      - ``"f_inner"``: RC_o, Y_i, RC_i, KH, KW, F_i -- a register block of F_i rows of X_i
        outputs (x86 ``NCHWc``-like) per reduction step.

    - ``unroll_kw`` in (0, 1): unroll the kernel-width loop KW.
    """

    task_kind = "conv2d"
    axes = ("n", "f", "y", "x", "rc", "ry", "rx")
    splits = (("tile_f", "f"), ("tile_y", "y"), ("tile_x", "x"), ("tile_rc", "rc"))
    spatial = ("n", "f", "y", "x")
    orders = {
        "reduce_outer": ("rc_o", "rc_i", "ry", "rx", "f_i", "y_i"),
        "spatial_outer": ("rc_o", "f_i", "y_i", "rc_i", "ry", "rx"),
        "f_inner": ("rc_o", "y_i", "rc_i", "ry", "rx", "f_i"),
    }
    unroll_axis = "rx"


class CpuDepthwiseConv2d(CpuTemplate):
    """CPU depthwise conv2d (NCHW) template.

    Knobs (in this order): ``tile_f`` (channels), ``tile_y`` (output height), ``tile_x``
    (output width; inner part vectorized) split 2 ways as in :class:`CpuConv2d`; no reduction
    split (the reduction is the KH x KW window); ``order``:

    - ``"spatial_outer"``: F_i, Y_i, KH, KW -- each output row vector accumulates its window;
    - ``"reduce_outer"``: KH, KW, F_i, Y_i -- each kernel tap updates the whole tile;
    - ``"f_inner"``: Y_i, KH, KW, F_i -- F_i channels' row vectors per kernel tap;

    and ``unroll_kw`` in (0, 1): unroll the kernel-width loop KW.
    """

    task_kind = "depthwise_conv2d"
    axes = ("n", "f", "y", "x", "rc", "ry", "rx")
    splits = (("tile_f", "f"), ("tile_y", "y"), ("tile_x", "x"))
    spatial = ("n", "f", "y", "x")
    orders = {
        "spatial_outer": ("f_i", "y_i", "rc", "ry", "rx"),
        "reduce_outer": ("rc", "ry", "rx", "f_i", "y_i"),
        "f_inner": ("y_i", "rc", "ry", "rx", "f_i"),
    }
    unroll_axis = "rx"


class CpuDense(CpuTemplate):
    """CPU dense template (``matmul`` ``C[M, N] = A[M, K] W[K, N]``, then the fused bias).

    Knobs (in this order):

    - ``tile_y``: rows M (batch) split (M_o, M_i); M_o is a parallel tile loop.
    - ``tile_x``: columns N split (N_o, N_i); N_o is a parallel tile loop, N_i is vectorized
      (``W`` rows are contiguous along N).
    - ``tile_k``: reduction K split (K_o, K_i).
    - ``order``, the tile's inner loop order (then the vectorized N_i):

      - ``"k_outer"``: K_o, K_i, M_i -- each k step updates the whole M_i x N_i tile;
      - ``"m_outer"``: M_i, K_o, K_i -- one output row vector at a time over all of K;
      - ``"k_blocked"``: K_o, M_i, K_i -- K_i-deep blocks per row vector.

    - ``unroll_kw`` in (0, 1): unroll the inner reduction loop K_i (only when K_i <= 32, to
      bound code size; larger K_i stay rolled).
    """

    task_kind = "dense"
    axes = ("y", "x", "k")
    splits = (("tile_y", "y"), ("tile_x", "x"), ("tile_k", "k"))
    spatial = ("y", "x")
    orders = {
        "k_outer": ("k_o", "k_i", "y_i"),
        "m_outer": ("y_i", "k_o", "k_i"),
        "k_blocked": ("k_o", "y_i", "k_i"),
    }
    unroll_axis = "k_i"
    max_unroll = MAX_UNROLL_K
