"""Fused Relax module -> tunable :class:`~tunebench.task.Task` list (conv2d, depthwise conv2d, dense).

Tasks come from ``tvm.s_tir.meta_schedule.relax_integration.extract_tasks``, which deduplicates
structurally identical fused PrimFuncs and counts their occurrences (the task weight). Each
task's main operator is its *anchor block* (``s_tir.analysis.find_anchor_sblock``); the tasks
kept are those whose anchor is

- ``conv2d_nchw`` -> kind ``conv2d``;
- ``group_conv2d_nchw`` / ``depthwise_conv2d_nchw`` with ``groups == in_channels > 1`` -> kind
  ``depthwise_conv2d`` (grouped convs with ``1 < groups < in_channels`` are skipped, logged);
- ``matmul`` / ``T_matmul_NT`` / ``dense`` of a 2-D x 2-D product -> kind ``dense``.

Everything else (pooling, reshapes, weight transposes, means) is not a tuning task.

Shapes are recovered from the anchor block: buffer shapes give N, channels, output size and
kernel size; the (linear) index expressions of the input read give stride and dilation; the pad
block that produces the conv input (if any) gives the unpadded input size and the padding.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import os
from typing import Any

import tvm
import tvm_ffi
from tvm import relax, s_tir
from tvm.s_tir.meta_schedule.relax_integration import extract_tasks as ms_extract_tasks

from tunebench.datasets.import_stages import check_bytes, stage, tensor_bytes
from tunebench.datasets.layer_spec import check_layer_list
from tunebench.datasets.models import OnnxModel, TorchModel
from tunebench.datasets.operators import flops as op_flops
from tunebench.datasets.operators import kind_of, select_cases
from tunebench.datasets.zoo import MODELS, build_model, factory_model, layers_model
from tunebench.targets.tvm.workloads.onnx_import import import_onnx
from tunebench.targets.tvm.workloads.operator_te import prim_func
from tunebench.targets.tvm.workloads.relax_import import ImportedModel, import_model, make_target
from tunebench.task import Task

log = logging.getLogger(__name__)

CONV_BLOCKS = ("conv2d_nchw", "group_conv2d_nchw", "depthwise_conv2d_nchw")
DENSE_BLOCKS = ("matmul", "T_matmul_NT", "T_dense", "dense")


# ---- small IR helpers ---------------------------------------------------------------------

def _shape(var: Any) -> tuple[int, ...]:
    """Static shape of a buffer variable (``var.ty`` is a ``tirx.BufferType``)."""
    return tuple(int(d) for d in var.ty.shape)


def _linear(expr: Any) -> tuple[dict[Any, int], int]:
    """Decompose an integer index expression into ``({var: coefficient}, constant)``.

    Handles sums, differences, variables, integer constants and products with a constant,
    which covers every index that TOPI's conv/pad compute definitions produce.

    Raises:
        ValueError: a non-linear term.
    """
    from tvm.ir.prim import expr as E  # TVM 0.27 keeps Add/Mul/... here

    if isinstance(expr, (int, E.IntImm)):
        return {}, int(expr.value if isinstance(expr, E.IntImm) else expr)
    if isinstance(expr, (E.Add, E.Sub)):
        (ca, ka), (cb, kb) = _linear(expr.a), _linear(expr.b)
        sign = 1 if isinstance(expr, E.Add) else -1
        coeffs = dict(ca)
        for v, c in cb.items():
            coeffs[v] = coeffs.get(v, 0) + sign * c
        return coeffs, ka + sign * kb
    if isinstance(expr, E.Mul):
        (ca, ka), (cb, kb) = _linear(expr.a), _linear(expr.b)
        if ca and cb:
            raise ValueError(f"non-linear index {expr}")
        coeffs, scale = (ca, kb) if ca else (cb, ka)
        return {v: c * scale for v, c in coeffs.items()}, ka * kb
    if isinstance(expr, tvm.tirx.Var):
        return {expr: 1}, 0
    raise ValueError(f"unsupported index expression {expr} ({type(expr).__name__})")


def _coeff(coeffs: dict[Any, int], var: Any) -> int:
    for v, c in coeffs.items():
        if v.same_as(var):
            return c
    return 0


def _single_var(expr: Any) -> Any:
    """The one variable of an index expression like ``v_yy`` (error if there is not exactly one)."""
    coeffs, _ = _linear(expr)
    if len(coeffs) != 1:
        raise ValueError(f"expected a single-variable index, got {expr}")
    return next(iter(coeffs))


def _producer(mod: tvm.IRModule, buffer_var: Any) -> Any | None:
    """The block of ``mod["main"]`` that writes ``buffer_var`` (``None`` if it is a parameter)."""
    sch = s_tir.Schedule(mod)
    for rv in sch.get_child_blocks(sch.get_sblock("root")):
        block = sch.get(rv)
        if any(w.source.same_as(buffer_var) for w in block.writes):
            return block
    return None


# ---- shape recovery ---------------------------------------------------------------------------

def conv_shape(mod: tvm.IRModule, block: Any) -> dict:
    """Shape parameters of a conv2d/group conv anchor block (NCHW data, OIHW weight).

    Returns a dict with ``batch, in_channels, height, width`` (of the unpadded input),
    ``out_channels, kernel, stride, padding, groups``; plus ``kernel_h/kernel_w``,
    ``stride_h/stride_w``, ``pad_top/pad_left/pad_bottom/pad_right`` or ``dilation`` only where
    the geometry is not square/symmetric/undilated. Sizes in elements.

    Raises:
        ValueError: the block does not look like an NCHW conv (unexpected ranks or indices).
    """
    data, weight = block.reads[0], block.reads[1]
    out = block.writes[0]
    n, co, oh, ow = _shape(out.source)
    wo, ci_g, kh, kw = _shape(weight.source)
    if wo != co:
        raise ValueError(f"block {block.name_hint}: weight has {wo} output channels, output has {co}")
    oy, ox = _single_var(out.region[2].min), _single_var(out.region[3].min)
    ry, rx = _single_var(weight.region[2].min), _single_var(weight.region[3].min)
    cy, _ = _linear(data.region[2].min)
    cx, _ = _linear(data.region[3].min)
    sh, sw, dh, dw = _coeff(cy, oy), _coeff(cx, ox), _coeff(cy, ry), _coeff(cx, rx)

    hp, wp = _shape(data.source)[2:]
    pad_top = pad_left = 0
    in_var = data.source
    pad_block = _producer(mod, data.source)
    if pad_block is not None:  # conv input is a padded copy of a function parameter
        src = pad_block.reads[0]
        in_var = src.source
        pad_top = -_linear(src.region[2].min)[1]
        pad_left = -_linear(src.region[3].min)[1]
    bn, ci, h, w = _shape(in_var)
    pad_bottom, pad_right = hp - h - pad_top, wp - w - pad_left
    if bn != n or ci % ci_g:
        raise ValueError(f"block {block.name_hint}: input {(bn, ci, h, w)} does not match output "
                         f"batch {n} / weight in-channels {ci_g}")
    shape = {"batch": n, "in_channels": ci, "height": h, "width": w, "out_channels": co,
             "kernel": kh, "stride": sh, "padding": pad_top, "groups": ci // ci_g}
    if kh != kw:
        shape.update(kernel_h=kh, kernel_w=kw)
    if sh != sw:
        shape.update(stride_h=sh, stride_w=sw)
    if len({pad_top, pad_left, pad_bottom, pad_right}) > 1:
        shape.update(pad_top=pad_top, pad_left=pad_left, pad_bottom=pad_bottom, pad_right=pad_right)
    if dh != 1 or dw != 1:
        shape["dilation"] = dh if dh == dw else (dh, dw)
    for axis, (size, pads, k, s, d, o) in {"height": (h, pad_top + pad_bottom, kh, sh, dh, oh),
                                          "width": (w, pad_left + pad_right, kw, sw, dw, ow)}.items():
        if (size + pads - d * (k - 1) - 1) // s + 1 != o:
            raise ValueError(f"block {block.name_hint}: inconsistent {axis} geometry {shape}")
    return shape


def conv_flops(shape: dict, out_hw: tuple[int, int]) -> int:
    """2 x MACs of a conv: ``2 * N * CO * OH * OW * (CI / groups) * KH * KW``."""
    kh, kw = shape.get("kernel_h", shape["kernel"]), shape.get("kernel_w", shape["kernel"])
    return (2 * shape["batch"] * shape["out_channels"] * out_hw[0] * out_hw[1]
            * (shape["in_channels"] // shape["groups"]) * kh * kw)


def dense_shape(block: Any) -> dict | None:
    """``{batch, in_features, out_features}`` of a 2-D x 2-D matmul anchor block, else ``None``."""
    if len(block.reads) != 2 or len(block.writes) != 1:
        return None
    a, b = (_shape(r.source) for r in block.reads)
    out = _shape(block.writes[0].source)
    reduce_axes = [iv for iv in block.iter_vars if int(iv.iter_type) == 2]
    if len(a) != 2 or len(b) != 2 or len(out) != 2 or len(reduce_axes) != 1:
        return None
    return {"batch": out[0], "in_features": int(reduce_axes[0].dom.extent), "out_features": out[1]}


def classify(mod: tvm.IRModule) -> tuple[str, dict, int] | None:
    """``(kind, shape, flops)`` of a task's PrimFunc, or ``None`` when it is not tunable here."""
    block = s_tir.analysis.find_anchor_sblock(mod)
    if block is None:
        return None
    name = block.name_hint
    if name in CONV_BLOCKS:
        shape = conv_shape(mod, block)
        out_hw = _shape(block.writes[0].source)[2:]
        flops = conv_flops(shape, out_hw)
        groups = shape["groups"]
        if groups == 1:
            return "conv2d", shape, flops
        if groups == shape["in_channels"]:
            return "depthwise_conv2d", shape, flops
        return None  # a grouped conv that is not depthwise: no template (reported by extract_tasks)
    if name in DENSE_BLOCKS:
        shape = dense_shape(block)
        if shape is None:
            return None
        return "dense", shape, 2 * shape["batch"] * shape["in_features"] * shape["out_features"]
    return None


LAYER_WORDS = ("conv", "matmul", "dense")  # anchor blocks of layers (others: elementwise, pooling, ...)


# ---- ids and order ------------------------------------------------------------------------------

def _func_hash(func: tvm.tirx.PrimFunc) -> int:
    """Structural hash of a PrimFunc, independent of its global symbol (i.e. of its name)."""
    return int(tvm_ffi.structural_hash(func.without_attr("global_symbol")))


def task_id(func: tvm.tirx.PrimFunc, target_kind: str) -> str:
    """Stable 12-hex-digit id: sha1 of the workload's structural hash and the target kind."""
    return hashlib.sha1(f"{_func_hash(func)}:{target_kind}".encode()).hexdigest()[:12]


def _call_order(mod: tvm.IRModule) -> list[str]:
    """Names of the PrimFuncs ``main`` calls through ``call_tir``, in call order (repeats kept)."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    names = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and value.op.same_as(call_tir):
                names.append(value.args[0].name_hint)
    return names


# ---- extraction ---------------------------------------------------------------------------------

def extract_tasks(imported: ImportedModel, target_kind: str | None = None) -> list[Task]:
    """The conv2d / depthwise conv2d / dense tasks of an imported model, in model order.

    Args:
        imported: the fused model from :func:`~tunebench.targets.tvm.workloads.relax_import.import_model`.
        target_kind: ``"llvm"`` or ``"cuda"`` (default: the kind the model was imported for).

    Returns:
        One :class:`Task` per structurally distinct fused workload (``space`` left ``None``),
        ordered by the first call of that workload in the model's ``main``.
    """
    target_kind = target_kind or imported.target_kind
    if target_kind != imported.target_kind:
        log.warning("extracting %s tasks from a model fused for %s", target_kind, imported.target_kind)
    target = make_target(target_kind)
    order = _call_order(imported.mod)
    first_call: dict[int, tuple[int, str]] = {}
    for pos, name in enumerate(order):
        first_call.setdefault(_func_hash(imported.mod[name]), (pos, name))

    found, untemplated = [], []
    for ext in ms_extract_tasks(imported.mod, target):
        func = ext.dispatched[0]["main"]
        info = classify(tvm.IRModule({"main": func}))
        if info is None:
            anchor = s_tir.analysis.find_anchor_sblock(tvm.IRModule({"main": func}))
            if anchor is not None and any(w in anchor.name_hint for w in LAYER_WORDS):
                untemplated.append(f"{ext.task_name} ({anchor.name_hint}) x{int(ext.weight)}")
            continue
        kind, shape, flops = info
        pos, name = first_call.get(_func_hash(func), (len(order), ext.task_name))
        found.append((pos, Task(id=task_id(func, target_kind), name=name, kind=kind,
                                mod=tvm.IRModule({"main": func}), shape=shape, flops=int(flops),
                                weight=int(ext.weight), target_kind=target_kind)))
    found.sort(key=lambda item: item[0])
    tasks = [t for _, t in found]
    log.info("extracted %d tasks for %s: %s", len(tasks), target_kind,
             ", ".join(f"{t.name}x{t.weight}" for t in tasks))
    if untemplated:
        log.warning("%d layer(s) of a kind no template covers run TVM's default schedule, untuned: %s",
                    len(untemplated), ", ".join(untemplated))
    return tasks


# ---- model configs --------------------------------------------------------------------------------

def operator_task(abbr: str, shape: dict, name: str, target_kind: str = "llvm", case: int | None = None) -> Task:
    """One operator of :mod:`tunebench.datasets.operators` at ``shape`` as a task named ``name``: its
    tensor expression's PrimFunc, its ``shape`` the case's with ``op`` (and ``case``, when given)."""
    func = prim_func(abbr, shape)
    numbered = {"op": abbr, "case": case} if case is not None else {"op": abbr}
    return Task(id=task_id(func, target_kind), name=name, kind=kind_of(abbr, shape), mod=tvm.IRModule({"main": func}),
                shape={**numbered, **shape}, flops=op_flops(abbr, shape), target_kind=target_kind)


def operator_tasks(model, target_kind: str = "llvm") -> list[Task]:
    """The tasks of ``model=ops``: one per chosen operator case (:mod:`tunebench.datasets.operators`).

    A task's ``shape`` is the case's shape dict with ``op`` (the operator's abbreviation) and ``case``
    (its 1-based number); its name is ``<op>_<case>``, e.g. ``c2d_1``.

    Raises:
        UserError: an unknown operator or case number (:func:`~tunebench.datasets.operators.select_cases`).
    """
    from tunebench.datasets.models import model_settings

    model = model_settings(model, default="ops")
    make_target(target_kind)
    tasks = [operator_task(abbr, shape, f"{abbr}_{number}", target_kind, case=number)
             for abbr, number, shape in select_cases(model.operators, model.cases)]
    log.info("%d operator tasks for %s: %s", len(tasks), target_kind, ", ".join(t.name for t in tasks))
    return tasks


_CACHE: dict[tuple, tuple[list[Task], ImportedModel]] = {}


def _cache_key(model, layers: list[dict] | None, target_kind: str) -> tuple:
    shapes = tuple(tuple(sorted(s.items())) for s in layers) if layers is not None else None
    user = (model.factory, tuple(model.input_shape)) if isinstance(model, TorchModel) else None
    if isinstance(model, OnnxModel):
        user = (os.path.abspath(model.path), os.path.getmtime(model.path), repr(model.input_shapes))
    return model.name, shapes, user, model.seed, target_kind


def model_label(model) -> str | None:
    """How an error names a user's model (``model=torch``, ``model=onnx``): the file or factory given;
    None for the project's own models, whose import failing is a bug of the project (a traceback)."""
    if isinstance(model, OnnxModel):
        return f"model.path={model.path}"
    return f"model.factory={model.factory}" if isinstance(model, TorchModel) else None


def _imported(model, layers, target_kind: str) -> ImportedModel:
    """``model`` imported into Relax: an ONNX file, or a PyTorch module and its example input(s)."""
    if isinstance(model, OnnxModel):
        return import_onnx(model.path, model.input_shapes, model.seed, target_kind)
    if layers is not None:
        module, example = layers_model(layers, model.seed)
    elif isinstance(model, TorchModel):
        check_bytes(model_label(model), f"its input of model.input_shape={list(model.input_shape)}",
                    tensor_bytes([(model.input_shape, 4)]))  # before it is allocated
        module, example = factory_model(model.factory, model.input_shape, model.seed)
    else:
        module, example = build_model(model.name, model.seed)
    return import_model(module, example, target_kind, label=model_label(model))


def model_tasks(model, target_kind: str = "llvm") -> tuple[list[Task], ImportedModel]:
    """Build, import and extract the tasks of a model given by its settings.

    Args:
        model: a :mod:`tunebench.datasets.models` settings object: a zoo model (``ZooModel``), layers
            given as specs (``LayersModel``, see :func:`~tunebench.datasets.zoo.layers_model`) or single
            operators (``OpsModel``, :func:`operator_tasks`); or a mapping with ``name`` and its knobs.
        target_kind: ``"llvm"`` or ``"cuda"``.

    Returns:
        ``(tasks, imported)``; ``imported`` is None for single operators (no model).
        Results are cached in-process by (name, layer shapes, seed, target kind); a repeated call returns
        fresh copies of the cached tasks at once.

    Raises:
        ValueError: an unknown model, or unknown target kind.
        UserError: a stage of the import failed (:mod:`~tunebench.datasets.import_stages`): one line naming
            the model, the stage and the first cause.
    """
    from tunebench.datasets.models import LayersModel, OpsModel, model_settings

    model = model_settings(model)
    if isinstance(model, OpsModel):
        return operator_tasks(model, target_kind), None
    layers = check_layer_list(model.layers) if isinstance(model, LayersModel) else None
    if layers is None and model.name not in MODELS and not isinstance(model, (TorchModel, OnnxModel)):
        raise ValueError(f"unknown model {model.name!r}; valid models: {', '.join(sorted(MODELS))}")
    make_target(target_kind)  # validate before the (slow) import
    key = _cache_key(model, layers, target_kind)
    if key not in _CACHE:
        imported = _imported(model, layers, target_kind)
        with stage(model_label(model), "task extraction"):
            _CACHE[key] = (extract_tasks(imported, target_kind), imported)
    tasks, imported = _CACHE[key]
    return [dataclasses.replace(t, shape=copy.deepcopy(t.shape)) for t in tasks], imported


def clear_cache() -> None:
    """Forget every model imported by :func:`model_tasks`."""
    _CACHE.clear()
