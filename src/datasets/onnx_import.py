"""``model=onnx``: an ONNX file imported into Relax through TVM's ONNX frontend, fused like a PyTorch
model (:func:`~tunebench.datasets.relax_import.fusion_passes`); its reference output is ONNX
Runtime's (CPU execution provider) on the same random input.

An ONNX file is data: it is parsed (protobuf), checked and converted; nothing in it is executed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from tunebench.errors import UserError

log = logging.getLogger(__name__)

FLOAT_TYPES = {1: np.float32, 10: np.float16, 11: np.float64}  # onnx.TensorProto element types we feed


def load_onnx(path: str, key: str = "model.path"):
    """The checked ``ModelProto`` of ``path``.

    Raises:
        UserError: a missing, unreadable, corrupt or truncated file, or a model the ONNX checker refuses.
    """
    import onnx
    from google.protobuf.message import DecodeError

    if not os.path.isfile(path):
        raise UserError(f"{key}={path}: no such file")
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except (DecodeError, onnx.checker.ValidationError, OSError, ValueError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(f"{key}={path}: not a valid ONNX model (corrupt or truncated?): {first}") from None
    if not model.graph.node:
        raise UserError(f"{key}={path}: the ONNX graph has no operators")
    return model


def unsupported_operators(model) -> list[str]:
    """The operator types of ``model`` that TVM's ONNX importer has no converter for."""
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

    known = _get_convert_map()
    return sorted({n.op_type for n in model.graph.node if n.op_type not in known})


def input_specs(model, shapes: Sequence[list[int]], key: str = "model.input_shapes") -> dict[str, tuple]:
    """name -> (shape, numpy dtype) of every graph input that is not a weight; ``shapes`` (one per
    input, in order; or none) gives the shapes of inputs with symbolic dimensions.

    Raises:
        UserError: an input with a symbolic dimension and no shape given, a non-float input, or more
            or fewer shapes than inputs.
    """
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    names = [i.name for i in inputs]
    if shapes and len(shapes) != len(inputs):
        raise UserError(f"{key}: {len(shapes)} shape(s) for {len(inputs)} input(s) ({', '.join(names)}): give one "
                        "per input, in this order")
    specs = {}
    for i, inp in enumerate(inputs):
        tensor = inp.type.tensor_type
        if tensor.elem_type not in FLOAT_TYPES:
            raise UserError(f"model input {inp.name!r} has ONNX element type {tensor.elem_type}: only float inputs "
                            "(float32, float16, float64) can be fed random data")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        shape = list(shapes[i]) if shapes else dims
        if any(d is None or d <= 0 for d in shape):
            raise UserError(f"model input {inp.name!r} has shape {dims} (symbolic dimensions): give every "
                            "input's shape, e.g. model.input_shapes=[[1,3,224,224]]")
        specs[inp.name] = (tuple(int(d) for d in shape), FLOAT_TYPES[tensor.elem_type])
    return specs


def check_onnx(path: str, shapes: Sequence[list[int]]) -> None:
    """Every static check of an ONNX model: the file, its operators, its inputs (one-line errors)."""
    model = load_onnx(path)
    if missing := unsupported_operators(model):
        raise UserError(f"model.path={path}: TVM's ONNX importer does not support the operator(s) "
                        f"{', '.join(missing)}")
    input_specs(model, shapes)


def example_inputs(specs: Mapping[str, tuple], seed: int) -> list[torch.Tensor]:
    """Random inputs of the given shapes and dtypes (seeded)."""
    rng = np.random.default_rng(seed)
    return [torch.from_numpy(rng.standard_normal(shape).astype(dtype)) for shape, dtype in specs.values()]


def import_onnx(path: str, shapes: Sequence[list[int]], seed: int, target_kind: str):
    """The :class:`~tunebench.datasets.relax_import.ImportedModel` of an ONNX file."""
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    from tunebench.datasets.relax_import import ImportedModel, fusion_passes, make_target

    model = load_onnx(path)
    specs = input_specs(model, shapes)
    target = make_target(target_kind)
    t0 = time.perf_counter()
    mod = from_onnx(model, shape_dict={k: list(s) for k, (s, _) in specs.items()},
                    dtype_dict={k: np.dtype(d).name for k, (_, d) in specs.items()}, keep_params_in_input=True,
                    sanitize_input_names=False)
    mod, params = relax.frontend.detach_params(mod)
    with target:
        mod = fusion_passes()(mod)
    arrays = [p.numpy() for p in params.get("main", [])]
    dt = time.perf_counter() - t0
    log.info("imported %s for %s in %.1f s (%d params)", os.path.basename(path), target_kind, dt, len(arrays))
    return ImportedModel(mod=mod, params=arrays, torch_module=None, example_input=tuple(example_inputs(specs, seed)),
                         target_kind=target_kind, import_s=dt, onnx_path=os.path.abspath(path),
                         input_names=tuple(specs))
