"""CUDA dense for one row (batch 1, GEMV-like): the reduction split across the threads of a block.

A batch-1 dense layer (``C[1, N] = A[1, K] W[K, N]``, then the fused bias / relu) reads every weight
once and does one multiply-add per weight: its ceiling is the GPU's memory bandwidth, and what matters
is that every weight byte is loaded once, in wide coalesced loads, by enough threads to keep the
memory system busy. :class:`CudaGemv` does this (the structure of a split-K GEMV, as in TVM's dlight
GEMV rule and MetaSchedule's cross-thread reduction rule; written from their ideas, not their code):

- a thread block owns ``threads_n x vector`` consecutive output columns: ``threads_n`` threads on
  ``threadIdx.y``, each with ``vector`` consecutive columns (1, 2 or 4: one ``float``/``float2``/
  ``float4`` load of a weight row segment ``W[k, n:n+vector]``); blocks on ``blockIdx.x`` (the rows M
  fused in);
- the reduction K is split across ``threads_k`` threads on ``threadIdx.x``: thread ``t`` accumulates
  in registers the rows ``k = (step * threads_k + t) * k_inner + i`` (``k_inner`` consecutive rows per
  step, unrolled), an ``rfactor`` of the reduction;
- the ``threads_k`` partial sums of each output are then summed across the threads (a cross-thread
  reduction, lowered by TVM's LowerCrossThreadReduction / LowerThreadAllreduce to warp shuffles, and,
  for more than one warp, a shared-memory exchange of one value per warp), and the epilogue (bias,
  relu, residual) runs in the thread that holds the sum (TVM guards it with ``threadIdx.x == 0``),
  ``vector`` columns at a time.

The weights are ``W[K, N]`` (columns contiguous). With ``threads_k < 32`` one warp spans
``32 / threads_k`` column groups of the same rows, so a warp reads ``threads_k`` row segments of
``(32 / threads_k) * vector * 4`` contiguous bytes each (``threads_k=4, threads_n=8, vector=4``: 4
full 128-byte lines); with ``threads_k >= 32`` a warp reads 32 rows of ``vector * 4`` bytes each,
which the next warps of the block complete from L2. The search chooses.

Knobs: ``threads_k`` (powers of two up to 1024 dividing K), ``threads_n`` (1..32), ``vector`` (1, 2,
4 dividing N), ``k_inner`` (1, 2, 4, 8), ``auto_unroll_max_step`` (0, 16, 64, 512; the
``pragma_auto_unroll_max_step`` of the kernel, unrolled by the CUDA compiler: TVM's explicit
unrolling would copy the cross-thread reduction, which its lowering does not accept). Where
``threads_n * vector`` does not divide N or ``threads_k * k_inner`` does not divide K, the last block or
step is guarded (a predicate outside the vector: ``vector`` divides N).

:class:`CudaDenseDirect` is the CUDA ``direct`` dense template: :class:`CudaGemv` for one row (M = 1),
the tiled :class:`~.cuda.CudaDense` otherwise.
"""

from __future__ import annotations

import tvm

from tunebench.search_space import ChoiceKnob, Config, Space

from .cuda import FLOAT_BYTES, CudaDense, CudaTemplate, PickingTemplate
from .fused import FusedInfo, new_schedule, stage_output
from .gpu_verify import limit_error

WARP = 32
VECTORS = (1, 2, 4)
K_INNER = (1, 2, 4, 8)
THREADS_N = (1, 2, 4, 8, 16, 32)
UNROLL_STEPS = (0, 16, 64, 512)
MAX_THREADS_K = 1024


def threads_k_values(k: int) -> tuple[int, ...]:
    """The ``threads_k`` choices of a reduction of length ``k``: powers of two up to 1024 dividing it."""
    return tuple(t for t in (2 ** i for i in range(11)) if t <= MAX_THREADS_K and k % t == 0)


class CudaGemv(CudaTemplate):
    """Batch-1 (GEMV-like) CUDA dense: split-K across ``threadIdx.x`` with a cross-thread reduction,
    output columns on ``threadIdx.y`` x ``blockIdx.x`` (see the module docstring)."""

    task_kind = "dense"

    def make_space(self, mod: tvm.IRModule) -> Space:
        e = self.analyze(mod).extents
        return Space([
            ChoiceKnob("threads_k", threads_k_values(e["k"])), ChoiceKnob("threads_n", THREADS_N),
            ChoiceKnob("vector", tuple(v for v in VECTORS if e["x"] % v == 0)), ChoiceKnob("k_inner", K_INNER),
            ChoiceKnob("auto_unroll_max_step", UNROLL_STEPS),
        ])

    def shared_bytes(self, info: FusedInfo, config: Config) -> int:
        """No staged tiles; the cross-thread reduction of more than one warp exchanges one value per warp
        and thread group, plus the result, in shared memory (at most 64 floats: threads_k * threads_n <= 1024)."""
        tk, tn = int(config["threads_k"]), int(config["threads_n"])
        return FLOAT_BYTES * tn * (tk // WARP + 1) if tk > WARP else 0

    def check(self, mod: tvm.IRModule, config: Config, limits: dict) -> str | None:
        """Threads per block (``threads_k * threads_n``), each thread dimension and the reduction's
        shared bytes against ``limits``: the first violation, or None."""
        info = self.analyze(mod)
        threads = {"threadIdx.x": int(config["threads_k"]), "threadIdx.y": int(config["threads_n"])}
        return limit_error(threads, {}, self.shared_bytes(info, config), limits)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        info = self.analyze(mod)
        sch = new_schedule(mod)
        out, acc = stage_output(sch, info, "local")
        tk, tn, vec = int(config["threads_k"]), int(config["threads_n"]), int(config["vector"])
        y, x, k = sch.get_loops(acc)
        bx, ty, v = sch.split(x, [None, tn, vec])
        ko, tx, ki = sch.split(k, [None, tk, int(config["k_inner"])])
        sch.reorder(y, bx, ty, tx, ko, ki, v)
        sch.fuse(y, bx)
        # per-thread partial sums over its rows of K, in registers
        part = sch.rfactor(tx, 0)
        block, ty, tx, ko, ki, v = sch.get_loops(part)
        for loop, tag in ((block, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            sch.bind(loop, tag)
        sch.set_scope(part, 0, "local")
        sch.vectorize(v)
        sch.unroll(ki)
        sch.decompose_reduction(part, ko)
        # the sum across threadIdx.x: the thread loop innermost, one cross-thread reduction per column
        sch.reverse_compute_at(acc, ty, preserve_unit_loops=True)
        red, *_, cols = sch.get_loops(acc)[2:]
        sch.reorder(cols, red)
        sch.bind(red, "threadIdx.x")
        sch.reverse_compute_at(out, ty, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(out)[-1])
        sch.annotate(block, "pragma_auto_unroll_max_step", int(config["auto_unroll_max_step"]))
        sch.annotate(block, "pragma_unroll_explicit", 0)
        return sch.mod


class CudaDenseDirect(PickingTemplate):
    """The CUDA ``direct`` dense template: :class:`CudaGemv` for a function of one row (M = 1, a batch-1
    layer), the tiled :class:`~.cuda.CudaDense` for more rows."""

    task_kind = "dense"

    def choose(self, info: FusedInfo) -> CudaTemplate:
        return CudaGemv() if info.extents["y"] == 1 else CudaDense()
