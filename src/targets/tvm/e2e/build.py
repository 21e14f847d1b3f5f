"""End-to-end model latency: the whole model compiled with each task's best schedule.

After every task of a model is tuned, :func:`tunebench.targets.tvm.e2e.timing.model_latencies` times
these *rows* on the same inputs, each in its own worker process with the same thread count:

- ``tuned``: the fused Relax module with every task's PrimFunc replaced by its best schedule
  (:func:`tuned_module`), compiled (:func:`compile_model`) and checked against PyTorch;
- ``tvm_default``: TVM's untuned default build of the same module (:func:`default_build_module`);
- ``torch``: PyTorch eager in FP32 (on cuda with TF32 disabled for matmul and cuDNN);
- ``torch_compile``: ``torch.compile`` of the same module, FP32, when it compiles in time;
- ``torch_tf32`` (cuda only): PyTorch eager with TF32 tensor cores allowed, PyTorch's default.

This module holds the module surgery, compilation and the output check; the interleaved timing
protocol is in :mod:`tunebench.targets.tvm.e2e.timing`.

Correctness. The model output of a TVM build is compared with ``imported.torch_output()`` (the
exported, BN-folded module in float32 on the CPU): ``rel_err = max |tvm - torch| / max |torch|``
over all outputs; above ``tolerance`` the build is wrong and :class:`E2EMismatch` is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import tvm
from tvm import relax

from tunebench.errors import E2EError
from tunebench.targets.tvm.e2e.errors import E2EMismatch
from tunebench.targets.tvm.scheduling import default_schedule
from tunebench.targets.tvm.workloads.relax_import import ImportedModel, make_target
from tunebench.targets.tvm.workloads.tasks import task_id

log = logging.getLogger(__name__)

SCHEDULED_ATTR = "tirx.is_scheduled"
"""PrimFunc attribute that makes dlight's ``ApplyDefaultSchedule`` (run by the cuda compile
pipeline) leave a function alone; set on every replaced function."""


# ---- modules ---------------------------------------------------------------------------------

def _signature(func: tvm.tirx.PrimFunc) -> list[tuple[tuple[int, ...], str]]:
    """``(shape, dtype)`` of every parameter buffer of a PrimFunc, in order."""
    return [(tuple(int(d) for d in p.ty.shape), str(p.ty.dtype)) for p in func.params]


def _main_func(schedule: tvm.IRModule | tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    return schedule if isinstance(schedule, tvm.tirx.PrimFunc) else schedule["main"]


def tuned_module(imported: ImportedModel, schedules: Mapping[str, tvm.IRModule],
                 target_kind: str) -> tvm.IRModule:
    """The model's fused Relax module with every tuned task's PrimFunc replaced by its schedule.

    Every PrimFunc of ``imported.mod`` whose task id
    (:func:`~tunebench.targets.tvm.workloads.tasks.task_id` of the function, ``target_kind``) is a key of
    ``schedules`` is replaced by the ``"main"`` PrimFunc of that value, under the original
    GlobalVar; the scheduled function takes the original's ``global_symbol`` (fused functions
    have none before compilation, and then neither does the replacement) and is marked
    ``tirx.is_scheduled``, so the cuda compile pipeline does not schedule it again. Schedules that
    read their weights through a packed copy (:func:`~tunebench.targets.tvm.templates.fused.pack_weight`)
    have the copy split out and lifted into the module's ``main_transform_params`` function, which
    the model runner calls once on the weights before the model runs (TVM's compile-time weight
    pre-packing); ``main`` then takes the packed weights. Identical
    workloads (task weight > 1) all get the schedule: FuseTIR usually leaves one PrimFunc called
    at several sites, and any structurally identical copies have the same task id. Other
    PrimFuncs are left as they are (on cuda, ``tvm.compile`` gives them dlight's default
    schedules).

    Args:
        imported: the imported model (its ``mod`` is not modified).
        schedules: task id -> scheduled IRModule with a ``"main"`` PrimFunc (from a knob config's
            ``template.apply`` or from a MetaSchedule trace; a bare PrimFunc works too).
        target_kind: ``"llvm"`` or ``"cuda"``, the kind the task ids were computed for.

    Returns:
        A new Relax IRModule.

    Raises:
        ValueError: a schedule's parameters (count, shapes, dtypes) differ from the function it
            replaces -- it was made for another workload (one-line message naming both).
    """
    from tunebench.targets.tvm.templates.fused import has_weight_rewrite

    mod = imported.mod.clone()
    used: set[str] = set()
    packs = False
    for gv, func in imported.mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        tid = task_id(func, target_kind)
        if tid not in schedules:
            continue
        new = _main_func(schedules[tid])
        if _signature(new) != _signature(func):
            raise ValueError(f"task {tid} ({gv.name_hint}): the schedule's parameters "
                             f"{_signature(new)} differ from the function's {_signature(func)}")
        symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
        new = new.with_attr("global_symbol", symbol) if symbol else new.without_attr("global_symbol")
        mod.update_func(gv, new.with_attr(SCHEDULED_ATTR, True))
        used.add(tid)
        packs = packs or has_weight_rewrite(new)
    unused = sorted(set(schedules) - used)
    if unused:
        log.warning("schedules for %d task id(s) match no function of the model: %s",
                    len(unused), ", ".join(unused))
    if packs:  # weight packing out of the kernels, into main_transform_params: run once per model
        mod = relax.transform.LiftTransformParams()(relax.transform.SplitLayoutRewritePreproc()(mod))
    return mod


def default_build_module(imported: ImportedModel, target: Mapping | tvm.target.Target | None = None) -> tvm.IRModule:
    """TVM's untuned default build of the model for ``target`` (a TVM target; default: the one the
    model was imported for, :func:`~tunebench.targets.tvm.workloads.relax_import.make_target`).

    A CPU target builds the fused module as it is (LLVM lowers the default loop nests); on a GPU
    target (one with TVM's ``gpu`` key) every PrimFunc gets dlight's default GPU schedule
    (``default_gpu_schedule``), as ``tvm.compile`` would.
    """
    tgt = make_target(imported.target_kind) if target is None else tvm.target.Target(target)
    return default_schedule(imported.mod, tgt)


# ---- compiling and checking ------------------------------------------------------------------

def flat_numpy(out: Any) -> list[np.ndarray]:
    """Model outputs (a tensor, numpy array or nested tuple/list of them) as a flat array list."""
    if isinstance(out, torch.Tensor):
        return [out.detach().cpu().numpy()]
    if isinstance(out, np.ndarray):
        return [out]
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [a for item in out for a in flat_numpy(item)]


def output_errors(got: list[np.ndarray], want: list[np.ndarray], label: str) -> tuple[float, float]:
    """``(max abs err, max abs err / max |want|)`` over all outputs (raises on a shape mismatch)."""
    if [g.shape for g in got] != [w.shape for w in want]:
        raise E2EMismatch(f"{label}: output shapes {[g.shape for g in got]} differ from PyTorch's "
                          f"{[w.shape for w in want]}")
    err = max(float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
              for g, w in zip(got, want))
    scale = max(float(np.max(np.abs(w))) if w.size else 0.0 for w in want)
    return err, err / scale if scale > 0 else err


def check_output(got: list[np.ndarray], want: list[np.ndarray], tolerance: float, name: str) -> tuple[float, float]:
    """Raise :class:`E2EMismatch` when ``got`` differs from ``want`` beyond ``tolerance``."""
    abs_err, rel_err = output_errors(got, want, name)
    if not rel_err <= tolerance:  # also catches NaN
        raise E2EMismatch(f"{name}: output differs from PyTorch: max abs err {abs_err:.3g}, "
                          f"relative {rel_err:.3g} > tolerance {tolerance:g}")
    return abs_err, rel_err


def one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[-1] if lines else type(exc).__name__  # TVM puts the reason on the last line
    return f"{type(exc).__name__}: {text}"[:300]


def compile_model(mod: tvm.IRModule, tvm_target: Mapping, path: str, name: str = "model") -> float:
    """Compile a whole Relax model for ``tvm_target`` and export it to ``path`` (a shared library a
    worker loads); returns the seconds spent in ``tvm.compile``. Raises :class:`E2EError`."""
    target = tvm.target.Target(dict(tvm_target))
    t0 = time.perf_counter()
    try:
        ex = tvm.compile(mod, target=target)
        compile_s = time.perf_counter() - t0
        ex.export_library(path)
    except Exception as exc:
        raise E2EError(f"{name}: whole-model compile for {target.kind.name} failed: {one_line(exc)}") from exc
    return compile_s
