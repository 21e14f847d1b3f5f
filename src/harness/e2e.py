"""End-to-end model latency: the whole model compiled with each task's best schedule.

After every task of a model is tuned, :func:`model_latencies` builds three rows on the same inputs:

- ``tuned``: the fused Relax module with every task's PrimFunc replaced by its best schedule
  (:func:`tuned_module`), compiled, checked against PyTorch and timed (:func:`measure_model`);
- ``tvm_default``: TVM's untuned default build of the same module (:func:`default_build_module`);
- ``torch``: PyTorch eager (:func:`torch_latency`).

Timing. TVM rows: ``warmup`` untimed calls of the VM's ``main``, then the VM's
``time_evaluator("main", dev, number=1, repeat=n_runs)``, i.e. ``n_runs`` single-inference
samples (the evaluator adds one more discarded call of its own). PyTorch: ``warmup`` untimed
calls, then ``n_runs`` calls each timed with ``time.perf_counter`` (with
``torch.cuda.synchronize()`` before and after each call on cuda). Every row reports the mean,
standard deviation and median of its samples in milliseconds. TVM runs (output check and timing)
hold the device lock (:func:`~tunebench.targets.devicelock.device_lock`); compilation does not,
as in the tuning loop. PyTorch uses as many threads as the TVM target's ``num-cores``.

Correctness. The model output of a TVM build is compared with ``imported.torch_output()`` (the
exported, BN-folded module in float32 on the CPU): ``rel_err = max |tvm - torch| / max |torch|``
over all outputs; above ``tolerance`` the build is wrong and :class:`E2EMismatch` is raised.
"""

from __future__ import annotations

import copy
import logging
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import tvm
from tvm import relax

from tunebench.datasets.relax_import import ImportedModel, default_gpu_schedule, make_target
from tunebench.datasets.tasks import task_id
from tunebench.targets.devicelock import device_lock
from tunebench.task import Task

log = logging.getLogger(__name__)

SCHEDULED_ATTR = "tirx.is_scheduled"
"""PrimFunc attribute that makes dlight's ``ApplyDefaultSchedule`` (run by the cuda compile
pipeline) leave a function alone; set on every replaced function."""


class E2EError(RuntimeError):
    """A whole-model build or run failed (one-line message naming the model and the build)."""


class E2EMismatch(E2EError):
    """A whole-model build computes a different output than PyTorch (beyond the tolerance)."""


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
    (:func:`~tunebench.datasets.tasks.task_id` of the function, ``target_kind``) is a key of
    ``schedules`` is replaced by the ``"main"`` PrimFunc of that value, under the original
    GlobalVar; the scheduled function takes the original's ``global_symbol`` (fused functions
    have none before compilation, and then neither does the replacement) and is marked
    ``tirx.is_scheduled``, so the cuda compile pipeline does not schedule it again. Identical
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
    mod = imported.mod.clone()
    used: set[str] = set()
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
    unused = sorted(set(schedules) - used)
    if unused:
        log.warning("schedules for %d task id(s) match no function of the model: %s",
                    len(unused), ", ".join(unused))
    return mod


def default_build_module(imported: ImportedModel, target_kind: str,
                         target: Mapping | tvm.target.Target | None = None) -> tvm.IRModule:
    """TVM's untuned default build of the model.

    ``llvm``: the fused module as it is (LLVM lowers the default loop nests). ``cuda``: every
    PrimFunc gets dlight's default GPU schedule (``default_gpu_schedule``) for ``target``
    (default: :func:`~tunebench.datasets.relax_import.make_target`), as ``tvm.compile`` would.
    """
    if target_kind == "llvm":
        return imported.mod
    if target_kind == "cuda":
        tgt = make_target("cuda") if target is None else tvm.target.Target(target)
        return default_gpu_schedule(imported.mod, tgt)
    raise ValueError(f"unknown target kind {target_kind!r}; valid: llvm, cuda")


# ---- measuring ---------------------------------------------------------------------------------

def _flat_numpy(out: Any) -> list[np.ndarray]:
    """Model outputs (a tensor, numpy array or nested tuple/list of them) as a flat array list."""
    if isinstance(out, torch.Tensor):
        return [out.detach().cpu().numpy()]
    if isinstance(out, np.ndarray):
        return [out]
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [a for item in out for a in _flat_numpy(item)]


def _errors(got: list[np.ndarray], want: list[np.ndarray], label: str) -> tuple[float, float]:
    """``(max abs err, max abs err / max |want|)`` over all outputs (raises on a shape mismatch)."""
    if [g.shape for g in got] != [w.shape for w in want]:
        raise E2EMismatch(f"{label}: output shapes {[g.shape for g in got]} differ from PyTorch's "
                          f"{[w.shape for w in want]}")
    err = max(float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
              for g, w in zip(got, want))
    scale = max(float(np.max(np.abs(w))) if w.size else 0.0 for w in want)
    return err, err / scale if scale > 0 else err


def _stats_ms(samples_s: Sequence[float]) -> dict:
    ms = [s * 1e3 for s in samples_s]
    return {"latency_ms": statistics.fmean(ms), "latency_std_ms": float(np.std(ms)),
            "latency_median_ms": statistics.median(ms), "n_runs": len(ms)}


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[-1] if lines else type(exc).__name__  # TVM puts the reason on the last line
    return f"{type(exc).__name__}: {text}"[:300]


def _device(spec: Sequence) -> tvm.runtime.Device:
    kind, idx = spec
    return tvm.cpu(int(idx)) if kind == "cpu" else tvm.cuda(int(idx))


def measure_model(imported: ImportedModel, mod: tvm.IRModule, tvm_target: Mapping,
                  device_spec: Sequence, n_runs: int, warmup: int, device_key: str,
                  lock_dir: str | None, tolerance: float, name: str = "model") -> dict:
    """Compile a whole Relax model, check its output against PyTorch and time it.

    Args:
        imported: the imported model (inputs, parameters and the PyTorch reference output).
        mod: the Relax module to build (:func:`tuned_module` or :func:`default_build_module`).
        tvm_target: the TVM target dict (``TVMTarget.tvm_target``; for llvm it carries ``mcpu``
            and ``num-cores``).
        device_spec: ``["cpu", 0]`` or ``["cuda", id]``.
        n_runs: timed inferences (one sample each); warmup: untimed inferences before them.
        device_key, lock_dir: the device lock held while the model runs.
        tolerance: largest allowed ``max |tvm - torch| / max |torch|``.
        name: names the build in error messages (e.g. ``"resnet18 (tuned)"``).

    Returns:
        ``{"latency_ms", "latency_std_ms", "latency_median_ms"}`` (mean, standard deviation and
        median of the ``n_runs`` samples, milliseconds), ``"n_runs"``, ``"max_abs_err"``,
        ``"rel_err"`` (output error vs PyTorch) and ``"compile_s"`` (seconds in ``tvm.compile``).

    Raises:
        E2EMismatch: the output differs from PyTorch's beyond ``tolerance``.
        E2EError: compilation or a run failed.
    """
    if n_runs < 1 or warmup < 0:
        raise ValueError(f"{name}: n_runs={n_runs} must be >= 1 and warmup={warmup} >= 0")
    target = tvm.target.Target(dict(tvm_target))
    t0 = time.perf_counter()
    try:
        ex = tvm.compile(mod, target=target)
    except Exception as exc:  # noqa: BLE001 -- TVM raises many types; one line is what we keep
        raise E2EError(f"{name}: whole-model compile for {target.kind.name} failed: "
                       f"{_one_line(exc)}") from exc
    compile_s = time.perf_counter() - t0
    want = _flat_numpy(imported.torch_output())

    with device_lock(device_key, lock_dir):
        try:
            dev = _device(device_spec)
            vm = relax.VirtualMachine(ex, dev)
            args = [tvm.runtime.tensor(np.ascontiguousarray(_flat_numpy(x)[0]), dev) for x in imported.inputs]
            args += [tvm.runtime.tensor(p, dev) for p in imported.params]
            got = _flat_numpy(vm["main"](*args))
        except Exception as exc:  # noqa: BLE001
            raise E2EError(f"{name}: whole-model run on {device_spec[0]} failed: {_one_line(exc)}") from exc
        abs_err, rel_err = _errors(got, want, name)
        if not rel_err <= tolerance:  # also catches NaN
            raise E2EMismatch(f"{name}: output differs from PyTorch: max abs err {abs_err:.3g}, "
                              f"relative {rel_err:.3g} > tolerance {tolerance:g}")
        for _ in range(warmup):
            vm["main"](*args)
        dev.sync()
        timer = vm.time_evaluator("main", dev, number=1, repeat=int(n_runs))
        samples = [float(s) for s in timer(*args).results]
    return {**_stats_ms(samples), "max_abs_err": abs_err, "rel_err": rel_err, "compile_s": compile_s}


def torch_latency(imported: ImportedModel, n_runs: int, warmup: int, device: str = "cpu",
                  num_threads: int | None = None) -> dict:
    """PyTorch eager latency of ``imported.torch_module`` on ``imported.inputs``.

    Runs under ``torch.inference_mode``; on ``device="cuda"`` a copy of the module and of the
    inputs is moved to the GPU and every call is bracketed by ``torch.cuda.synchronize()``.
    ``num_threads`` sets ``torch.set_num_threads`` for the measurement (restored afterwards;
    ``None`` keeps torch's setting).

    Returns:
        ``{"latency_ms", "latency_std_ms", "latency_median_ms", "n_runs"}`` (milliseconds).
    """
    if n_runs < 1 or warmup < 0:
        raise ValueError(f"n_runs={n_runs} must be >= 1 and warmup={warmup} >= 0")
    module, inputs = imported.torch_module, imported.inputs
    cuda = device.startswith("cuda")
    if cuda:
        if not torch.cuda.is_available():
            raise E2EError(f"torch_latency(device={device!r}): torch sees no CUDA GPU")
        module = copy.deepcopy(module).to(device)
        inputs = tuple(x.to(device) for x in inputs)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    threads = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(int(num_threads))
    try:
        samples = []
        with torch.inference_mode():
            for _ in range(warmup):
                module(*inputs)
            for _ in range(n_runs):
                sync()
                t0 = time.perf_counter()
                module(*inputs)
                sync()
                samples.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return _stats_ms(samples)


def model_latencies(imported: ImportedModel, tasks: Sequence[Task], schedules: Mapping[str, tvm.IRModule],
                    target, n_runs: int, warmup: int, tolerance: float,
                    name: str = "model", default_n_runs: int | None = None) -> dict[str, dict]:
    """The tuned model, TVM's default build and PyTorch eager, measured in one go.

    Args:
        imported: the imported model; tasks: its tasks (for the untuned list).
        schedules: task id -> scheduled IRModule (the best config of each tuned task).
        target: the :class:`~tunebench.targets.tvm_target.TVMTarget` (its ``kind``,
            ``tvm_target``, ``device_spec``, ``device_key``, ``lock_dir``).
        n_runs, warmup, tolerance: as in :func:`measure_model`.
        name: the model's name, for error messages.
        default_n_runs: runs for TVM's default build (None: ``n_runs``); it is often 10x slower
            than the tuned build, so fewer runs keep big models affordable.

    Returns:
        ``{"tuned": {...}, "tvm_default": {...}, "torch": {...}}`` with the keys of
        :func:`measure_model` (``torch``: latency keys only); ``tuned`` also has
        ``"untuned_tasks"``, the names of the tasks without a schedule (they keep the default).
    """
    kind = target.kind
    untuned = [t.name for t in tasks if t.id not in schedules]
    if untuned:
        log.warning("%s: %d task(s) without a schedule keep the default: %s", name, len(untuned),
                    ", ".join(untuned))
    common = dict(tvm_target=target.tvm_target, device_spec=target.device_spec, n_runs=n_runs,
                  warmup=warmup, device_key=target.device_key, lock_dir=target.lock_dir, tolerance=tolerance)
    tuned = measure_model(imported, tuned_module(imported, schedules, kind), name=f"{name} (tuned)", **common)
    default = measure_model(imported, default_build_module(imported, kind, target.tvm_target),
                            name=f"{name} (tvm default)",
                            **{**common, "n_runs": default_n_runs or n_runs})
    threads = target.tvm_target.get("num-cores") if kind == "llvm" else None
    eager = torch_latency(imported, n_runs, warmup, device="cuda" if kind == "cuda" else "cpu",
                          num_threads=threads)
    return {"tuned": {**tuned, "untuned_tasks": untuned}, "tvm_default": default, "torch": eager}
