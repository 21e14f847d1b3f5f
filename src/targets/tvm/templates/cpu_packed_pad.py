"""CPU (llvm) conv2d on packed weights for any number of output channels: pad, compute, slice.

AutoTVM's x86 ``conv2d_NCHWc`` (:class:`.cpu_packed.CpuConv2dPacked`) vectorizes the output-channel
block ``oc_bn``, an exact divisor of the output channels. With a count that has no vector-wide divisor
(71, a prime, say) the only blocks are 1 (scalar code) or the whole count (vectors of 71 lanes), and the
best kernel of that space ran at 11 % of the machine's peak. Here the output channels of the main block
are padded to a multiple of :data:`PAD_TO` with zero weights (TVM's ``reindex`` of the data read, then
``pad_einsum`` over the output-channel axis, the reindex inlined back), the padded convolution is
computed in vector blocks, and the epilogue reads only the real channels (the slice is inlined into it).
The padded weight copy runs inside the kernel (in parallel; it is a few percent of the convolution's
time): TVM's weight pre-packing (``RemoveWeightLayoutRewriteBlock`` / ``SplitLayoutRewritePreproc``)
accepts only a copy that is a pure load, which a zero-padding copy is not.

Which layers are padded: :func:`needs_padding`. The others keep :class:`.cpu_packed.CpuConv2dPacked`
unchanged (its space, its kernels; every layer of the measured spaces shipped in ``data/spaces``). The
knobs are the packed template's, with ``tile_oc`` splitting the padded count.
"""

from __future__ import annotations

import tvm

from tunebench.search_space import Config, Space, SplitKnob

from .cpu_packed import CpuConv2dPacked
from .fused import LAYOUT_REWRITE, block_conv_nchwc, new_schedule, pad_once, stage_output

#: the output channels are padded to a multiple of this (16 lanes: one AVX-512 vector of float32)
PAD_TO = 16
#: output-channel blocks that vectorize well without padding (an AVX-512 vector at least half full, or whole
#: AVX2 vectors)
VECTOR_BLOCKS = (*range(8, 17), 24, 32, 40, 48, 56, 64)


def needs_padding(out_channels: int) -> bool:
    """Whether a layer's output channels are padded: when none of the count's divisors is a vector block,
    8 to 16 lanes or a multiple of 8 up to 64 (padded: 7, 53, 71, 134 = 2 x 67; not: 11, 45 = 3 x 15, 100, 200).
    Padding is not always faster where such a block exists: 27 -> 45 ran at 0.082 ms unpadded (128 trials)
    and 0.125 ms padded to 48 (64 trials)."""
    return not any(out_channels % d == 0 for d in VECTOR_BLOCKS)


def padded(out_channels: int) -> int:
    return -(-out_channels // PAD_TO) * PAD_TO


class CpuConv2dPackedPadded(CpuConv2dPacked):
    """The packed conv2d template, with output channels padded where no divisor is a vector block
    (:func:`needs_padding`); see the module docstring."""

    def source_class(self, mod: tvm.IRModule) -> type:
        return type(self) if needs_padding(self.analyze(mod).extents["f"]) else CpuConv2dPacked

    def make_space(self, mod: tvm.IRModule) -> Space:
        space = super().make_space(mod)
        f = self.analyze(mod).extents["f"]
        if not needs_padding(f):
            return space
        return Space([SplitKnob("tile_oc", padded(f), 2) if k.name == "tile_oc" else k for k in space.knobs])

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        if not needs_padding(info.extents["f"]):
            return super().apply(mod, config)
        sch = new_schedule(mod)
        pad_once(sch, info)
        out, acc = stage_output(sch, info, "global")
        weight_pad = _pad_output_channels(sch, acc, info.data_read)
        copy = block_conv_nchwc(sch, acc, _read_of(sch, acc, weight_pad), config["tile_ic"][1], config["tile_oc"][1])
        sch.unannotate(copy, LAYOUT_REWRITE)  # packed per call: a zero-padding copy cannot be pre-packed
        sch.compute_inline(weight_pad)
        sch.parallel(sch.get_loops(copy)[0])

        # from here on CpuConv2dPacked.apply's loop nest, written out again: cpu_packed.py stays as it is,
        # since the measured spaces of its layers record its sha256 (replay refuses a changed template)
        n, f, y, x, rc, ry, rx = sch.get_loops(acc)
        fo, fi = sch.split(f, list(config["tile_oc"]))
        xo, xi = sch.split(x, list(config["tile_ow"]))
        rco, rci = sch.split(rc, list(config["tile_ic"]))
        knobs = config.to_dict()
        yo, yi = sch.split(y, [None, knobs.get("tile_oh", 1)])
        sch.reorder(n, fo, yo, xo, rco, ry, rci, rx, yi, xi, fi)
        sch.parallel(sch.fuse(n, fo, yo))
        sch.reverse_compute_at(out, xo, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(out)[-1])
        sch.vectorize(fi)
        sch.unroll(xi)
        sch.unroll(yi)
        if knobs.get("unroll_kw"):
            sch.unroll(rx)
        sch.decompose_reduction(acc, rco)
        return sch.mod


def _pad_output_channels(sch, acc, data_read: int):
    """Pad the main block's output-channel axis to a multiple of :data:`PAD_TO`: the data read reindexed
    (so that the block is an einsum), ``pad_einsum``, the reindex and the slice back inlined. Returns the
    block that pads the weight with zeros."""
    reindex = sch.reindex(acc, ("read", data_read))
    sch.pad_einsum(acc, [1, PAD_TO, 1, 1, 1, 1, 1])
    sch.compute_inline(reindex)
    sch.compute_inline(sch.get_consumers(acc)[0])  # the slice, into the epilogue (or the output copy)
    (weight_pad,) = [b for b in sch.get_producers(acc) if sch.get(b).name_hint.endswith("_pad")]
    return weight_pad


def _read_of(sch, block, producer) -> int:
    """The index of ``block``'s read of the buffer ``producer`` writes."""
    written = sch.get(producer).writes[0].source
    return next(i for i, r in enumerate(sch.get(block).reads) if r.source.same_as(written))
