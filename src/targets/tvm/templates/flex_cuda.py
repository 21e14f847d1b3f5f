"""The template-free CUDA space (``target.template=flex`` on cuda), [Zheng-ASPLOS20] §4.2 and §5.3
("Schedule for GPU"), from the same loop-nest analysis as the CPU space (:mod:`.flex`).

Knobs, in this order (FlexTensor's GPU space):

- ``sp_<axis>``: every spatial axis split into 4 factors: (block, virtual thread, thread, inner);
- ``re_<axis>``: every reduce axis split into 3 factors (outer, middle, inner);
- ``fuse``: how the spatial axes are grouped into (at most) three contiguous groups, one per
  ``z``/``y``/``x`` dimension of the grid and of the thread block (FlexTensor's fuse sub-space);
- ``reorder``: where the inner reduce loops sit among the inner spatial loops: 0 before them, 1 in the
  middle, 2 after them (FlexTensor's reorder sub-space);
- ``unroll``: ``(auto_unroll_max_step, unroll_explicit)``, max step in (0, 1, 512, 1500), explicit 0/1.

The schedule: per group, the block factors of its axes are fused and bound to ``blockIdx``, the virtual
thread factors to ``vthread``, the thread factors to ``threadIdx`` (z, y, x for three groups, the last
ones for fewer); every thread accumulates its inner tile in registers ("local"); every input of the main
block is staged in shared memory at the middle reduce level and fetched cooperatively by the block's
threads (a producer that feeds the main block, a padding for instance, becomes that shared stage; the
producers before it are inlined); the epilogue is computed by the thread that owns the tile.

Validity: :meth:`FlexCuda.check` checks threads and virtual threads per block from the knobs;
:meth:`FlexCuda.verify` lowers the kernel and checks its shared memory (``verify_gpu_code``), as the
templates of :mod:`.cuda` do; ``static_check`` (what ``target=cuda`` screens proposed configs with) does both.
"""

from __future__ import annotations

import itertools
import math

import tvm
import tvm.s_tir as st

from tunebench.search_space import ChoiceKnob, Config, Space, SplitKnob

from .cuda import CudaTemplate, cooperative_fetch
from .flex import loop_nest, split_axes
from .fused import main_func
from .gpu_verify import limit_error

#: ``(auto_unroll_max_step, unroll_explicit)`` choices (FlexTensor's GPU unroll sub-space)
CUDA_UNROLL = tuple((step, explicit) for step in (0, 1, 512, 1500) for explicit in (0, 1))
_DIMS = ("z", "y", "x")


def groupings(n_axes: int) -> tuple[tuple[int, ...], ...]:
    """The ways to cut ``n_axes`` spatial axes into ``min(n_axes, 3)`` non-empty contiguous groups, as the
    sizes of the groups (e.g. 4 axes: (1, 1, 2), (1, 2, 1), (2, 1, 1))."""
    g = min(n_axes, 3)
    cuts = itertools.combinations(range(1, n_axes), g - 1)
    out = []
    for c in cuts:
        bounds = (0, *c, n_axes)
        out.append(tuple(b - a for a, b in zip(bounds, bounds[1:])))
    return tuple(sorted(out))


def _groups(sizes: tuple[int, ...]) -> list[list[int]]:
    start, out = 0, []
    for s in sizes:
        out.append(list(range(start, start + s)))
        start += s
    return out


class FlexCuda(CudaTemplate):
    """The template-free CUDA space of any task with one reduction block (module docstring)."""

    knob_check_complete = False  # the shared memory is known from the lowered kernel only

    def __init__(self, task_kind: str = ""):
        self.task_kind = task_kind

    def make_space(self, mod: tvm.IRModule) -> Space:
        nest = loop_nest(mod)
        return Space([SplitKnob(f"sp_{n}", e, 4) for n, e in nest.spatial]
                     + [SplitKnob(f"re_{n}", e, 3) for n, e in nest.reduce]
                     + [ChoiceKnob("fuse", groupings(len(nest.spatial))), ChoiceKnob("reorder", (0, 1, 2)),
                        ChoiceKnob("unroll", CUDA_UNROLL)])

    def _extents(self, mod: tvm.IRModule, config: Config, level: int) -> dict[str, int]:
        """Per grid dimension tag suffix (z/y/x), the product of the spatial factors at ``level``."""
        nest = loop_nest(mod)
        groups = _groups(tuple(config["fuse"]))
        dims = _DIMS[-len(groups):]
        return {d: math.prod(config[f"sp_{nest.spatial[a][0]}"][level] for a in g) for d, g in zip(dims, groups)}

    def shared_bytes(self, info, config: Config) -> int:  # checked after lowering (verify)
        return 0

    def check(self, mod: tvm.IRModule, config: Config, limits: dict) -> str | None:
        threads = {f"threadIdx.{d}": v for d, v in self._extents(mod, config, 2).items()}
        vthreads = {f"vthread.{d}": v for d, v in self._extents(mod, config, 1).items()}
        return limit_error(threads, vthreads, 0, limits)

    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        nest = loop_nest(mod)
        sch = st.Schedule(tvm.IRModule({"main": main_func(mod)}))
        staged = _stage_inputs(sch, nest)
        acc = sch.get_sblock(nest.main)
        for name in nest.epilogues[:-1]:
            sch.compute_inline(sch.get_sblock(name))
        out = sch.get_sblock(nest.epilogues[-1]) if nest.epilogues else sch.cache_write(acc, 0, "local")
        if nest.epilogues:
            sch.set_scope(acc, 0, "local")

        parts_s, parts_r = split_axes(sch, acc, nest, config)
        groups = _groups(tuple(config["fuse"]))
        level = lambda k, axes=None: [parts_s[a][k] for a in (axes if axes is not None else range(len(parts_s)))]  # noqa: E731
        inner_s, inner_r = level(3), [p[2] for p in parts_r]
        cut = (0, len(inner_s) // 2, len(inner_s))[config["reorder"]]
        sch.reorder(*(l for g in groups for l in level(0, g)), *(l for g in groups for l in level(1, g)),
                    *(l for g in groups for l in level(2, g)), *(p[0] for p in parts_r), *(p[1] for p in parts_r),
                    *inner_s[:cut], *inner_r, *inner_s[cut:])
        dims = _DIMS[-len(groups):]
        bound = {}
        for k, kind in ((0, "blockIdx"), (1, "vthread"), (2, "threadIdx")):
            for d, g in zip(dims, groups):
                bound[(k, d)] = sch.fuse(*level(k, g)) if len(g) > 1 else level(k, g)[0]
                sch.bind(bound[(k, d)], f"{kind}.{d}")
        last_thread = bound[(2, dims[-1])]
        sch.reverse_compute_at(out, last_thread, preserve_unit_loops=True)
        if parts_r:
            sch.decompose_reduction(acc, parts_r[0][0])
            threads = [(f"threadIdx.{d}", e) for d, e in self._extents(mod, config, 2).items()]
            for block in staged:
                cooperative_fetch(sch, block, parts_r[-1][1], threads)
        step, explicit = config["unroll"]
        sch.annotate(bound[(0, dims[0])], "pragma_auto_unroll_max_step", int(step))
        sch.annotate(bound[(0, dims[0])], "pragma_unroll_explicit", int(explicit))
        return sch.mod


def _stage_inputs(sch: st.Schedule, nest) -> list:
    """Every input of the main block read through shared memory: a producer block that feeds the main
    block becomes the shared copy (its own producers inlined into it); any other input gets a
    ``cache_read``. Returns the shared blocks."""
    main = sch.get_sblock(nest.main)
    read_bufs = [r.source for r in sch.get(main).reads]
    direct = {}
    for p in nest.producers:
        written = sch.get(sch.get_sblock(p)).writes[0].source
        if any(written.same_as(b) for b in read_bufs):
            direct[p] = written
    for p in nest.producers:
        if p not in direct:
            sch.compute_inline(sch.get_sblock(p))
    staged = []
    for i, buf in enumerate(read_bufs):
        prod = next((p for p, w in direct.items() if w.same_as(buf)), None)
        if prod is not None:
            block = sch.get_sblock(prod)
            sch.set_scope(block, 0, "shared")
            staged.append(block)
        else:
            staged.append(sch.cache_read(main, i, "shared"))
    return staged
