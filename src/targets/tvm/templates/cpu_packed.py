"""CPU (llvm) templates on pre-packed weights: AutoTVM's x86 ``conv2d_NCHWc`` and ``dense_pack``.

Both read their weights through a packed copy (:func:`.fused.pack_weight`) that a model build
computes once, before the model runs, as TVM's x86 schedules had the graph pre-pack weights at
compile time. Activations stay NCHW between layers (no layout transform per layer or at the model's
entry and exit): the convolution accumulates an output tile blocked by output channels
(``[oh_i, ow_i, oc_bn]``, the NCHW[oc_bn]c block of AutoTVM's layout) in registers and the fused
epilogue (bias, residual, relu) writes it back to NCHW; the input is read one scalar at a time
(broadcast against the weight vector), for which NCHW serves as well as a blocked layout.

Conv2d (``conv2d_NCHWc``), knobs in this order:

- ``tile_ic``: input channels split (ic_outer, ic_bn); the weight block's input-channel length.
- ``tile_oc``: output channels split (oc_chunk, oc_bn); oc_bn is the vectorized innermost axis
  (the weight block's and the accumulator's output-channel length).
- ``tile_ow``: output width split (ow_chunk, reg_n); reg_n outputs per row are a register block
  (unrolled).
- ``tile_oh`` (1x1 kernels only) in (1, 2): output rows per register block (unrolled).
- ``unroll_kw`` in (0, 1) (kernels wider than 1 only): unroll the kernel-width loop.

Loop nest: ``parallel(n, oc_chunk, oh_outer)``, ``ow_chunk``, ``ic_outer``, ``kh``, ``ic_bn``,
``kw``, ``oh_i``, ``reg_n``, ``vectorize(oc_bn)``; weights packed OIHW[ic_bn]i[oc_bn]o
(``[oc_chunk, ic_outer, kh, kw, ic_bn, oc_bn]``).

Dense (``dense_pack``), knobs in this order:

- ``tile_y``: rows M (batch) split 3 ways (outer, middle, inner); the inner part is unrolled.
- ``tile_x``: columns N split 3 ways; the inner part (the packing width) is vectorized.
- ``tile_k``: reduction K split (outer, inner).

Loop nest: ``parallel(y_outer, x_outer)``, ``y_mid``, ``x_mid``, ``k_outer``, ``k_inner``, ``y_inner``
(unrolled), ``vectorize(x_inner)``; weights packed ``[N / x_inner, K, x_inner]``.
"""

from __future__ import annotations

import tvm

from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob

from .fused import FusedInfo, Template, block_conv_nchwc, new_schedule, pack_weight, pad_once, stage_output


def _one_by_one(info: FusedInfo) -> bool:
    return info.extents["ry"] == 1 and info.extents["rx"] == 1


class CpuConv2dPacked(Template):
    """CPU conv2d on packed weights (AutoTVM's x86 ``conv2d_NCHWc`` knobs); see the module docstring."""

    task_kind = "conv2d"
    target_kind = "llvm"

    def make_space(self, mod: tvm.IRModule) -> Space:
        info = self.analyze(mod)
        e = info.extents
        knobs = [SplitKnob("tile_ic", e["rc"], 2), SplitKnob("tile_oc", e["f"], 2), SplitKnob("tile_ow", e["x"], 2)]
        if _one_by_one(info):
            knobs.append(ChoiceKnob("tile_oh", (1, 2) if e["y"] % 2 == 0 else (1,)))
        else:
            knobs.append(ChoiceKnob("unroll_kw", (0, 1)))
        return Space(knobs)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        sch = new_schedule(mod)
        pad_once(sch, info)
        out, acc = stage_output(sch, info, "global")
        ic_bn, oc_bn = config["tile_ic"][1], config["tile_oc"][1]
        block_conv_nchwc(sch, acc, info.weight_read, ic_bn, oc_bn)

        n, f, y, x, rc, ry, rx = sch.get_loops(acc)
        fo, fi = sch.split(f, list(config["tile_oc"]))
        xo, xi = sch.split(x, list(config["tile_ow"]))
        rco, rci = sch.split(rc, list(config["tile_ic"]))
        knobs = config.to_dict()
        oh_i = knobs.get("tile_oh", 1)
        yo, yi = sch.split(y, [None, oh_i])
        sch.reorder(n, fo, yo, xo, rco, ry, rci, rx, yi, xi, fi)
        tile = sch.fuse(n, fo, yo)
        sch.parallel(tile)
        sch.reverse_compute_at(out, xo, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(out)[-1])
        sch.vectorize(fi)
        sch.unroll(xi)
        sch.unroll(yi)
        if knobs.get("unroll_kw"):
            sch.unroll(rx)
        sch.decompose_reduction(acc, rco)
        return sch.mod


class CpuDensePacked(Template):
    """CPU dense on packed weights (AutoTVM's x86 ``dense_pack`` knobs); see the module docstring."""

    task_kind = "dense"
    target_kind = "llvm"

    def make_space(self, mod: tvm.IRModule) -> Space:
        e = self.analyze(mod).extents
        return Space([SplitKnob("tile_y", e["y"], 3), SplitKnob("tile_x", e["x"], 3), SplitKnob("tile_k", e["k"], 2)])

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        sch = new_schedule(mod)
        out, acc = stage_output(sch, info, "global")
        bn = config["tile_x"][2]
        pack_weight(sch, acc, info.weight_read, lambda k, n: (n // bn, k, n % bn))

        y, x, k = sch.get_loops(acc)
        yt, yo, yi = sch.split(y, list(config["tile_y"]))
        xt, xo, xi = sch.split(x, list(config["tile_x"]))
        ko, ki = sch.split(k, list(config["tile_k"]))
        sch.reorder(yt, xt, yo, xo, ko, ki, yi, xi)
        sch.parallel(sch.fuse(yt, xt))
        sch.reverse_compute_at(out, xo, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(out)[-1])
        sch.vectorize(xi)
        sch.unroll(yi)
        sch.decompose_reduction(acc, ko)
        return sch.mod
