"""The single operators of ``model=ops`` (:mod:`tunebench.datasets.operators`: cases, shapes) as TVM
tensor-expression tasks: each written with TVM's tensor expressions (TOPI where it has the operator), at
batch 1 and float32, and turned into a PrimFunc with ``te.create_prim_func``; its last argument is the
output."""

from __future__ import annotations

from tunebench.datasets.operators import input_shapes


def _te_matmuls(abbr: str, shape: dict, ins: list):
    from tvm import te

    if abbr == "gmv":
        a, b = ins
        k = te.reduce_axis((0, shape["k"]), name="k")
        return te.compute((shape["m"],), lambda i: te.sum(a[i, k] * b[k], axis=k), name="gemv")
    if abbr == "gmm":
        a, b = ins
        k = te.reduce_axis((0, shape["k"]), name="k")
        return te.compute((shape["m"], shape["n"]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="matmul")
    a, b, c = ins
    k = te.reduce_axis((0, shape["k"]), name="k")
    l_ = te.reduce_axis((0, shape["l"]), name="l")
    return te.compute((shape["m"], shape["n"]),
                      lambda i, j: te.sum(a[i, k] * b[j, k, l_] * c[i, l_], axis=[k, l_]), name="bilinear")


def _te_convs(abbr: str, shape: dict, ins: list):
    from tvm import topi

    data, w = ins
    st, pad = shape["stride"], shape["padding"]
    if abbr == "c1d":
        return topi.nn.conv1d_ncw(data, w, st, pad, 1, "float32")
    if abbr == "t1d":
        return topi.nn.conv1d_transpose_ncw(data, w, st, pad, "float32", 0)
    if abbr in ("c2d", "dil"):
        return topi.nn.conv2d_nchw(data, w, st, pad, shape.get("dilation", 1), "float32")
    if abbr == "t2d":
        return topi.nn.conv2d_transpose_nchw(data, w, (st, st), (pad, pad), "float32", (0, 0))
    if abbr in ("grp", "dep"):
        groups = shape["in_channels"] if abbr == "dep" else shape["groups"]
        return topi.nn.group_conv2d_nchw(data, w, st, pad, 1, groups, "float32")
    if abbr == "c3d":
        return topi.nn.conv3d_ncdhw(data, w, st, pad, 1, 1, "float32")
    if abbr == "t3d":
        return topi.nn.conv3d_transpose_ncdhw(data, w, (st,) * 3, (pad,) * 3, "float32", (0,) * 3)
    raise ValueError(f"unknown operator {abbr!r}")


def prim_func(abbr: str, shape: dict):
    """The operator as a PrimFunc (inputs, then the output), float32."""
    from tvm import te

    names = ("A", "B", "C") if abbr in ("gmv", "gmm", "bil") else ("data", "weight")
    ins = [te.placeholder(s, name=n, dtype="float32") for s, n in zip(input_shapes(abbr, shape), names)]
    out = _te_matmuls(abbr, shape, ins) if abbr in ("gmv", "gmm", "bil") else _te_convs(abbr, shape, ins)
    return te.create_prim_func([*ins, out])
