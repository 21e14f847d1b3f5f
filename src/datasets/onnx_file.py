"""``model=onnx``: an ONNX file read and checked (protobuf, the ONNX checker, its inputs), its tensors'
sizes bounded, its constant shape computations folded by ONNX Runtime's basic graph optimizations, and a
trial run on the example input; its reference output is ONNX Runtime's (CPU execution provider) on the
same random input, from the file as given. A target imports the prepared model in its own terms (TVM:
:mod:`tunebench.targets.tvm.workloads.onnx_import`).

An ONNX file is data: it is parsed (protobuf), checked and converted; no code in it is executed (its
graph runs on ONNX Runtime's own operators: the trial run of the import, the reference).
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from tunebench.datasets.import_stages import check_bytes, stage, tensor_bytes
from tunebench.errors import UserError

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


def example_inputs(specs: Mapping[str, tuple], seed: int) -> list[torch.Tensor]:
    """Random inputs of the given shapes and dtypes (seeded)."""
    rng = np.random.default_rng(seed)
    return [torch.from_numpy(rng.standard_normal(shape).astype(dtype)) for shape, dtype in specs.values()]


def _elem_size(elem_type: int) -> int:
    from onnx.helper import tensor_dtype_to_np_dtype

    return np.dtype(tensor_dtype_to_np_dtype(elem_type)).itemsize if elem_type else 4


def model_bytes(model) -> int:
    """Bytes of every tensor of ``model`` whose shape is known: weights, inputs, outputs and the activations
    shape inference found (``graph.value_info``)."""
    known = []
    for info in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        tensor = info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if tensor.HasField("shape") and None not in dims:
            known.append((dims, _elem_size(tensor.elem_type)))
    known += [(list(t.dims), _elem_size(t.data_type)) for t in model.graph.initializer]
    return tensor_bytes(known)


def infer_static_shapes(model, specs: Mapping[str, tuple]):
    """A copy of ``model`` whose inputs have the static shapes of ``specs``, with every tensor shape ONNX
    shape inference finds (strict: an inconsistency is an error)."""
    from onnx import shape_inference

    model = copy.deepcopy(model)
    for inp in model.graph.input:
        if inp.name in specs:
            dims = inp.type.tensor_type.shape.dim
            del dims[:]
            for d in specs[inp.name][0]:
                dims.add().dim_value = int(d)
    return shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def ort_optimized(model):
    """``model`` after ONNX Runtime's basic graph optimizations (constant folding, among them of the
    ``Shape -> Gather -> Div -> Reshape`` chains of PyTorch's TorchScript exporter, which TVM's importer
    cannot convert) and the session that made it (CPU execution provider). The rewrites of that level
    are semantics-preserving and stay within the ONNX operator set."""
    import onnx
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.log_severity_level = 4  # its log (unused initializers, a failed node) would stand beside the one-line
    # error: what fails raises
    opts.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory(prefix="tunebench-onnx-") as folder:
        opts.optimized_model_filepath = os.path.join(folder, "folded.onnx")
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        folded = onnx.load(opts.optimized_model_filepath)
    if other := sorted({n.domain for n in folded.graph.node} - {"", "ai.onnx"}):
        raise RuntimeError(f"ONNX Runtime's basic optimizations introduced operators of domain(s) {other}")
    return folded, session


def prepared_onnx(path: str, shapes: Sequence[list[int]], seed: int, check: Callable | None = None):
    """The stages of an ONNX model before a target imports it (:mod:`~tunebench.datasets.import_stages`): the
    checker, ``check`` (the target's check of the loaded ``ModelProto``, e.g. that it converts every operator),
    its inputs, shape inference, the size bound, constant folding and a trial run on the example input.
    Returns ``(folded model, input specs, example inputs)``.

    Raises:
        UserError: one line naming the file, the stage and the first cause.
    """
    label = f"model.path={path}"
    model = load_onnx(path)
    if check is not None:
        check(model)
    specs = input_specs(model, shapes)
    check_bytes(label, "its inputs", tensor_bytes((s, np.dtype(d).itemsize) for s, d in specs.values()))
    with stage(label, "ONNX shape inference"):
        inferred = infer_static_shapes(model, specs)
    check_bytes(label, "its weights, inputs, outputs and activations", model_bytes(inferred))
    with stage(label, "constant folding (ONNX Runtime's basic graph optimizations)"):
        folded, session = ort_optimized(inferred)
    inputs = example_inputs(specs, seed)
    with stage(label, "trial run (ONNX Runtime) on the input shapes"):
        session.run(None, {name: x.numpy() for name, x in zip(specs, inputs)})
    return folded, specs, inputs


def check_onnx(path: str, shapes: Sequence[list[int]]) -> None:
    """The static checks of an ONNX model that need no backend: the file and its inputs (one-line errors;
    whether a backend converts its operators is the target's check)."""
    input_specs(load_onnx(path), shapes)
