"""CUDA templates: AutoTVM's ``conv2d_nchw`` direct, depthwise and dense schedules on s_tir.

All three share one structure (AutoTVM ``schedule_direct_cuda``): the output is tiled 4 ways
per spatial axis into (block, virtual thread, thread, inner) levels bound to
``blockIdx`` / ``vthread`` / ``threadIdx``; each thread accumulates its inner tile of the main
block in registers ("local"); the input and weight tiles a thread block needs are staged in
"shared" memory and fetched cooperatively by all threads of the block; the fused epilogue
(bias, residual, relu) is computed from the registers by the thread that owns the tile.
Knob values are the split factors, outermost first, so e.g. ``tile_f = (bf, vf, tf, fi)``
means ``bf`` blocks x ``vf`` virtual threads x ``tf`` threads x ``fi`` inner iterations.

GPU limits (the ``limits`` dict of :meth:`check` / :meth:`verify`): :mod:`.gpu_verify`.
"""

from __future__ import annotations

import abc
import math

import tvm
import tvm.s_tir as st
from tvm import s_tir

from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob

from .fused import FusedInfo, Template, new_schedule, stage_output
from .gpu_verify import VERIFY_TARGET, limit_error, lowering_passes, thread_bindings

FLOAT_BYTES = 4  # all tensors are float32

def cooperative_fetch(sch: st.Schedule, block, loop, threads: list[tuple[str, int]]) -> None:
    """Compute the shared-memory copy ``block`` at ``loop`` and spread its iterations over the
    thread block: the copy loops are fused and split as ``(t_1, ..., t_k, rest)`` with ``t_i``
    bound to the given thread axes (outermost first); ``rest`` is a serial loop per thread
    (guarded by a predicate when the tile size is not a multiple of the thread count)."""
    sch.compute_at(block, loop, preserve_unit_loops=True)
    n_iters = len(sch.get(block).iter_vars)
    fused = sch.fuse(*sch.get_loops(block)[-n_iters:])
    parts = sch.split(fused, [ext for _, ext in threads] + [None])
    for part, (tag, _) in zip(parts, threads):
        sch.bind(part, tag)


def annotate_unroll(sch: st.Schedule, loop, config: Config) -> None:
    """``auto_unroll_max_step`` / ``unroll_explicit`` as pragmas on the kernel's outermost loop."""
    sch.annotate(loop, "pragma_auto_unroll_max_step", int(config["auto_unroll_max_step"]))
    sch.annotate(loop, "pragma_unroll_explicit", int(config["unroll_explicit"]))


CONV_TILE_TAGS = ("blockIdx.z", "blockIdx.y", "blockIdx.x", "vthread.z", "vthread.y", "vthread.x",
                  "threadIdx.z", "threadIdx.y", "threadIdx.x")


def bind_conv_tiles(sch: st.Schedule, loops) -> None:
    """Bind the (f, y, x) block / vthread / thread tile loops of a conv, in :data:`CONV_TILE_TAGS` order."""
    for loop, tag in zip(loops, CONV_TILE_TAGS):
        sch.bind(loop, tag)


def conv_threads(config: Config) -> list[tuple[str, int]]:
    """The thread extents of a conv config (the third factor of tile_f / tile_y / tile_x)."""
    return [("threadIdx.z", config["tile_f"][2]), ("threadIdx.y", config["tile_y"][2]),
            ("threadIdx.x", config["tile_x"][2])]


class CudaTemplate(Template):
    """Common GPU checks of the CUDA templates."""

    target_kind = "cuda"
    thread_axes: tuple[tuple[str, str], ...] = ()  # (knob, thread axis) of the thread-level factor
    vthread_axes: tuple[tuple[str, str], ...] = ()  # (knob, vthread axis) of the vthread factor
    #: :meth:`check` decides everything :meth:`verify` does (False: the lowered kernel must be verified too)
    knob_check_complete: bool = True

    @abc.abstractmethod
    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        """Bytes of shared memory the staged input and weight tiles take per thread block."""

    def check(self, mod: tvm.IRModule, config: Config, limits: dict) -> str | None:
        """Threads per block (product of the thread-level factors ``tile_*[2]``), each thread
        dimension, each virtual-thread dimension (``tile_*[1]``) and the shared bytes of the
        staged tiles against ``limits``; returns the first violation or None."""
        info = self.analyze(mod)
        threads = {tag: int(config[knob][2]) for knob, tag in self.thread_axes}
        vthreads = {tag: int(config[knob][1]) for knob, tag in self.vthread_axes}
        return limit_error(threads, vthreads, self.shared_bytes(info, config), limits)

    def static_check(self, mod: tvm.IRModule, config: Config, limits: dict) -> str | None:
        """Why ``config`` breaks ``limits``, known before it is built: :meth:`check` (the knobs, about a
        millisecond), then, where that is not the whole verdict (:attr:`knob_check_complete` False), the
        lowered kernel (:meth:`verify`, tens of milliseconds). A schedule that fails to apply is no verdict
        here (None): its build reports the error."""
        reason = self.check(mod, config, limits)
        if reason is not None or self.knob_check_complete:
            return reason
        try:
            sched = self.apply(mod, config)
        except Exception:  # any schedule error: the builder reports it as the measurement's error
            return None
        return self.verify(sched, limits)

    def verify(self, sched_mod: tvm.IRModule, limits: dict) -> str | None:
        """Lower ``sched_mod`` (up to virtual-thread injection) and run ``verify_gpu_code`` on it;
        the reason reports thread extents, virtual threads and shared bytes of the lowered code."""
        with tvm.target.Target(VERIFY_TARGET):
            lowered = tvm.transform.Sequential(lowering_passes())(sched_mod)
        func = lowered["main"]
        shared = int(s_tir.analysis.calculate_allocated_bytes(func)["main"].get("shared", 0))
        reasons = (limit_error(threads, vthreads, shared, limits) for threads, vthreads in thread_bindings(sched_mod))
        reason = next((r for r in reasons if r), None)
        checked = {k: int(v) for k, v in limits.items()}
        if not s_tir.analysis.verify_gpu_code(func, checked):
            return reason or "verify_gpu_code rejected the lowered kernel"
        return reason


class PickingTemplate(CudaTemplate):
    """A template that hands each function to one of several templates by what :meth:`choose` says of it. Each
    call picks by the function it is given, so a task's space, its configs' schedules and their checks always
    come from the same template, and a measured space records that template's file."""

    @abc.abstractmethod
    def choose(self, info: FusedInfo) -> CudaTemplate:
        """The template for a function analysed as ``info``."""

    def pick(self, mod: tvm.IRModule) -> CudaTemplate:
        return self.choose(self.analyze(mod))

    def make_space(self, mod: tvm.IRModule) -> Space:
        return self.pick(mod).make_space(mod)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        return self.pick(mod).apply(mod, config)

    def check(self, mod: tvm.IRModule, config: Config, limits: dict) -> str | None:
        return self.pick(mod).check(mod, config, limits)

    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        return self.choose(info).shared_bytes(info, config)

    def source_class(self, mod: tvm.IRModule) -> type:
        return type(self.pick(mod))


class CudaConv2dDirect(CudaTemplate):
    """AutoTVM's CUDA ``conv2d_nchw`` direct template.

    Knobs (in this order; split values outermost first):

    - ``tile_f``: out-channels F split 4 ways (block, vthread, thread, inner);
      blockIdx.z (fused with the batch), vthread.z, threadIdx.z.
    - ``tile_y``: output height split 4 ways; blockIdx.y, vthread.y, threadIdx.y.
    - ``tile_x``: output width split 4 ways; blockIdx.x, vthread.x, threadIdx.x.
    - ``tile_rc``, ``tile_ry``, ``tile_rx``: in-channels, kernel height, kernel width split
      2 ways (outer, inner); the outer loops step over the shared-memory tiles, each of
      ``rc_i x ry_i x rx_i`` reduction iterations.
    - ``auto_unroll_max_step`` in (0, 512, 1500): ``pragma_auto_unroll_max_step``.
    - ``unroll_explicit`` in (0, 1): ``pragma_unroll_explicit``.

    Shared tiles, staged at the outermost reduction tile loop ``rx_o``: the padded input
    ``rc_i x ((Ty-1)*sh + (ry_i-1)*dh + 1) x ((Tx-1)*sw + (rx_i-1)*dw + 1)`` and the weights
    ``Tf x rc_i x ry_i x rx_i``, where ``T* = vthread * thread * inner`` of the tile knob.
    """

    task_kind = "conv2d"
    thread_axes = (("tile_f", "threadIdx.z"), ("tile_y", "threadIdx.y"), ("tile_x", "threadIdx.x"))
    vthread_axes = (("tile_f", "vthread.z"), ("tile_y", "vthread.y"), ("tile_x", "vthread.x"))
    unroll_steps = (0, 512, 1500)

    def make_space(self, mod: tvm.IRModule) -> Space:
        e = self.analyze(mod).extents
        return Space([
            SplitKnob("tile_f", e["f"], 4), SplitKnob("tile_y", e["y"], 4), SplitKnob("tile_x", e["x"], 4),
            SplitKnob("tile_rc", e["rc"], 2), SplitKnob("tile_ry", e["ry"], 2), SplitKnob("tile_rx", e["rx"], 2),
            ChoiceKnob("auto_unroll_max_step", self.unroll_steps), ChoiceKnob("unroll_explicit", (0, 1)),
        ])

    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        tf, ty, tx = (math.prod(config[k][1:]) for k in ("tile_f", "tile_y", "tile_x"))
        rc, ry, rx = (config[k][1] for k in ("tile_rc", "tile_ry", "tile_rx"))
        h, w = info.input_tile(ty, tx, ry, rx)
        return FLOAT_BYTES * (rc * h * w + tf * rc * ry * rx)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        sch, staged, out, acc = _stage_conv(self.analyze(mod), mod)
        n, f, y, x, rc, ry, rx = sch.get_loops(acc)
        (bf, vf, tf, fi), (by, vy, ty, yi), (bx, vx, tx, xi) = _split_fyx(sch, config, f, y, x)
        rco, rci = sch.split(rc, list(config["tile_rc"]))
        ryo, ryi = sch.split(ry, list(config["tile_ry"]))
        rxo, rxi = sch.split(rx, list(config["tile_rx"]))
        sch.reorder(bf, by, bx, vf, vy, vx, tf, ty, tx, rco, ryo, rxo, rci, ryi, rxi, fi, yi, xi)
        _bind_conv(sch, config, n, (bf, by, bx, vf, vy, vx, tf, ty, tx), out, acc, rco, staged, rxo)
        return sch.mod


class CudaDepthwiseConv2d(CudaTemplate):
    """AutoTVM's CUDA depthwise ``conv2d_nchw`` template.

    Knobs: ``tile_f`` (channels), ``tile_y``, ``tile_x`` split 4 ways (block, vthread, thread,
    inner) and bound as in :class:`CudaConv2dDirect`; ``auto_unroll_max_step`` in
    (0, 256, 1500); ``unroll_explicit`` in (0, 1). No reduction split: the whole kernel window
    is reduced per output element. The shared tiles are staged once per thread block: the
    padded input ``Tf x ((Ty-1)*sh + (KH-1)*dh + 1) x ((Tx-1)*sw + (KW-1)*dw + 1)`` and the
    weights ``Tf x KH x KW``.
    """

    task_kind = "depthwise_conv2d"
    thread_axes = CudaConv2dDirect.thread_axes
    vthread_axes = CudaConv2dDirect.vthread_axes
    unroll_steps = (0, 256, 1500)

    def make_space(self, mod: tvm.IRModule) -> Space:
        e = self.analyze(mod).extents
        return Space([
            SplitKnob("tile_f", e["f"], 4), SplitKnob("tile_y", e["y"], 4), SplitKnob("tile_x", e["x"], 4),
            ChoiceKnob("auto_unroll_max_step", self.unroll_steps), ChoiceKnob("unroll_explicit", (0, 1)),
        ])

    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        tf, ty, tx = (math.prod(config[k][1:]) for k in ("tile_f", "tile_y", "tile_x"))
        kh, kw = info.extents["ry"], info.extents["rx"]
        h, w = info.input_tile(ty, tx, kh, kw)
        return FLOAT_BYTES * (tf * h * w + tf * kh * kw)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        sch, staged, out, acc = _stage_conv(self.analyze(mod), mod)
        n, f, y, x, rc, ry, rx = sch.get_loops(acc)
        (bf, vf, tf, fi), (by, vy, ty, yi), (bx, vx, tx, xi) = _split_fyx(sch, config, f, y, x)
        sch.reorder(bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi, rc, ry, rx)
        _bind_conv(sch, config, n, (bf, by, bx, vf, vy, vx, tf, ty, tx), out, acc, fi, staged, bx)
        return sch.mod


class CudaDense(CudaTemplate):
    """CUDA dense (``matmul`` ``C[M, N] = A[M, K] W[K, N]``, then the fused bias) in the
    structure of the conv template.

    Knobs: ``tile_y`` (rows M, the batch) and ``tile_x`` (columns N) split 4 ways (block,
    vthread, thread, inner) bound to blockIdx.y/x, vthread.y/x, threadIdx.y/x; ``tile_k``
    (reduction K) split 2 ways (outer, inner); ``auto_unroll_max_step`` in (0, 512, 1500);
    ``unroll_explicit`` in (0, 1). Shared tiles staged at the outer k loop: ``A`` ``Ty x k_i``
    and ``W`` ``k_i x Tx``.
    """

    task_kind = "dense"
    thread_axes = (("tile_y", "threadIdx.y"), ("tile_x", "threadIdx.x"))
    vthread_axes = (("tile_y", "vthread.y"), ("tile_x", "vthread.x"))
    unroll_steps = (0, 512, 1500)

    def make_space(self, mod: tvm.IRModule) -> Space:
        e = self.analyze(mod).extents
        return Space([
            SplitKnob("tile_y", e["y"], 4), SplitKnob("tile_x", e["x"], 4), SplitKnob("tile_k", e["k"], 2),
            ChoiceKnob("auto_unroll_max_step", self.unroll_steps), ChoiceKnob("unroll_explicit", (0, 1)),
        ])

    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        ty, tx = (math.prod(config[k][1:]) for k in ("tile_y", "tile_x"))
        return FLOAT_BYTES * config["tile_k"][1] * (ty + tx)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        sch = new_schedule(mod)
        main = sch.get_sblock(info.main)
        data_s = sch.cache_read(main, info.data_read, "shared")
        weight_s = sch.cache_read(main, info.weight_read, "shared")
        out, acc = stage_output(sch, info, "local")

        y, x, k = sch.get_loops(acc)
        tile_matmul(sch, config, acc, out, (data_s, weight_s), (y, x, k), "tile_k")
        return sch.mod


def tile_matmul(sch: st.Schedule, config: Config, acc, out, staged, loops, k_knob: str, batch=None) -> None:
    """AutoTVM's tiled product on the main block ``acc`` with loops ``(y, x, k)``: rows ``y`` (``tile_y``) and
    columns ``x`` (``tile_x``) split 4 ways and bound to blockIdx / vthread / threadIdx ``.y`` / ``.x``, the
    reduction ``k`` split 2 ways by ``k_knob``; the ``out`` block writes each thread's tile, the ``staged``
    shared copies are fetched cooperatively at the outer reduction loop, unrolling is annotated on the
    outermost loop. ``batch``: a loop outside the tiles (independent products), bound to blockIdx.z."""
    y, x, k = loops
    by, vy, ty, yi = sch.split(y, list(config["tile_y"]))
    bx, vx, tx, xi = sch.split(x, list(config["tile_x"]))
    ko, ki = sch.split(k, list(config[k_knob]))
    outer = () if batch is None else (batch,)
    sch.reorder(*outer, by, bx, vy, vx, ty, tx, ko, ki, yi, xi)
    tags = ("blockIdx.z",) * len(outer) + ("blockIdx.y", "blockIdx.x", "vthread.y", "vthread.x", "threadIdx.y",
                                           "threadIdx.x")
    for loop, tag in zip((*outer, by, bx, vy, vx, ty, tx), tags):
        sch.bind(loop, tag)
    sch.reverse_compute_at(out, tx, preserve_unit_loops=True)
    sch.decompose_reduction(acc, ko)
    threads = [("threadIdx.y", config["tile_y"][2]), ("threadIdx.x", config["tile_x"][2])]
    for block in staged:
        cooperative_fetch(sch, block, ko, threads)
    annotate_unroll(sch, (*outer, by)[0], config)


def stage_data_shared(sch: st.Schedule, info: FusedInfo, main):
    """The shared-memory copy of the main block's data input: the pad block itself moved to
    "shared" (padding is then applied while fetching), or a ``cache_read`` without a pad block."""
    if info.pad is not None:
        pad = sch.get_sblock(info.pad)
        sch.set_scope(pad, 0, "shared")
        return pad
    return sch.cache_read(main, info.data_read, "shared")


def _stage_conv(info: FusedInfo, mod: tvm.IRModule):
    """A new schedule of a conv with its padded input and weights read through shared memory and its
    output accumulated in registers: ``(sch, (data_s, weight_s), out, acc)``."""
    sch = new_schedule(mod)
    main = sch.get_sblock(info.main)
    data_s = stage_data_shared(sch, info, main)
    weight_s = sch.cache_read(main, info.weight_read, "shared")
    out, acc = stage_output(sch, info, "local")
    return sch, (data_s, weight_s), out, acc


def _split_fyx(sch, config: Config, f, y, x):
    """The channel, row and column loops split 4 ways by the ``tile_f``/``tile_y``/``tile_x`` knobs."""
    return tuple(sch.split(loop, list(config[k])) for loop, k in ((f, "tile_f"), (y, "tile_y"), (x, "tile_x")))


def _bind_conv(sch, config: Config, n, tiles, out, acc, init_at, staged, fetch_at) -> None:
    """Bind a conv's tiles ``(bf, by, bx, vf, vy, vx, tf, ty, tx)`` (batch fused into the channel
    blocks), write the output per thread, start the reduction at ``init_at``, fetch the shared tiles
    cooperatively at ``fetch_at`` and annotate unrolling."""
    bz = sch.fuse(n, tiles[0])
    bind_conv_tiles(sch, (bz, *tiles[1:]))
    sch.reverse_compute_at(out, tiles[-1], preserve_unit_loops=True)
    sch.decompose_reduction(acc, init_at)
    threads = conv_threads(config)
    for block in staged:
        cooperative_fetch(sch, block, fetch_at, threads)
    annotate_unroll(sch, bz, config)
