"""Analysis of a fused PrimFunc (one Relax task) for the schedule templates.

A task's ``mod`` holds one PrimFunc ``"main"`` made by Relax ``LegalizeOps + FuseOps + FuseTIR``.
Its root block contains, in program order:

1. an optional ``pad_temp`` block (conv kinds; a pure copy when the padding is 0),
2. the *main* reduction block:

   - ``conv2d_nchw``: iters ``(nn, ff, yy, xx, rc, ry, rx)``, reads
     ``pad[nn, rc, yy*sh + ry*dh, xx*sw + rx*dw]`` and ``W[ff, rc, ry, rx]``;
   - ``group_conv2d_nchw`` with ``rc`` extent 1 (depthwise): reads ``pad[nn, ff + rc, ...]``;
   - ``matmul`` (dense): iters ``(i0, i1, k)``, reads ``A[i0, k]`` and ``W[k, i1]``;

3. zero or more elementwise epilogue blocks (bias ``T_add``, residual ``T_add1``,
   relu ``compute``), the last of which writes the function's output.

:func:`analyze` finds these blocks and the main block's axis extents; :func:`stage_output`
is the scheduling step shared by all templates (inline the epilogue chain into its last block
and give the main block a separate accumulation buffer); :class:`Template` is the interface
every template implements.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import tvm
import tvm.s_tir as st
import tvm.sym as sym

from tunebench.search_space import Config, Space

#: main block name -> task kind
MAIN_BLOCKS = {"conv2d_nchw": "conv2d", "group_conv2d_nchw": "depthwise_conv2d", "matmul": "dense"}

#: canonical axis names of the main block, in iter-var order, per task kind
AXES = {
    "conv2d": ("n", "f", "y", "x", "rc", "ry", "rx"),
    "depthwise_conv2d": ("n", "f", "y", "x", "rc", "ry", "rx"),
    "dense": ("y", "x", "k"),  # y: rows M (batch), x: columns N (out features), k: reduction
}

_REDUCE = tvm.tirx.IterVar.CommReduce  # iter_type of a reduction block var

#: block annotation of a weight copy in a packed layout (the name TVM's passes look for)
LAYOUT_REWRITE = "meta_schedule.layout_rewrite_preproc"


@dataclass(frozen=True)
class FusedInfo:
    """What a template needs to know about a fused PrimFunc.

    Attributes:
        kind: ``"conv2d"``, ``"depthwise_conv2d"`` or ``"dense"``.
        main: name of the main reduction block.
        pad: name of the pad block feeding the main block's data read, or ``None``.
        padded: True when the pad block really pads (its buffer is larger than its input);
            False for a pure copy or when there is no pad block.
        epilogues: names of the elementwise blocks after the main block, in program order.
        extents: axis name (see :data:`AXES`) -> loop extent (number of iterations).
        data_read: index of the data (input / padded input / ``A``) read in the main block's reads.
        weight_read: index of the weight read in the main block's reads.
        strides: conv ``(sh, sw)`` in output-to-input pixels; ``(1, 1)`` for dense.
        dilations: conv ``(dh, dw)``; ``(1, 1)`` for dense.
    """

    kind: str
    main: str
    pad: str | None
    padded: bool
    epilogues: tuple[str, ...]
    extents: dict
    data_read: int
    weight_read: int
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)

    @property
    def is_conv(self) -> bool:
        return self.kind in ("conv2d", "depthwise_conv2d")

    @property
    def output_axes(self) -> tuple[str, ...]:
        """The main block's spatial axes, in loop order."""
        return AXES[self.kind][:4] if self.is_conv else AXES[self.kind][:2]

    def input_tile(self, ty: int, tx: int, kh: int, kw: int) -> tuple[int, int]:
        """Height and width (pixels) of the input region read by a ``ty x tx`` output tile and a
        ``kh x kw`` slice of the kernel: ``(t - 1) * stride + (k - 1) * dilation + 1`` per dim."""
        (sh, sw), (dh, dw) = self.strides, self.dilations
        return (ty - 1) * sh + (kh - 1) * dh + 1, (tx - 1) * sw + (kw - 1) * dw + 1


def main_func(mod: tvm.IRModule) -> tvm.tirx.PrimFunc:
    """The PrimFunc ``"main"`` of ``mod`` (or its only function)."""
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if "main" in names:
        return mod["main"]
    if len(names) == 1:
        return mod[names[0]]
    raise ValueError(f"module has no 'main' PrimFunc (functions: {names})")


def _as_module(mod: tvm.IRModule) -> tvm.IRModule:
    return tvm.IRModule({"main": main_func(mod)})


def analyze(mod: tvm.IRModule) -> FusedInfo:
    """Find the main block, its kind, the pad and epilogue blocks and the axis extents.

    Raises:
        ValueError: when the function is not one of the supported fused shapes.
    """
    sch = st.Schedule(_as_module(mod))
    blocks = [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]
    mains = [i for i, b in enumerate(blocks) if any(int(iv.iter_type) == _REDUCE for iv in b.iter_vars)]
    if len(mains) != 1:
        raise ValueError(f"expected exactly one reduction block, found {[blocks[i].name_hint for i in mains]}")
    pos = mains[0]
    blk = blocks[pos]
    name = blk.name_hint
    if name not in MAIN_BLOCKS:
        raise ValueError(f"unsupported main block {name!r}; supported: {sorted(MAIN_BLOCKS)}")
    kind = MAIN_BLOCKS[name]
    axes = AXES[kind]
    if len(blk.iter_vars) != len(axes):
        raise ValueError(f"block {name!r} has {len(blk.iter_vars)} iters, expected {len(axes)} {axes}")
    extents = {a: int(iv.dom.extent) for a, iv in zip(axes, blk.iter_vars)}
    ivars = {a: iv.var for a, iv in zip(axes, blk.iter_vars)}
    if kind == "depthwise_conv2d" and extents["rc"] != 1:
        raise ValueError(f"grouped conv with {extents['rc']} channels per group is not depthwise")

    before, epilogues = blocks[:pos], tuple(b.name_hint for b in blocks[pos + 1:])
    reads = list(blk.reads)
    if len(reads) != 2:
        raise ValueError(f"main block {name!r} reads {len(reads)} buffers, expected 2")
    pad, padded = None, False
    if kind == "dense":
        # A[i0, k] is indexed by the rows, W[k, i1] is not
        uses_rows = [any(_uses(r.min, ivars["y"]) for r in rd.region) for rd in reads]
        if uses_rows.count(True) != 1:
            raise ValueError(f"cannot tell the data from the weight read in {name!r}: {reads}")
        data_read = uses_rows.index(True)
    else:
        data_read = 0
        for i, rd in enumerate(reads):
            producer = next((b for b in before if b.writes[0].source.same_as(rd.source)), None)
            if producer is not None:
                data_read, pad = i, producer.name_hint
                src = producer.reads[0].source
                padded = [int(s) for s in src.shape] != [int(s) for s in rd.source.shape]
    others = [b.name_hint for b in before if b.name_hint != pad]
    if others:
        raise ValueError(f"unexpected blocks before {name!r}: {others}")
    weight_read = 1 - data_read

    strides, dilations = ((1, 1), (1, 1)) if kind == "dense" else _strides_dilations(reads[data_read], ivars, name)
    return FusedInfo(kind=kind, main=name, pad=pad, padded=padded, epilogues=epilogues, extents=extents,
                     data_read=data_read, weight_read=weight_read, strides=strides, dilations=dilations)


def _strides_dilations(read, ivars: dict, name: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """A convolution's ``(strides, dilations)`` from its data read: the index along height is
    ``yy * sh + ry * dh (+ const)``, along width likewise."""
    coefs = [sym.detect_linear_equation(read.region[d].min, [ivars[o], ivars[r]])
             for d, o, r in ((2, "y", "ry"), (3, "x", "rx"))]
    if any(len(c) != 3 for c in coefs):
        raise ValueError(f"non-affine data index in {name!r}: {read}")
    (sh, dh, _), (sw, dw, _) = ([int(v) for v in c] for c in coefs)
    return (sh, sw), (dh, dw)


def _uses(expr, var) -> bool:
    """Whether the index ``expr`` depends on ``var`` (nonzero linear coefficient, or nonlinear)."""
    coef = sym.detect_linear_equation(expr, [var])
    return len(coef) == 0 or int(coef[0]) != 0


def new_schedule(mod: tvm.IRModule) -> st.Schedule:
    """A fresh schedule of ``mod``'s main function."""
    return st.Schedule(_as_module(mod))


def stage_output(sch: st.Schedule, info: FusedInfo, acc_scope: str):
    """Split the fused function into an *output* block and an *accumulation* block.

    The epilogue blocks except the last are inlined into the last one, which becomes the output
    block (it reads the main block's result and writes the function's output). The main block's
    result buffer is put in ``acc_scope``. Without an epilogue, ``cache_write`` creates the
    accumulation buffer (in ``acc_scope``) and a copy block that becomes the output block.

    Returns:
        ``(output_block, acc_block)`` schedule handles; the output block's loops are the main
        block's spatial axes (``info.output_axes``), in order.
    """
    acc = sch.get_sblock(info.main)
    if not info.epilogues:
        out = sch.cache_write(acc, 0, acc_scope)
        return out, acc
    for name in info.epilogues[:-1]:
        sch.compute_inline(sch.get_sblock(name))
    out = sch.get_sblock(info.epilogues[-1])
    if acc_scope != "global":
        sch.set_scope(acc, 0, acc_scope)
    return out, acc


def pad_once(sch: st.Schedule, info: FusedInfo) -> None:
    """CPU: a pad block that really pads is computed once, parallel over batch x channels; a pad
    block that only copies (padding 0) is inlined (the input is read directly)."""
    if info.pad is None:
        return
    pad = sch.get_sblock(info.pad)
    if info.padded:
        n, c, *_ = sch.get_loops(pad)
        sch.parallel(sch.fuse(n, c))
    else:
        sch.compute_inline(pad)


def pack_weight(sch: st.Schedule, block, read_index: int, index_map):
    """Read ``block``'s weight (its read ``read_index``, a function parameter) through a copy in the
    layout ``index_map`` gives, marked as a weight layout rewrite.

    The scheduled function keeps its signature (the copy runs inside it: what the output check
    runs). In a model build the copy is split out of the function and computed once from the
    weights before the model runs (:func:`tunebench.targets.tvm.e2e.tuned_module`); a single kernel is
    timed with the packed weight as its parameter (:func:`prepacked`), so neither pays the packing
    per call. Returns the copy block.
    """
    copy = sch.cache_read(block, read_index, "global")
    sch.transform_layout(copy, ("write", 0), index_map)
    sch.annotate(copy, LAYOUT_REWRITE, True)
    return copy


def block_conv_nchwc(sch: st.Schedule, acc, weight_read: int, ic_bn: int, oc_bn: int):
    """The NCHWc blocking of a conv2d's main block ``acc`` (AutoTVM's x86 ``conv2d_NCHWc``): weights
    read packed as ``[K/oc_bn, C/ic_bn, kh, kw, ic_bn, oc_bn]`` (:func:`pack_weight`) and the result
    accumulated in ``[N, K/oc_bn, H, W, oc_bn]``; its loops and the data read stay as they are. Returns
    the weight's packing block."""
    copy = pack_weight(sch, acc, weight_read, lambda o, i, h, w: (o // oc_bn, i // ic_bn, h, w, i % ic_bn, o % oc_bn))
    sch.transform_layout(acc, ("write", 0), lambda n, f, y, x: (n, f // oc_bn, y, x, f % oc_bn))
    return copy


def has_weight_rewrite(func: tvm.tirx.PrimFunc) -> bool:
    """Whether a block of the scheduled ``func`` is marked as a weight layout rewrite (:func:`pack_weight`,
    Winograd's weight transform): a model build splits it out and computes it once from the weights."""
    sch = st.Schedule(tvm.IRModule({"main": func}))
    return any(LAYOUT_REWRITE in sch.get(b).annotations for b in sch.get_child_blocks(sch.get_sblock("root")))


def prepacked(sched_mod: tvm.IRModule) -> tvm.IRModule:
    """``sched_mod`` with its weight rewrites split out: its function takes the rewritten weights as
    parameters (unchanged when it has none).

    The split is the model build's (Relax ``SplitLayoutRewritePreproc``, on a one-call Relax function), so
    the kernel timed alone is the kernel a model runs, whether its rewrite only moves the weights (a
    packed layout) or computes from them (Winograd's weight transform)."""
    from tvm import relax

    func = sched_mod["main"]
    if not has_weight_rewrite(func):
        return sched_mod
    builder = relax.BlockBuilder()
    kernel = builder.add_func(func.without_attr("global_symbol"), "kernel")
    params = [relax.Var(p.name, relax.TensorType(p.ty.shape, str(p.ty.dtype))) for p in func.params]
    *inputs, out = params
    with builder.function("main", inputs):
        call = builder.emit(relax.call_tir(kernel, inputs, out.ty))
        builder.emit_func_output(call)
    split = relax.transform.SplitLayoutRewritePreproc()(builder.get())
    timed = split["kernel_prepacked"]
    symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
    return tvm.IRModule({"main": timed.with_attr("global_symbol", symbol) if symbol else timed})


class Template(abc.ABC):
    """A tuning template: a knob space for one task kind on one target, and how to apply a config.

    Subclasses set ``task_kind`` and ``target_kind`` and implement :meth:`make_space` and
    :meth:`apply`; GPU templates also override :meth:`check` and :meth:`verify`.
    """

    task_kind: str = ""
    target_kind: str = ""

    @abc.abstractmethod
    def make_space(self, mod: tvm.IRModule) -> Space:
        """The knob space of the fused function in ``mod`` (knob lengths read from its main block)."""

    @abc.abstractmethod
    def apply(self, mod: tvm.IRModule, config: Config) -> tvm.IRModule:
        """``mod`` scheduled with ``config``: a new IRModule ready for ``tvm.compile``."""

    def check(self, mod: tvm.IRModule, config: Config, limits: dict) -> str | None:
        """Pre-build validity check from the knobs alone: a one-line reason, or None when valid."""
        return None

    def verify(self, sched_mod: tvm.IRModule, limits: dict) -> str | None:
        """Validity check of a scheduled module (after lowering): a one-line reason, or None."""
        return None

    def source_class(self, mod: tvm.IRModule) -> type:
        """The class whose code schedules ``mod`` (a measured space records its source file): this one,
        unless the template hands some tasks to another class's code."""
        return type(self)

    def analyze(self, mod: tvm.IRModule) -> FusedInfo:
        """:func:`analyze` plus a check that the function's kind is this template's kind."""
        info = analyze(mod)
        if info.kind != self.task_kind:
            raise ValueError(f"{type(self).__name__} handles {self.task_kind!r} tasks, "
                             f"got a {info.kind!r} function (main block {info.main!r})")
        return info

    def __repr__(self) -> str:
        return f"{type(self).__name__}(task_kind={self.task_kind!r}, target_kind={self.target_kind!r})"
