"""The Winograd computation of a fused 3×3 stride-1 conv2d task, with the task's own signature.

A conv2d task's PrimFunc is ``pad -> conv2d_nchw -> epilogue`` (:mod:`.fused`). :func:`winograd_func`
builds a new PrimFunc that computes the same output through the minimal filtering algorithm
F(m×m, 3×3) of [Lavin-CVPR16], in the structure of AutoTVM's CUDA ``conv2d_nchw_winograd``:

- ``data_pad``: the input padded as the task pads it, and on the bottom and right up to a whole
  number of ``m×m`` output tiles;
- ``input_tile[c, p, eps, nu]``: the ``alpha×alpha`` input tile (``alpha = m + 2``) of output tile
  ``p`` (tiles of all images, row-major);
- ``data_pack[eps, nu, c, p] = Σ B[r_a, eps] input_tile[c, p, r_a, r_b] B[r_b, nu]``: the input
  transform;
- ``kernel_pack[eps, nu, c, k] = Σ G[eps, r_kh] W[k, c, r_kh, r_kw] G[nu, r_kw]``: the weight
  transform, which reads only the weight (the matrices are constants): a template marks it as a
  weight layout rewrite, so that a model computes it once from the weights and a timed kernel takes it
  as a parameter (:func:`.fused.prepacked`);
- ``bgemm[eps, nu, k, p] = Σ_c kernel_pack[eps, nu, c, k] data_pack[eps, nu, c, p]``: ``alpha²``
  independent matrix products, where nearly all the work is;
- ``inverse[k, p, vh, vw] = Σ A[r_a, vh] bgemm[r_a, r_b, k, p] A[r_b, vw]``: the output transform;
- ``conv2d_winograd[n, k, h, w]``: ``inverse`` read back in NCHW, then the task's epilogue blocks
  (bias, residual, ReLU, ...), rebuilt from the task's own blocks, with the same parameters in the same
  order.

The transform matrices ``A``, ``B``, ``G`` are those of [Lavin-CVPR16] (interpolation points 0, ±1,
±2 and ∞ for F(4×4, 3×3); 0, ±1 and ∞ for F(2×2, 3×3)). A wrong rebuild is caught by the output check, which compares a candidate with
the task's unscheduled function.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm.ir.prim.expr as pe
import tvm.s_tir as st
import tvm.sym as sym
from tvm import te, tirx

from .fused import FusedInfo, main_func

KERNEL = 3  # F(m×m, 3×3) only

#: m -> (Aᵀ, Bᵀ, G) of F(m×m, 3×3), as printed in [Lavin-CVPR16] §4
MATRICES = {
    2: ([[1, 1, 1, 0], [0, 1, -1, -1]],
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
    4: ([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
}


@dataclass(frozen=True)
class WinogradShape:
    """Sizes of one Winograd conv: ``m`` output pixels per tile side, ``alpha = m + 2`` input pixels,
    ``tiles_h × tiles_w`` tiles per image, ``tiles`` in all (P, over the batch)."""

    m: int
    batch: int
    channels: int
    filters: int
    height: int
    width: int

    @property
    def alpha(self) -> int:
        return self.m + KERNEL - 1

    @property
    def tiles_h(self) -> int:
        return -(-self.height // self.m)

    @property
    def tiles_w(self) -> int:
        return -(-self.width // self.m)

    @property
    def tiles(self) -> int:
        return self.batch * self.tiles_h * self.tiles_w


def winograd_problem(info: FusedInfo) -> str | None:
    """Why the task of ``info`` has no Winograd form here (None: it has one)."""
    e = info.extents
    if info.kind != "conv2d":
        return f"Winograd computes conv2d tasks, not {info.kind}"
    if (e["ry"], e["rx"]) != (KERNEL, KERNEL) or info.strides != (1, 1) or info.dilations != (1, 1):
        return (f"Winograd here is F(m×m, 3×3) at stride 1, dilation 1; the task has a {e['ry']}×{e['rx']} "
                f"kernel, strides {info.strides}, dilations {info.dilations}")
    return None


def tile_size(info: FusedInfo) -> int:
    """``m``: 4 (F(4×4, 3×3), 2.25 multiplications per output against 9) when both output sides are at
    least 8, else 2 (F(2×2, 3×3), 4 per output), so that small maps do not spend most of their tiles on
    padding."""
    e = info.extents
    return 4 if min(e["y"], e["x"]) >= 8 else 2


def shape_of(info: FusedInfo) -> WinogradShape:
    e = info.extents
    return WinogradShape(m=tile_size(info), batch=e["n"], channels=e["rc"], filters=e["f"],
                         height=e["y"], width=e["x"])


def winograd_func(mod: tvm.IRModule, info: FusedInfo) -> tvm.IRModule:
    """The task of ``mod`` (analysed as ``info``, a 3×3 stride-1 conv2d) computed by Winograd: a module
    whose ``"main"`` takes the same parameters and writes the same output.

    Raises:
        ValueError: for a task with no Winograd form (:func:`winograd_problem`) or an epilogue this
            rebuild does not know (an expression kind it cannot translate).
    """
    if problem := winograd_problem(info):
        raise ValueError(problem)
    func = main_func(mod)
    sch = st.Schedule(tvm.IRModule({"main": func}))
    blocks = {b.name_hint: b for b in (sch.get(rv) for rv in sch.get_child_blocks(sch.get_sblock("root")))}
    main = blocks[info.main]
    data_var = main.reads[info.data_read].source if info.pad is None else blocks[info.pad].reads[0].source
    weight_var = main.reads[info.weight_read].source
    inputs = list(func.params[:-1])
    tensors = [(p, te.placeholder(_shape(p), dtype=str(p.ty.dtype), name=p.name)) for p in inputs]
    data, weight = (_lookup(tensors, v) for v in (data_var, weight_var))
    pads = _padding(blocks[info.pad], data_var) if info.pad is not None else (0, 0)
    conv = _winograd(data, weight, pads, shape_of(info), main.writes[0].source.ty.shape)
    tensors.append((main.writes[0].source, conv))
    out = conv
    for name in info.epilogues:
        out = _rebuild(blocks[name], tensors)
        tensors.append((blocks[name].writes[0].source, out))
    new = te.create_prim_func([t for _, t in tensors[:len(inputs)]] + [out])
    if func.attrs is not None:
        for key, value in func.attrs.items():
            new = new.with_attr(key, value)
    return tvm.IRModule({"main": new})


def _shape(param) -> list:
    return list(param.ty.shape)


def _lookup(pairs, var):
    for key, value in pairs:
        if key.same_as(var):
            return value
    raise ValueError(f"the Winograd rebuild found no tensor for buffer {var}")


def _padding(pad_block, data_var) -> tuple[int, int]:
    """Top and left padding of the task's pad block: minus the constant of its read's row and column
    index (``data[n, c, y - top, x - left]``)."""
    region = next(r for r in pad_block.reads if r.source.same_as(data_var)).region
    it = [iv.var for iv in pad_block.iter_vars]
    offsets = []
    for dim in (2, 3):
        coef = sym.detect_linear_equation(region[dim].min, [it[dim]])
        if len(coef) != 2 or int(coef[0]) != 1:
            raise ValueError(f"the pad block {pad_block.name_hint} reads the data at a non-shifted index")
        offsets.append(-int(coef[1]))
    return offsets[0], offsets[1]


def _winograd(data, weight, pads, s: WinogradShape, out_shape):
    """The TE stages of the module docstring; returns ``conv2d_winograd`` in the dtype of ``data``."""
    dtype = str(data.dtype)
    top, left = pads
    height_in, width_in = (int(d) for d in data.shape[2:])
    a_t, b_t, g = MATRICES[s.m]
    mat_a, mat_b = (_const_matrix(list(zip(*rows)), name, dtype) for rows, name in ((a_t, "A"), (b_t, "B")))
    mat_g = _const_matrix(g, "G", dtype)
    zero = tirx.const(0.0, dtype)
    i64 = _int64
    padded = te.compute(
        i64(s.batch, s.channels, s.tiles_h * s.m + KERNEL - 1, s.tiles_w * s.m + KERNEL - 1),
        lambda n, c, y, x: tirx.if_then_else(
            tirx.all(y >= top, y < top + height_in, x >= left, x < left + width_in),
            data[n, c, y - top, x - left], zero), name="data_pad")
    per_image = s.tiles_h * s.tiles_w
    input_tile = te.compute(
        i64(s.channels, s.tiles, s.alpha, s.alpha),
        lambda c, p, eps, nu: padded[p // per_image, c, (p % per_image) // s.tiles_w * s.m + eps,
                                     p % s.tiles_w * s.m + nu], name="input_tile")
    r_a, r_b = (te.reduce_axis(tuple(i64(0, s.alpha)), n) for n in ("r_a", "r_b"))
    data_pack = te.compute(
        i64(s.alpha, s.alpha, s.channels, s.tiles),
        lambda eps, nu, c, p: te.sum(input_tile[c, p, r_a, r_b] * mat_b[r_a, eps] * mat_b[r_b, nu],
                                     axis=[r_a, r_b]), name="data_pack")
    r_kh, r_kw = (te.reduce_axis(tuple(i64(0, KERNEL)), n) for n in ("r_kh", "r_kw"))
    kernel_pack = te.compute(
        i64(s.alpha, s.alpha, s.channels, s.filters),
        lambda eps, nu, c, k: te.sum(weight[k, c, r_kh, r_kw] * mat_g[eps, r_kh] * mat_g[nu, r_kw],
                                     axis=[r_kh, r_kw]), name="kernel_pack")
    rc = te.reduce_axis(tuple(i64(0, s.channels)), "rc")
    bgemm = te.compute(
        i64(s.alpha, s.alpha, s.filters, s.tiles),
        lambda eps, nu, k, p: te.sum(kernel_pack[eps, nu, rc, k] * data_pack[eps, nu, rc, p], axis=[rc]),
        name="bgemm")
    r_a2, r_b2 = (te.reduce_axis(tuple(i64(0, s.alpha)), n) for n in ("r_a", "r_b"))
    inverse = te.compute(
        i64(s.filters, s.tiles, s.m, s.m),
        lambda k, p, vh, vw: te.sum(bgemm[r_a2, r_b2, k, p] * mat_a[r_a2, vh] * mat_a[r_b2, vw],
                                    axis=[r_a2, r_b2]), name="inverse")
    return te.compute(
        list(out_shape),
        lambda n, k, h, w: inverse[k, n * per_image + h // s.m * s.tiles_w + w // s.m, h % s.m, w % s.m],
        name="conv2d_winograd")


def _const_matrix(rows, name: str, dtype: str):
    """A constant matrix as a TE stage (a chain of selects, folded once its loops are unrolled);
    int64 indices, as the task's."""
    def value(i, j):
        out = tirx.const(0.0, dtype)
        for r, row in enumerate(rows):
            for c, v in enumerate(row):
                if v:
                    out = tirx.Select(tirx.all(i == r, j == c), tirx.const(float(v), dtype), out)
        return out

    return te.compute(_int64(len(rows), len(rows[0])), value, name=name)


def _int64(*values) -> list:
    return [tirx.const(v, "int64") for v in values]


def _rebuild(block, tensors):
    """A TE stage computing what the elementwise ``block`` computes, on the TE tensors of its inputs
    (``tensors``: pairs of the task's buffer and its tensor)."""
    store = block.body
    ivars = [iv.var for iv in block.iter_vars]
    if not isinstance(store, tirx.BufferStore) or len(store.indices) != len(ivars) or not all(
            i.same_as(v) for i, v in zip(store.indices, ivars)):
        raise ValueError(f"epilogue block {block.name_hint!r} is not elementwise over its output")
    shape = list(store.buffer.ty.shape)

    def compute(*index):
        return _translate(store.value, tensors, list(zip(ivars, index)))

    return te.compute(shape, compute, name=block.name_hint)


_BINARY = (pe.BinaryOpExpr, pe.CmpExpr, pe.And, pe.Or)


def _translate(expr, tensors, variables):
    """``expr`` of a block body with its buffer loads read from TE tensors and its block variables
    replaced (``variables``: pairs of a block variable and its replacement)."""
    def again(e):
        return _translate(e, tensors, variables)

    if isinstance(expr, tvm.ir.TensorLoad):
        return _lookup(tensors, expr.source)(*[again(i) for i in expr.indices])
    if isinstance(expr, (pe.IntImm, pe.FloatImm)):
        return expr
    if isinstance(expr, pe.Var):
        return _lookup(variables, expr)
    if isinstance(expr, _BINARY):
        return type(expr)(again(expr.a), again(expr.b))
    if isinstance(expr, pe.Not):
        return pe.Not(again(expr.a))
    if isinstance(expr, pe.Cast):
        return pe.Cast(expr.dtype, again(expr.value))
    if isinstance(expr, pe.Select):
        return pe.Select(again(expr.condition), again(expr.true_value), again(expr.false_value))
    if isinstance(expr, tvm.ir.Call):
        return tvm.ir.Call(expr.op, [again(a) for a in expr.args], attrs=expr.attrs, ty_args=expr.ty_args,
                           ret_ty=expr.ty)
    raise ValueError(f"the Winograd rebuild cannot translate a {type(expr).__name__} in an epilogue")
