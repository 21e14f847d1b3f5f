"""The operators of ``model=ops`` (:mod:`.operators`) in PyTorch: the output check's reference and the
baseline a tuned kernel is timed against.

- :func:`torch_reference`: an operator's output from given inputs (float32, CPU);
- :func:`operator_model`: an operator as a one-operator model (:class:`~.relax_import.ImportedModel`): a
  Relax ``main`` calling its PrimFunc on its first input with the other inputs as weights, beside an
  :class:`OperatorModule` computing the same in PyTorch, so that the end-to-end protocol
  (:mod:`tunebench.targets.tvm.e2e.timing`) compares the tuned kernel with PyTorch, TVM's default build and
  ``torch.compile``, interleaved, at the same threads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from tunebench.datasets.operators import input_shapes, output_shape
from tunebench.targets.tvm.workloads.operator_te import prim_func


def _conv(fn: Callable, extra: Callable[[dict], dict]) -> Callable:
    return lambda s, x, w: fn(x, w, stride=s["stride"], padding=s["padding"], **extra(s))


_NONE = lambda s: {}  # noqa: E731

#: operator -> f(shape, *inputs) in PyTorch
TORCH_OPS: dict[str, Callable] = {
    "gmv": lambda s, a, b: a @ b,
    "gmm": lambda s, a, b: a @ b,
    "bil": lambda s, a, b, c: torch.einsum("ik,jkl,il->ij", a, b, c),
    "c1d": _conv(F.conv1d, _NONE), "t1d": _conv(F.conv_transpose1d, _NONE),
    "c2d": _conv(F.conv2d, _NONE), "t2d": _conv(F.conv_transpose2d, _NONE),
    "c3d": _conv(F.conv3d, _NONE), "t3d": _conv(F.conv_transpose3d, _NONE),
    "grp": _conv(F.conv2d, lambda s: {"groups": s["groups"]}),
    "dep": _conv(F.conv2d, lambda s: {"groups": s["in_channels"]}),
    "dil": _conv(F.conv2d, lambda s: {"dilation": s["dilation"]}),
}


def torch_reference(abbr: str, shape: dict, inputs: list) -> np.ndarray:
    """The operator's output computed by PyTorch (float32, on the CPU) from numpy ``inputs``."""
    with torch.no_grad():
        out = TORCH_OPS[abbr](shape, *(torch.from_numpy(np.ascontiguousarray(a)) for a in inputs))
    return out.numpy()


class OperatorModule(torch.nn.Module):
    """One operator in PyTorch with its weights (every input after the first) as buffers."""

    def __init__(self, abbr: str, shape: dict, weights: list[np.ndarray]):
        super().__init__()
        self.abbr, self.shape = abbr, dict(shape)
        for i, w in enumerate(weights):
            self.register_buffer(f"w{i}", torch.from_numpy(np.ascontiguousarray(w)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return TORCH_OPS[self.abbr](self.shape, x, *self.buffers())


def operator_model(abbr: str, shape: dict, target_kind: str = "llvm", seed: int = 0):
    """The operator as an :class:`~tunebench.targets.tvm.workloads.relax_import.ImportedModel` (module docstring);
    inputs and weights uniform in [-1, 1) from ``seed``."""
    from tvm import relax

    from tunebench.targets.tvm.workloads.relax_import import ImportedModel

    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, size=s).astype("float32") for s in input_shapes(abbr, shape)]
    bb = relax.BlockBuilder()
    args = [relax.Var(f"arg{i}", relax.TensorType(list(a.shape), "float32")) for i, a in enumerate(arrays)]
    # one input, then the weights, in a dataflow block: as an imported model's main, so that a packed-weight
    # schedule's packing is lifted into main_transform_params (run once at load) by the e2e step's tuned_module
    with bb.function("main", args, attrs={"num_input": 1}):
        gv = bb.add_func(prim_func(abbr, shape).without_attr("global_symbol"), abbr)
        with bb.dataflow():
            out = bb.emit_output(relax.call_tir(gv, args, relax.TensorType(list(output_shape(abbr, shape)),
                                                                           "float32")))
        bb.emit_func_output(out)
    return ImportedModel(mod=bb.get(), params=arrays[1:], torch_module=OperatorModule(abbr, shape, arrays[1:]).eval(),
                         example_input=torch.from_numpy(arrays[0]), target_kind=target_kind)
