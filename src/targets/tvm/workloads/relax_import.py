"""PyTorch module -> fused Relax IRModule (TVM 0.27), and a runner to check it against PyTorch.

Pipeline of :func:`import_model`:

1. fold every eval-mode BatchNorm2d into the Conv2d before it (``fuse_conv_bn_eval``), so the
   deployed convs carry ``bias + add (+ residual add) + relu`` epilogues instead of BN ops, and
   store every ``nn.Linear`` weight transposed (``x @ W_t + b``), so no weight ``transpose``
   runs at inference (weights are graph inputs, so it would not be constant-folded);
2. ``torch.export.export`` (fake tensors: nothing of the activations' size is allocated), the size of
   every tensor it traced bounded by the machine's memory, a trial forward on the example input;
3. ``relax.frontend.torch.from_exported_program(ep, keep_params_as_input=True)`` and
   ``relax.frontend.detach_params`` (weights become a separate, ordered parameter list);
4. inside ``with target:``: ``DecomposeOpsForInference -> LegalizeOps -> AnnotateTIROpPattern
   -> FoldConstant -> FuseOps -> FuseTIR``.

The resulting module's ``main`` takes the model inputs first, then the parameters in order.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program

from tunebench.datasets.import_stages import check_bytes, stage, tensor_bytes
from tunebench.safe_files import private_torch_caches

log = logging.getLogger(__name__)

CUDA_DEFAULT_ARCH = "sm_80"
"""Arch used for the ``cuda`` target when no GPU is visible (extraction needs none)."""


def _cpu_target() -> tvm.target.Target:
    return tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count() or 1})


def _cuda_target() -> tvm.target.Target:
    dev = tvm.cuda(0)
    arch = "sm_" + dev.compute_version.replace(".", "") if dev.exist else CUDA_DEFAULT_ARCH
    return tvm.target.Target({"kind": "cuda", "arch": arch})


_IMPORT_TARGETS = {"llvm": _cpu_target, "cuda": _cuda_target}  # TVM target kind -> the import's target


def make_target(target_kind: str) -> tvm.target.Target:
    """The TVM target for ``"llvm"`` (all host cores) or ``"cuda"``.

    For ``cuda`` the arch is taken from the local GPU when there is one, else ``sm_80``;
    task extraction and lowering work without a GPU.

    Raises:
        ValueError: unknown target kind (one-line message listing the valid kinds).
    """
    make = _IMPORT_TARGETS.get(target_kind)
    if make is not None:
        return make()
    raise ValueError(f"unknown target kind {target_kind!r}; valid: {', '.join(_IMPORT_TARGETS)}")


# ---- export preparation: BatchNorm folding, pre-transposed Linear weights -------------------

def fold_batchnorm(module: nn.Module) -> nn.Module:
    """A copy of ``module`` in eval mode with every BatchNorm folded into the conv feeding it.

    The copy is FX-traced only to find each ``Conv2d -> BatchNorm2d`` edge whose conv output has no
    other user; that conv is replaced (in the copy, which keeps its own class) by one conv with
    ``W' = W * g / sqrt(var + eps)`` and ``b' = (b - mean) * g / sqrt(var + eps) + beta``
    (``fuse_conv_bn_eval``) and the BatchNorm by ``nn.Identity``. The result is a plain module, so it
    can be sent to another process (an FX ``GraphModule`` of this PyTorch cannot be pickled). Modules
    without BatchNorm are returned as an eval-mode deep copy (no tracing).
    """
    import torch.fx
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    folded = copy.deepcopy(module).eval()
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in folded.modules()):
        return folded
    mods = dict(folded.named_modules())
    for node in torch.fx.symbolic_trace(folded).graph.nodes:
        if node.op != "call_module" or not isinstance(mods[node.target], nn.modules.batchnorm._BatchNorm):
            continue
        prev = node.args[0]
        if (isinstance(prev, torch.fx.Node) and prev.op == "call_module" and len(prev.users) == 1
                and isinstance(mods[prev.target], nn.Conv2d)):
            _set_submodule(folded, prev.target, fuse_conv_bn_eval(mods[prev.target], mods[node.target]))
            _set_submodule(folded, node.target, nn.Identity())
    left = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in folded.modules())
    if left:
        log.warning("%d BatchNorm layers of %s have no conv to fold into; they stay in the graph",
                    left, type(module).__name__)
    return folded


def _set_submodule(root: nn.Module, dotted: str, new: nn.Module) -> None:
    parent, _, name = dotted.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, new)


class PretransposedLinear(nn.Module):
    """``nn.Linear`` with its weight stored transposed: ``y = x @ weight_t + bias``.

    Exported as ``matmul(x, weight_t) + bias``, so the deployed graph has no per-inference
    ``transpose`` of the weight (nn.Linear's ``x @ W.T`` keeps one when weights are inputs;
    for AlexNet's FC layers that untuned transpose alone costs ~0.45 s per inference).

    Shapes: ``x`` (N, in_features) -> (N, out_features); ``weight_t`` (in_features, out_features).
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight_t = nn.Parameter(linear.weight.detach().t().contiguous(), requires_grad=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(),
                                                                  requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.weight_t)
        return y if self.bias is None else y + self.bias


def pretranspose_linears(module: nn.Module) -> nn.Module:
    """Replace every ``nn.Linear`` inside ``module`` (in place) by a :class:`PretransposedLinear`."""
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, PretransposedLinear(child))
    return module


def prepare_for_export(module: nn.Module) -> nn.Module:
    """An eval-mode copy of ``module`` with BatchNorm folded and Linear weights pre-transposed."""
    return pretranspose_linears(fold_batchnorm(module))


# ---- import ---------------------------------------------------------------------------------

@dataclass
class ImportedModel:
    """A model imported into Relax and fused, ready for task extraction and compilation.

    Attributes:
        mod: the fused Relax ``IRModule`` (``main`` + one PrimFunc per fused op group).
        params: the weights, numpy arrays in the order ``main`` expects them after the inputs.
        torch_module: the PyTorch module that was exported: BatchNorm folded, Linear weights
            pre-transposed (:func:`prepare_for_export`), eval mode; None for an ONNX model.
        example_input: the example input (a tensor, or a tuple of tensors for multi-input models).
        target_kind: the target the fusion passes ran under (``"llvm"`` or ``"cuda"``).
        import_s: seconds spent in :func:`import_model`.
        onnx_path, input_names: an ONNX model's file and its inputs' names (its reference is ONNX
            Runtime, :mod:`tunebench.targets.tvm.workloads.onnx_import`).
    """

    mod: tvm.IRModule
    params: list[np.ndarray]
    torch_module: nn.Module | None
    example_input: Any
    target_kind: str = "llvm"
    import_s: float = 0.0
    onnx_path: str | None = None
    input_names: tuple[str, ...] = ()

    @property
    def inputs(self) -> tuple[torch.Tensor, ...]:
        """The example input(s) as a tuple."""
        return _as_tuple(self.example_input)

    def reference_output(self) -> np.ndarray | list[np.ndarray]:
        """What the tuned model's output is checked against: the PyTorch module's, or ONNX Runtime's
        for an ONNX model."""
        if self.torch_module is None:
            from tunebench.targets.tvm.e2e.model_worker import ort_session

            feed = {name: x.numpy() for name, x in zip(self.input_names, self.inputs)}
            out = [np.asarray(a) for a in ort_session(self.onnx_path, 1).run(None, feed)]
            return out[0] if len(out) == 1 else out
        return self.torch_output()

    def torch_output(self) -> np.ndarray | list[np.ndarray]:
        """The exported PyTorch module's (``torch_module``) output on the example input (numpy)."""
        with torch.no_grad():
            out = self.torch_module(*self.inputs)
        if isinstance(out, (tuple, list)):
            return [o.numpy() for o in out]
        return out.numpy()


def _as_tuple(x: Any) -> tuple[torch.Tensor, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def fusion_passes() -> tvm.transform.Pass:
    """The inference lowering + fusion pipeline (run it inside ``with target:``)."""
    return tvm.transform.Sequential([
        relax.transform.DecomposeOpsForInference(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])


def import_model(module: nn.Module, example_input: torch.Tensor | Sequence[torch.Tensor],
                 target_kind: str = "llvm", label: str | None = None) -> ImportedModel:
    """Import a PyTorch module into a fused Relax IRModule.

    Args:
        module: the model (any mode; it is copied, put in eval mode and prepared with
            :func:`prepare_for_export`; the original is not modified).
        example_input: one input tensor, or a tuple/list of tensors (one per positional input).
        target_kind: ``"llvm"`` or ``"cuda"``; selects the target the fusion passes run under.
        label: how an error names a user's model (``model.factory=...``): each stage's failure is then one
            line, and a trial forward on the example input runs after the export; None: the project's own
            model (a failure is a traceback).

    Returns:
        The :class:`ImportedModel`.

    Raises:
        UserError: a stage of a user's model failed (:func:`~tunebench.datasets.import_stages.stage`): one
            line naming the model, the stage (export, size bound, trial forward, Relax import, fusion) and the
            first cause; any model whose traced tensors exceed the memory bound.
    """
    private_torch_caches()  # torch.export writes Inductor's cache: in this user's folder, not $TMPDIR's
    target = make_target(target_kind)
    t0 = time.perf_counter()
    inputs = _as_tuple(example_input)
    with torch.no_grad(), warnings.catch_warnings():
        # torch 2.13 warns (FutureWarning) about its own pytree internals when a module is copied and exported:
        # not the user's concern, and it would stand before a one-line error
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        with stage(label, "preparing for export (BatchNorm folding)"):
            folded = prepare_for_export(module)
        with stage(label, f"torch.export (a trial forward on fake tensors of shape {_shapes(inputs)})"), _quiet():
            ep = torch.export.export(folded, inputs)
        check_bytes(label, "the tensors its forward makes", traced_bytes(ep))
        if label is not None:
            with stage(label, f"trial forward on the example input {_shapes(inputs)}"):
                folded(*inputs)
        with stage(label, "Relax import (from_exported_program)"):
            mod = from_exported_program(ep, keep_params_as_input=True)
            mod, params = relax.frontend.detach_params(mod)
    with stage(label, "fusion (Relax passes)"), target:
        mod = fusion_passes()(mod)
    arrays = [p.numpy() for p in params.get("main", [])]
    dt = time.perf_counter() - t0
    log.info("imported %s for %s in %.1f s (%d params)", type(module).__name__, target_kind, dt,
             len(arrays))
    return ImportedModel(mod=mod, params=arrays, torch_module=folded, example_input=example_input,
                         target_kind=target_kind, import_s=dt)


@contextlib.contextmanager
def _quiet():
    """torch's warnings while it exports (its own handlers write them, whatever ``sys.stderr`` is): a failure
    is one line, and what torch says of it while tracing is in that line or beside the point."""
    before = logging.root.manager.disable
    logging.disable(max(before, logging.WARNING))
    try:
        yield
    finally:
        logging.disable(before)


def _shapes(inputs: Sequence[torch.Tensor]) -> str:
    return ", ".join(str(list(x.shape)) for x in inputs)


def traced_bytes(ep) -> int:
    """Bytes of every tensor an exported program's graph makes or takes (the fake tensors ``torch.export``
    traced: their shapes, nothing allocated)."""
    vals = [n.meta.get("val") for n in ep.graph.nodes]
    return tensor_bytes((v.shape, v.element_size()) for v in vals  # unbacked (data-dependent) sizes: unknown
                        if isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in v.shape))


def run_relax(imported: ImportedModel, target: tvm.target.Target | str | None = None,
              dev: Any = None, inputs: Sequence[Any] | Any = None) -> np.ndarray | list[np.ndarray]:
    """Compile ``imported.mod`` with ``tvm.compile`` and run it once on the Relax VM.

    Args:
        imported: the imported model.
        target: a ``tvm.target.Target`` or a target kind string (default: the import's kind).
        dev: the device (default: ``tvm.cpu()`` for llvm, ``tvm.cuda()`` for cuda).
        inputs: the input(s), torch tensors or numpy arrays (default: the example input).

    For ``cuda`` the PrimFuncs first get dlight's default GPU schedules (untuned but valid).

    Returns:
        The output as a numpy array (a list of arrays when the model has several outputs).
    """
    if target is None or isinstance(target, str):
        target = make_target(target or imported.target_kind)
    if dev is None:
        dev = tvm.device(target.get_target_device_type(), 0)
    xs = imported.inputs if inputs is None else _as_tuple(inputs)
    mod = imported.mod
    if "gpu" in target.keys:  # unscheduled TIR cannot run on a GPU: bind threads first
        mod = default_gpu_schedule(mod, target)
    ex = tvm.compile(mod, target=target)
    vm = relax.VirtualMachine(ex, dev)
    args = [tvm.runtime.tensor(_to_numpy(x), dev) for x in xs]
    args += [tvm.runtime.tensor(p, dev) for p in imported.params]
    return _to_numpy_out(vm["main"](*args))


def default_gpu_schedule(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """A copy of ``mod`` with dlight's default GPU schedules (thread binding) on every unscheduled PrimFunc.
    ``mod`` itself is left as it is: dlight's pass replaces the functions of the module it is given in place."""
    from tvm.s_tir import dlight as dl

    rules = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                    dl.gpu.GeneralReduction(), dl.gpu.Fallback())
    with target:
        return rules(mod.clone())


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _to_numpy_out(out: Any) -> np.ndarray | list[np.ndarray]:
    if hasattr(out, "numpy"):
        return out.numpy()
    items = [_to_numpy_out(o) for o in out]
    return items[0] if len(items) == 1 else items
