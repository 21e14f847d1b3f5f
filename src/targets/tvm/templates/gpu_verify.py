"""What a GPU schedule launches, and the first of the GPU's per-block limits it breaks: threads per block, each
thread dimension, virtual threads per axis and shared memory, counted per kernel of the scheduled function.

GPU limits (the ``limits`` dict) use the keys of ``verify_gpu_code``: ``max_threads_per_block``,
``max_thread_x/y/z``, ``max_vthread`` (per virtual-thread dimension) and ``max_shared_memory_per_block``
(bytes). Missing keys are not checked.
"""

from __future__ import annotations

import math

import tvm
import tvm.s_tir as st
from tvm import s_tir, tirx

#: target used for the lowering passes run by :meth:`CudaTemplate.verify`
VERIFY_TARGET = {"kind": "cuda", "arch": "sm_80"}


def lowering_passes() -> list:
    """The s_tir lowering passes up to virtual-thread injection and storage rewrite, as in
    MetaSchedule's ``VerifyGPUCode`` postprocessor: afterwards shared allocations are final."""
    return [
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.NarrowDataType(32),
        tirx.transform.StmtSimplify(),
        tirx.transform.VectorizeLoop(True),
        s_tir.transform.InjectVirtualThread(),
        tirx.transform.StorageRewrite(),
        tirx.transform.StmtSimplify(),
    ]


def trace_limits(limits: dict) -> dict:
    """The limits a MetaSchedule trace is held to: ``limits`` without ``max_vthread``. MetaSchedule's own
    ``VerifyGPUCode`` postprocessor checks a kernel after virtual-thread injection, where no virtual-thread axis
    is left, so its search proposes (and TVM compiles) virtual-thread extents above AutoTVM's per-axis 8; that
    limit is a convention of AutoTVM's templates, not of the GPU, and a trace is not rejected for it."""
    return {k: v for k, v in limits.items() if k != "max_vthread"}


def thread_bindings(sched_mod: tvm.IRModule) -> list[tuple[dict[str, int], dict[str, int]]]:
    """Per kernel of the scheduled function (each loop nest under its root: a function may launch several,
    as Winograd's four), ``(threads, vthreads)``: the extent of each ``threadIdx.*`` / ``vthread.*`` axis
    bound in it (the largest one when an axis is bound more than once)."""
    sch = st.Schedule(sched_mod)
    kernels: dict = {}
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(block)
        if not loops:
            continue
        threads, vthreads = kernels.setdefault(sch.get(loops[0]), ({}, {}))
        for loop in loops:
            node = sch.get(loop)
            if node.thread_binding is None:
                continue
            tag = node.thread_binding.thread_tag
            table = threads if tag.startswith("threadIdx") else vthreads if tag.startswith("vthread") else None
            if table is not None:
                table[tag] = max(table.get(tag, 1), int(node.extent))
    return list(kernels.values())


def limit_error(threads: dict[str, int], vthreads: dict[str, int], shared_bytes: int,
                limits: dict) -> str | None:
    """The first GPU limit broken by a kernel with these thread extents and shared bytes."""
    total = math.prod(threads.values())
    if total > limits.get("max_threads_per_block", math.inf):
        return (f"{total} threads per block ({', '.join(f'{k}={v}' for k, v in sorted(threads.items()))}) "
                f"> max_threads_per_block={limits['max_threads_per_block']}")
    for tag, ext in sorted(threads.items()):
        key = "max_thread_" + tag.rsplit(".", 1)[-1]
        if ext > limits.get(key, math.inf):
            return f"{tag} extent {ext} > {key}={limits[key]}"
    for tag, ext in sorted(vthreads.items()):
        if ext > limits.get("max_vthread", math.inf):
            return f"{tag} extent {ext} > max_vthread={limits['max_vthread']}"
    if shared_bytes > limits.get("max_shared_memory_per_block", math.inf):
        return (f"{shared_bytes} bytes of shared memory per block > "
                f"max_shared_memory_per_block={limits['max_shared_memory_per_block']}")
    return None
