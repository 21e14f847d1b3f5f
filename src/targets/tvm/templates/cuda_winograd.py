"""CUDA Winograd template for 3×3 stride-1 conv2d tasks: AutoTVM's ``conv2d_nchw_winograd.cuda`` on s_tir.

The computation is :func:`.winograd_compute.winograd_func` (the task's signature, its epilogue fused);
this template schedules it as four kernels, as AutoTVM's CUDA Winograd schedule does (its knobs are
the reference; the schedule is written on s_tir from its description):

1. **input transform**: one thread per (channel, tile) pair, 128 threads per block; the thread gathers
   its ``alpha×alpha`` input tile (the padding applied while reading) and writes its transform, both in
   registers, loops unrolled;
2. **weight transform** (``kernel_pack``): one thread per (channel, filter) pair; the block is marked as
   a weight layout rewrite, so a model build lifts it out of the model (computed once from the weights,
   :func:`.fused.prepacked`) and a timed kernel takes the transformed weight as a parameter;
3. **batched product** (``bgemm``), tuned: the ``alpha²`` products are on ``blockIdx.z``; filters K
   (``tile_y``) and tiles P (``tile_x``) are split 4 ways (block, virtual thread, thread, inner) as the
   direct template's axes; the channel reduction C (``tile_rc``) 2 ways, each outer step staging a
   ``rc_i × Ty`` tile of the transformed weights and a ``rc_i × Tx`` tile of the transformed input in
   shared memory, fetched by all threads of the block; each thread accumulates its ``yi × xi`` outputs
   in registers;
4. **output transform**: one thread per (image, filter, output tile), 128 per block; it computes its
   ``m×m`` inverse transform in registers and writes it through the task's epilogue (bias, residual,
   ReLU).

Knobs: ``tile_y``, ``tile_x`` (4 ways), ``tile_rc`` (2 ways), ``auto_unroll_max_step`` in (0, 128, 1500)
and ``unroll_explicit`` in (0, 1), as AutoTVM's (its ``tile_b`` split of the ``alpha²`` axis is
filtered to blocks only, so it is no knob here). Tile size ``m``: :func:`.winograd_compute.tile_size`.

:class:`CudaConv2dWinograd` is the conv2d template of the CUDA ``winograd`` variant: Winograd for a
3×3 stride-1 conv, the direct template (:class:`~.cuda.CudaConv2dDirect`) for any other conv.
"""

from __future__ import annotations

import math

import tvm
import tvm.s_tir as st

from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob

from .cuda import FLOAT_BYTES, CudaConv2dDirect, CudaTemplate, PickingTemplate, tile_matmul
from .fused import LAYOUT_REWRITE, FusedInfo
from .winograd_compute import shape_of, tile_size, winograd_func, winograd_problem

#: threads per block of the three fixed kernels (transforms), as AutoTVM's schedule
TRANSFORM_THREADS = 128


class CudaWinograd(CudaTemplate):
    """The Winograd schedule of a 3×3 stride-1 conv2d task (see the module docstring)."""

    task_kind = "conv2d"
    thread_axes = (("tile_y", "threadIdx.y"), ("tile_x", "threadIdx.x"))
    vthread_axes = (("tile_y", "vthread.y"), ("tile_x", "vthread.x"))
    unroll_steps = (0, 128, 1500)

    def make_space(self, mod: tvm.IRModule) -> Space:
        info = self.analyze(mod)
        winograd_func(mod, info)  # no Winograd form, or an epilogue it cannot translate: the error now, before any trial
        s = shape_of(info)
        return Space([
            SplitKnob("tile_y", s.filters, 4), SplitKnob("tile_x", s.tiles, 4), SplitKnob("tile_rc", s.channels, 2),
            ChoiceKnob("auto_unroll_max_step", self.unroll_steps), ChoiceKnob("unroll_explicit", (0, 1)),
        ])

    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        ty, tx = (math.prod(config[k][1:]) for k in ("tile_y", "tile_x"))
        return FLOAT_BYTES * config["tile_rc"][1] * (ty + tx)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        sch = st.Schedule(winograd_func(mod, info))
        chain = ("conv2d_winograd", *info.epilogues)  # the last one writes the output
        for name in ("data_pad", "A", "B", "G", *chain[:-1]):
            sch.compute_inline(sch.get_sblock(name))
        _input_transform(sch)
        _weight_transform(sch)
        _batched_product(sch, config)
        _output_transform(sch, chain[-1], tile_size(info))
        return sch.mod


def _unroll_below(sch: st.Schedule, block, loop) -> None:
    """Unroll every loop of ``block`` under ``loop`` (a thread's whole transform, its indices constant,
    so the transform matrices' selects fold to constants and their zero terms drop)."""
    loops = sch.get_loops(block)
    for inner in loops[[sch.get(x).same_as(sch.get(loop)) for x in loops].index(True) + 1:]:
        sch.unroll(inner)


def _thread_loops(sch: st.Schedule, loop):
    """``loop`` split into (blocks, ``TRANSFORM_THREADS`` threads), bound; returns the thread loop."""
    bx, tx = sch.split(loop, [None, TRANSFORM_THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return tx


def _input_transform(sch: st.Schedule) -> None:
    """One thread per (channel, tile): its input tile and its transform in registers."""
    pack = sch.get_sblock("data_pack")
    write = sch.cache_write(pack, 0, "local")  # the transform accumulates in registers, then is stored
    eps, nu, c, p = sch.get_loops(write)
    sch.reorder(c, p, eps, nu)
    tx = _thread_loops(sch, sch.fuse(c, p))
    sch.compute_at(pack, tx, preserve_unit_loops=True)
    tile = sch.get_sblock("input_tile")
    sch.set_scope(tile, 0, "local")
    sch.compute_at(tile, tx, preserve_unit_loops=True)
    for block in (tile, pack, write):
        _unroll_below(sch, block, tx)


def _weight_transform(sch: st.Schedule) -> None:
    """One thread per (channel, filter); marked as a weight rewrite (lifted out of a model)."""
    pack = sch.get_sblock("kernel_pack")
    eps, nu, c, k, r_kh, r_kw = sch.get_loops(pack)
    sch.reorder(c, k, eps, nu, r_kh, r_kw)
    _unroll_below(sch, pack, _thread_loops(sch, sch.fuse(c, k)))
    sch.annotate(pack, LAYOUT_REWRITE, True)


def _batched_product(sch: st.Schedule, config: Config) -> None:
    """The tuned kernel: AutoTVM's tiling of the batched product (module docstring, kernel 3)."""
    acc = sch.get_sblock("bgemm")
    weight_s = sch.cache_read(acc, 0, "shared")
    data_s = sch.cache_read(acc, 1, "shared")
    out = sch.cache_write(acc, 0, "local")  # ``acc`` accumulates in registers, ``out`` stores the tile
    eps, nu, k, p, rc = sch.get_loops(acc)
    tile_matmul(sch, config, acc, out, (weight_s, data_s), (k, p, rc), "tile_rc", batch=sch.fuse(eps, nu))


def _output_transform(sch: st.Schedule, output: str, m: int) -> None:
    """One thread per (image, filter, output tile): its inverse transform in registers, then the
    epilogue, written ``m×m`` pixels at a time."""
    out = sch.get_sblock(output)
    n, k, h, w = sch.get_loops(out)
    ho, hi = sch.split(h, [None, m])
    wo, wi = sch.split(w, [None, m])
    sch.reorder(n, k, ho, wo, hi, wi)
    tx = _thread_loops(sch, sch.fuse(n, k, ho, wo))
    inverse = sch.get_sblock("inverse")
    sch.set_scope(inverse, 0, "local")
    sch.compute_at(inverse, tx, preserve_unit_loops=True)
    for block in (inverse, out):
        _unroll_below(sch, block, tx)


class CudaConv2dWinograd(PickingTemplate):
    """The conv2d template of the CUDA ``winograd`` variant: :class:`CudaWinograd` for a 3×3 stride-1
    conv, :class:`~.cuda.CudaConv2dDirect` for any other."""

    task_kind = "conv2d"

    def choose(self, info: FusedInfo) -> CudaTemplate:
        return CudaConv2dDirect() if winograd_problem(info) else CudaWinograd()
