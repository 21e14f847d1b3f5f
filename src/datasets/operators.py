"""Single-operator tasks (``model=ops``): the twelve tensor operators of [Zheng-ASPLOS20] (FlexTensor)
Table 1: their cases, shapes, FLOPs and task kinds, at batch 1 and float32.

A target writes each operator in its own terms: a TVM target with TVM's tensor expressions
(:mod:`tunebench.targets.tvm.workloads.operator_te`, TOPI where it has the operator), checked against and
timed against the same operator written with PyTorch
(:mod:`tunebench.targets.tvm.workloads.operator_torch`).

Operators (abbreviations of [Zheng-ASPLOS20] Table 3; shape keys):

=====  ==========================  ========================================================================
gmv    GEMV ``O[i] = A[i,k] B[k]``                     ``m, k``
gmm    GEMM ``O[i,j] = A[i,k] B[k,j]``                 ``m, n, k``
bil    bilinear ``O[i,j] = A[i,k] B[j,k,l] C[i,l]``    ``m, n, k, l``
c1d    1D convolution (NCW)                            ``in_channels, length, out_channels, kernel, stride, padding``
t1d    transposed 1D convolution                       as c1d (``length`` of the input)
c2d    2D convolution (NCHW)                           ``in_channels, height, width, out_channels, kernel, stride, padding``
t2d    transposed 2D convolution                       as c2d
c3d    3D convolution (NCDHW)                          c2d keys + ``depth``
t3d    transposed 3D convolution                       as c3d
grp    grouped 2D convolution                          c2d keys + ``groups``
dep    depthwise 2D convolution                        ``in_channels, height, width, multiplier, kernel, stride, padding``
dil    dilated 2D convolution                          c2d keys + ``dilation``
=====  ==========================  ========================================================================

Task kinds: a c2d or dil task is a ``conv2d``, a dep task (multiplier 1) a ``depthwise_conv2d`` and a
gmm task a ``dense``, so the project's templates of those kinds apply to them (their main blocks are
TOPI's ``conv2d_nchw`` / ``group_conv2d_nchw`` and a ``matmul`` block as Relax makes them); every
other operator is a kind of its own (its abbreviation), searched in the template-free space
(``target.template=flex``).

FLOPs: 2 x the multiply-accumulates the operator needs (bilinear: 3 operations per ``(i, j, k, l)``);
a transposed convolution counts the products of real input pixels (not the zeros its dilated input
holds), as its library implementation would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunebench.errors import UserError

OPS_MODEL = "ops"


@dataclass(frozen=True)
class Operator:
    """One operator of the suite.

    Attributes:
        abbr: its abbreviation ([Zheng-ASPLOS20] Table 3), e.g. ``"c2d"``.
        title: readable name.
        keys: the shape keys a case must give.
        cases: the test cases (shape dicts), numbered from 1 in this order.
        source: where the cases come from.
    """

    abbr: str
    title: str
    keys: tuple[str, ...]
    cases: tuple[dict, ...]
    source: str


def _conv(cin, hw, cout, k, s, p, **extra) -> dict:
    return {"in_channels": cin, "height": hw, "width": hw, "out_channels": cout, "kernel": k, "stride": s,
            "padding": p, **extra}


#: [Zheng-ASPLOS20] Table 4: the 15 distinct convolution layers of YOLO-v1 (padding: kernel // 2)
YOLO_C2D = tuple(_conv(c, hw, k_out, k, s, k // 2) for c, k_out, hw, k, s in (
    (3, 64, 448, 7, 2), (64, 192, 112, 3, 1), (192, 128, 56, 1, 1), (128, 256, 56, 3, 1),
    (256, 256, 56, 1, 1), (256, 512, 56, 3, 1), (512, 256, 28, 1, 1), (256, 512, 28, 3, 1),
    (512, 512, 28, 1, 1), (512, 1024, 28, 3, 1), (1024, 512, 14, 1, 1), (512, 1024, 14, 3, 1),
    (1024, 1024, 14, 3, 1), (1024, 1024, 14, 3, 2), (1024, 1024, 7, 3, 1)))

_CONV2D_KEYS = ("in_channels", "height", "width", "out_channels", "kernel", "stride", "padding")
_CONV1D_KEYS = ("in_channels", "length", "out_channels", "kernel", "stride", "padding")
_CONV3D_KEYS = ("in_channels", "depth", "height", "width", "out_channels", "kernel", "stride", "padding")
_REPO = "FlexTensor's published test configurations (github.com/pku-liang/FlexTensor)"
_OURS = ("this project, spanning the FLOPs range of [Zheng-ASPLOS20] Table 3 (the paper gives only the "
         "case count and the range)")


def _c1d(cin, n, cout, k, s, p) -> dict:
    return {"in_channels": cin, "length": n, "out_channels": cout, "kernel": k, "stride": s, "padding": p}


def _c3d(cin, d, hw, cout, k, s, p) -> dict:
    return {"in_channels": cin, "depth": d, "height": hw, "width": hw, "out_channels": cout, "kernel": k,
            "stride": s, "padding": p}


def _transposed(cases: tuple[dict, ...], dims: tuple[str, ...]) -> tuple[dict, ...]:
    """The transposed convolutions that undo ``cases``: channels swapped, the input the size of the
    forward convolution's output, the same kernel, stride and padding (how FlexTensor's suite derives
    its transposed cases from the forward ones)."""
    out = []
    for c in cases:
        size = {d: (c[d] + 2 * c["padding"] - c["kernel"]) // c["stride"] + 1 for d in dims}
        out.append({**c, **size, "in_channels": c["out_channels"], "out_channels": c["in_channels"]})
    return tuple(out)


#: 1D convolutions: the YOLO-v1 layers 3-10, 13 with H x W flattened (kernel k x k -> k^2)
C1D = tuple(_c1d(*c) for c in (
    (192, 3136, 128, 1, 1, 0), (128, 3136, 256, 9, 1, 1), (512, 784, 256, 1, 1, 0), (256, 784, 512, 9, 1, 1),
    (1024, 196, 512, 1, 1, 0), (512, 196, 1024, 9, 1, 1), (1024, 49, 1024, 9, 1, 1)))

#: 3D convolutions: C3D-network-like layers (Tran et al. 2015) at reduced depth, 0.1-11 GFLOPs
C3D = tuple(_c3d(*c) for c in (
    (3, 16, 112, 64, 3, 1, 1), (64, 8, 56, 128, 3, 1, 1), (128, 4, 28, 256, 3, 1, 1), (256, 4, 28, 256, 3, 1, 1),
    (256, 2, 14, 512, 3, 1, 1), (512, 2, 14, 512, 3, 1, 1), (512, 1, 7, 512, 3, 1, 1), (64, 8, 56, 64, 1, 1, 0)))

OPERATORS: dict[str, Operator] = {op.abbr: op for op in (
    Operator("gmv", "GEMV", ("m", "k"), tuple({"m": m, "k": k} for m, k in (
        (128, 64), (128, 128), (256, 256), (512, 256), (512, 512), (1024, 512))), _OURS),
    Operator("gmm", "GEMM", ("m", "n", "k"), tuple({"m": n, "n": n, "k": n} for n in (
        32, 64, 128, 256, 512, 1024, 2048)), _REPO + " (square sizes)"),
    Operator("bil", "bilinear", ("m", "n", "k", "l"), tuple({"m": m, "n": n, "k": k, "l": l} for m, n, k, l in (
        (128, 128, 128, 128), (64, 256, 128, 128), (256, 64, 128, 128), (128, 128, 64, 256),
        (128, 128, 256, 64))), _OURS),
    Operator("c1d", "1D convolution", _CONV1D_KEYS, C1D, _REPO),
    Operator("t1d", "transposed 1D convolution", _CONV1D_KEYS, _transposed(C1D, ("length",)),
             _REPO + " (the 1D convolutions transposed)"),
    Operator("c2d", "2D convolution", _CONV2D_KEYS, YOLO_C2D, "[Zheng-ASPLOS20] Table 4"),
    Operator("t2d", "transposed 2D convolution", _CONV2D_KEYS, _transposed(YOLO_C2D, ("height", "width")),
             _REPO + " (the YOLO-v1 layers transposed)"),
    Operator("c3d", "3D convolution", _CONV3D_KEYS, C3D, _OURS),
    Operator("t3d", "transposed 3D convolution", _CONV3D_KEYS, _transposed(C3D, ("depth", "height", "width")),
             _OURS + "; the 3D convolutions transposed"),
    Operator("grp", "grouped 2D convolution", _CONV2D_KEYS + ("groups",),
             tuple({**c, "groups": 4} for c in YOLO_C2D[1:]), _REPO + " (YOLO-v1 layers 2-15, 4 groups)"),
    Operator("dep", "depthwise 2D convolution",
             ("in_channels", "height", "width", "multiplier", "kernel", "stride", "padding"), tuple(
        {"in_channels": c, "height": hw, "width": hw, "multiplier": m, "kernel": 3, "stride": s, "padding": 1}
        for c, hw, m, s in ((32, 112, 1, 1), (16, 112, 6, 2), (24, 56, 6, 2), (32, 28, 6, 2), (64, 14, 6, 1),
                            (96, 14, 6, 2), (160, 7, 6, 1))), _REPO + " (MobileNet-v2's depthwise layers)"),
    Operator("dil", "dilated 2D convolution", _CONV2D_KEYS + ("dilation",), tuple(
        {**_conv(c, hw, k_out, k, s, k // 2), "dilation": 2} for c, hw, k_out, k, s in (
            (256, 56, 256, 1, 1), (256, 56, 512, 3, 1), (512, 28, 256, 1, 1), (256, 28, 512, 3, 1),
            (512, 28, 512, 1, 1), (512, 28, 1024, 3, 1), (1024, 14, 512, 1, 1), (512, 14, 1024, 3, 1),
            (1024, 14, 1024, 3, 1), (1024, 14, 1024, 3, 2), (1024, 7, 1024, 3, 1))),
        _REPO + " (YOLO-v1 layers 5-15, dilation 2)"),
)}


# ---- choosing cases -------------------------------------------------------------------------------

def select_cases(operators, cases) -> list[tuple[str, int, dict]]:
    """``(abbr, case number, shape)`` of every chosen case, in the order of ``operators``.

    Args:
        operators: list of abbreviations (``model.operators``).
        cases: None or empty (every case) or a list of 1-based case numbers taken from each operator.

    Raises:
        UserError: an unknown operator, an empty list, or a case number an operator does not have.
    """
    if isinstance(operators, str) or not operators:
        raise UserError(f"model.operators={operators!r}: must be a non-empty list of {', '.join(OPERATORS)}")
    chosen = []
    for abbr in operators:
        if abbr not in OPERATORS:
            raise UserError(f"model.operators: unknown operator {abbr!r}; valid: {', '.join(OPERATORS)}")
        op = OPERATORS[abbr]
        numbers = list(cases or range(1, len(op.cases) + 1))
        for n in numbers:
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(op.cases):
                raise UserError(f"model.cases: case {n!r} of {abbr}: {abbr} has cases 1..{len(op.cases)}")
            chosen.append((abbr, n, dict(op.cases[n - 1])))
    return chosen


def task_operator(task_shape: dict) -> tuple[str, dict] | None:
    """``(abbreviation, case shape)`` of an operator task's ``shape`` (see
    :func:`tunebench.targets.tvm.workloads.tasks.operator_tasks`: the case's shape plus ``op`` and ``case``), or None
    for a task of a model."""
    if "op" not in task_shape:
        return None
    return task_shape["op"], {k: v for k, v in task_shape.items() if k not in ("op", "case")}


# ---- shapes -------------------------------------------------------------------------------------

def _out_size(n: int, k: int, s: int, p: int, d: int = 1) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _t_out_size(n: int, k: int, s: int, p: int) -> int:
    return (n - 1) * s - 2 * p + k


def input_shapes(abbr: str, shape: dict) -> list[tuple[int, ...]]:
    """The operator's input tensor shapes (batch 1), in argument order."""
    s = shape
    if abbr == "gmv":
        return [(s["m"], s["k"]), (s["k"],)]
    if abbr == "gmm":
        return [(s["m"], s["k"]), (s["k"], s["n"])]
    if abbr == "bil":
        return [(s["m"], s["k"]), (s["n"], s["k"], s["l"]), (s["m"], s["l"])]
    ci, co, k = s.get("in_channels"), s.get("out_channels"), s["kernel"]
    if abbr == "c1d":
        return [(1, ci, s["length"]), (co, ci, k)]
    if abbr == "t1d":
        return [(1, ci, s["length"]), (ci, co, k)]
    if abbr in ("c2d", "dil"):
        return [(1, ci, s["height"], s["width"]), (co, ci, k, k)]
    if abbr == "t2d":
        return [(1, ci, s["height"], s["width"]), (ci, co, k, k)]
    if abbr == "grp":
        return [(1, ci, s["height"], s["width"]), (co, ci // s["groups"], k, k)]
    if abbr == "dep":
        return [(1, ci, s["height"], s["width"]), (ci * s["multiplier"], 1, k, k)]
    if abbr == "c3d":
        return [(1, ci, s["depth"], s["height"], s["width"]), (co, ci, k, k, k)]
    if abbr == "t3d":
        return [(1, ci, s["depth"], s["height"], s["width"]), (ci, co, k, k, k)]
    raise ValueError(f"unknown operator {abbr!r}")


def output_shape(abbr: str, shape: dict) -> tuple[int, ...]:
    """The output tensor's shape."""
    s = shape
    if abbr == "gmv":
        return (s["m"],)
    if abbr in ("gmm", "bil"):
        return (s["m"], s["n"])
    k, st, p = s["kernel"], s["stride"], s["padding"]
    co = s["in_channels"] * s["multiplier"] if abbr == "dep" else s["out_channels"]
    size = (lambda n: _t_out_size(n, k, st, p)) if abbr.startswith("t") else (
        lambda n: _out_size(n, k, st, p, s.get("dilation", 1)))
    dims = {"c1d": ("length",), "t1d": ("length",), "c3d": ("depth", "height", "width"),
            "t3d": ("depth", "height", "width")}.get(abbr, ("height", "width"))
    return (1, co, *(size(s[d]) for d in dims))


def flops(abbr: str, shape: dict) -> int:
    """2 x multiply-accumulates (bilinear: 3 operations per ``(i, j, k, l)``)."""
    s = shape
    if abbr == "gmv":
        return 2 * s["m"] * s["k"]
    if abbr == "gmm":
        return 2 * s["m"] * s["n"] * s["k"]
    if abbr == "bil":
        return 3 * s["m"] * s["n"] * s["k"] * s["l"]
    data, weight = input_shapes(abbr, shape)
    if abbr.startswith("t"):  # every real input pixel meets every kernel tap of every output channel
        return 2 * math.prod(data) * math.prod(weight[1:])
    return 2 * math.prod(output_shape(abbr, shape)) * math.prod(weight[1:])


def kind_of(abbr: str, shape: dict) -> str:
    """The task kind: ``conv2d``, ``depthwise_conv2d`` or ``dense`` where a template of that kind
    applies, else the operator's abbreviation."""
    if abbr in ("c2d", "dil"):
        return "conv2d"
    if abbr == "dep" and shape["multiplier"] == 1:
        return "depthwise_conv2d"
    if abbr == "gmm":
        return "dense"
    return abbr
