"""Request handler that runs inside build/run worker processes (see :mod:`tunebench.targets.workers`).

Requests (``name``, request; the requests and answers are in :mod:`tunebench.targets.tvm.messages`):

- ``"build"`` (:class:`BuildInput`): schedule the task with config ``index`` of its template's space (or
  replay ``trace``; or TVM's default schedule with ``default``), compile for ``target`` and export the
  library to ``path``; a :class:`BuildResult`.
- ``"run"`` (:class:`RunInput`): load the library at ``path`` and time it with TVM's time evaluator on
  random inputs; a :class:`RunResult`.
- ``"check"`` (:class:`CheckInput`): build config ``index`` (or ``trace``) for ``target``, run it once on
  fixed random inputs and compare the output with the unscheduled PrimFunc compiled for the host CPU
  (the reference semantics of the fused task); a :class:`CheckResult` (its ``reference_note``: why a
  cached reference was discarded or not stored, for the harness's log; else None).
- ``"retime"`` (:class:`RetimeInput`): load the libraries at ``paths`` and time them in ``rounds``
  interleaved rounds (each round times every library once with ``repeat`` repeats, in an order rotated
  by one per round, then the calibration kernel); a :class:`RetimeResult`.
- ``"calibrate"`` (:class:`CalibrateInput`): time the calibration kernel
  (:func:`tunebench.targets.tvm.fixed_kernels.calibration_kernel`) for ``target``; a :class:`CalibrateResult`.
- ``"peak"`` (:class:`PeakInput`): the device's FMA throughput and memory bandwidth
  (:func:`tunebench.targets.tvm.fixed_kernels.measure_peak`); a :class:`PeakResult`.
- ``"acquire"`` / ``"release"`` (:class:`AcquireInput` / :class:`ReleaseInput`): hold / end a session on
  the remote device of ``device`` (``target.rpc``); an :class:`AcquireResult` / None.
- ``"load_tvm"`` / ``"time"``: a whole-model row on the remote device, for the end-to-end step
  (:mod:`tunebench.targets.tvm.e2e.model_worker`; locally every row has its own worker instead).

``device`` is ``["cpu", i]``, ``["cuda", i]`` or, for a device reached through a TVM RPC tracker,
``["rpc", {...}]`` (:func:`tunebench.targets.tvm.remote.remote_spec`): then every request that names it
runs in this worker's session on that device (requested from the tracker when none is held),
libraries are uploaded there, and a session that stops answering makes the request fail with
``DeviceLost`` (the next request gets another device of the key); ``NoDevice`` when none came free in
time. Every such result carries ``server`` (which device) and ``session_wait_s`` (seconds waited for a
session by this request, not the method's time).

The worker's TVM thread pool has ``TVM_NUM_THREADS`` threads (set by the target when it starts the
worker), the same number PyTorch baselines use.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from tunebench.targets.tvm.messages import (
    AcquireInput,
    AcquireResult,
    BuildInput,
    BuildResult,
    CalibrateInput,
    CalibrateResult,
    CheckInput,
    CheckResult,
    PeakInput,
    PeakResult,
    ReleaseInput,
    RetimeInput,
    RetimeResult,
    RunInput,
    RunResult,
    TaskSpec,
)

_TASKS: dict = {}  # task key -> (mod, template, space)
_INPUTS: dict = {}  # (device, signature) -> list of tvm tensors
_CALIBRATION: dict = {}  # target JSON -> (library, argument tensors)


def prepare() -> None:
    """Run at worker start-up, before it reports ready: the imports every request needs."""
    import tvm  # noqa: F401

    import tunebench.targets.tvm.templates  # noqa: F401


def _task(task: TaskSpec):
    import tvm

    from tunebench.targets.tvm.templates import get_template

    if task.key not in _TASKS:
        mod = tvm.ir.load_json(task.mod_json)
        tpl = get_template(task.kind, task.target_kind, task.template)
        _TASKS[task.key] = (mod, tpl, tpl.make_space(mod))
    return _TASKS[task.key]


def _device(spec: list):
    from tunebench.targets.tvm.remote import device_of

    return device_of(spec)


def _device_key(spec: list) -> str:
    """Caches of device objects (input tensors, loaded kernels) are per device and, remotely, per session."""
    import json

    from tunebench.targets.tvm.remote import SESSION, is_remote

    return json.dumps(spec, sort_keys=True) + (f"#{SESSION.generation}" if is_remote(spec) else "")


def arg_specs(mod) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of every parameter of ``mod["main"]``, in order; the last one is the output."""
    return [(tuple(int(s) for s in p.ty.shape), str(p.ty.dtype)) for p in mod["main"].params]


def _random_args(specs, dev, seed: int) -> list:
    import tvm

    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, size=s).astype(d) for s, d in specs[:-1]]
    arrays.append(np.zeros(specs[-1][0], dtype=specs[-1][1]))
    return [tvm.runtime.tensor(a, dev) for a in arrays]


def _scheduled(request: BuildInput | CheckInput):
    """The scheduled module for the request's candidate: a trace when given, else knob config ``index``."""
    from tunebench.targets.tvm.scheduling import apply_trace

    mod, tpl, space = _task(request.task)
    if request.trace is not None:
        return apply_trace(mod, request.trace), tpl
    return tpl.apply(mod, space.get(request.index)), tpl


def args_file(lib_path: str) -> str:
    """Where the build of ``lib_path`` notes the parameters of a kernel that takes packed weights."""
    return lib_path + ".args.json"


def _build(request: BuildInput) -> BuildResult:
    """Compile the candidate for timing: a template that packs its weights is compiled taking them
    packed (the packing runs once per model, not per call), its parameters noted in :func:`args_file`."""
    import json

    import tvm

    from tunebench.targets.tvm.templates.fused import prepacked
    from tunebench.targets.tvm.templates.gpu_verify import trace_limits

    t0 = time.perf_counter()
    if request.default:  # TVM's own schedule of the task: nothing of ours to verify
        from tunebench.targets.tvm.scheduling import default_schedule

        sched = default_schedule(_task(request.task)[0], request.target)
    else:
        sched, tpl = _scheduled(request)
        limits = request.limits or {}
        err = tpl.verify(sched, limits if request.trace is None else trace_limits(limits))
        if err:
            raise ValueError(err)
    timed = prepacked(sched)
    lib = tvm.compile(timed, target=tvm.target.Target(request.target))
    lib.export_library(request.path)
    if arg_specs(timed) != arg_specs(sched):
        with open(args_file(request.path), "w") as fh:
            json.dump(arg_specs(timed), fh)
    return BuildResult(build_s=time.perf_counter() - t0)


def _lib_args(path: str, args: list, spec: list, dev) -> list:
    """Random inputs for the library at ``path``: its noted parameters, else the task's (``args``)."""
    import json
    import os

    name = args_file(path)
    if not os.path.exists(name):
        return _inputs(args, spec, dev)
    with open(name) as fh:
        return _inputs(json.load(fh), spec, dev)


def _inputs(args: list, spec: list, dev) -> list:
    """Random inputs (seed 0) for argument specs ``args`` on ``dev`` (device spec ``spec``), kept for reuse."""
    specs = [(tuple(s), d) for s, d in args]
    key = (_device_key(spec), tuple(specs))
    if key not in _INPUTS:
        _INPUTS.clear()  # keep one input set alive: layers can be large
        _INPUTS[key] = _random_args(specs, dev, seed=0)
    return _INPUTS[key]


def _run(request: RunInput) -> RunResult:
    from tunebench.targets.tvm.remote import is_remote, load_library

    dev = _device(request.device)
    args = _lib_args(request.path, request.args, request.device, dev)
    t0 = time.perf_counter()
    lib = load_library(request.path, request.device)
    upload_s = time.perf_counter() - t0 if is_remote(request.device) else 0.0
    timer = lib.time_evaluator("main", dev, number=request.number, repeat=request.repeat,
                               min_repeat_ms=request.min_repeat_ms)
    res = timer(*args)
    return RunResult(results_s=[float(r) for r in res.results], run_s=time.perf_counter() - t0, upload_s=upload_s)


def _check(request: CheckInput) -> CheckResult:
    import tvm

    from tunebench.targets.tvm.remote import on_device

    mod, _, _ = _task(request.task)
    specs = arg_specs(mod)
    dev = _device(request.device)
    sched, _ = _scheduled(request)
    lib = on_device(tvm.compile(sched, target=tvm.target.Target(request.target)), request.device)
    args = _random_args(specs, dev, seed=1234)
    lib["main"](*args)
    out = args[-1].numpy()

    ref, note = _reference(mod, request, specs)
    err = float(np.max(np.abs(out - ref))) if out.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return CheckResult(max_abs_err=err, ref_max_abs=scale, rel_err=err / max(scale, 1e-12), reference_note=note)


def _reference(mod, request: CheckInput, specs) -> tuple[np.ndarray, str | None]:
    """The unscheduled task's output on the fixed inputs (seed 1234), computed on the host CPU, and a
    note for the log when a cached copy was discarded or could not be stored (else None). A single
    operator (``op_reference``, ``model=ops``) is computed by PyTorch instead.

    The naive loop nest is slow (minutes for a VGG-16 layer), and the result depends only on the
    workload, the inputs and the reference target: with ``ref_cache_dir`` (a private folder, checked
    by the target) it is kept as ``<dir>/<sha256 of those>.ref`` with the sha256 of its dtype, shape
    and bytes (:func:`tunebench.safe_files.write_hashed`), and read back by later checks of the same
    task, in any run. A cached copy that fails its hash, has the wrong dtype or shape, or cannot be
    read is never used: it is computed again and replaced.
    """
    import hashlib
    import json
    import os

    if op := request.op_reference:
        return _torch_reference(op, specs), None
    cache_dir = request.ref_cache_dir
    if not cache_dir:
        return _compute_reference(mod, request.ref_target, specs), None
    key = hashlib.sha256((request.task.mod_json + json.dumps(request.ref_target, sort_keys=True)
                          + "|seed=1234").encode()).hexdigest()[:32]
    path = os.path.join(cache_dir, key + ".ref")
    from tunebench.targets.tvm.checking import load_reference, save_reference

    ref, note = load_reference(path, tuple(specs[-1][0]), specs[-1][1])
    if ref is not None:
        return ref, None
    ref = _compute_reference(mod, request.ref_target, specs)
    try:
        save_reference(path, ref)
    except OSError as exc:
        note = (note + "; " if note else "") + f"cannot store the reference at {path} ({exc.strerror or exc})"
    return ref, note


def _torch_reference(op: dict, specs) -> np.ndarray:
    """A single operator's output computed by PyTorch from the fixed inputs (seed 1234)."""
    import tvm

    from tunebench.targets.tvm.workloads.operator_torch import torch_reference

    inputs = [a.numpy() for a in _random_args(specs, tvm.cpu(0), seed=1234)[:-1]]
    return torch_reference(op["op"], op["shape"], inputs)


def _compute_reference(mod, ref_target: dict, specs) -> np.ndarray:
    import tvm

    ref_lib = tvm.compile(mod, target=tvm.target.Target(ref_target))
    ref_args = _random_args(specs, tvm.cpu(0), seed=1234)
    ref_lib["main"](*ref_args)
    return ref_args[-1].numpy()


def _calibration(target: dict, spec: list, dev):
    """The calibration kernel for ``target`` and its arguments on ``dev`` (of device spec ``spec``), kept."""
    import json

    import tvm

    from tunebench.targets.tvm.fixed_kernels import calibration_kernel
    from tunebench.targets.tvm.remote import on_device

    key = json.dumps(target, sort_keys=True) + _device_key(spec)
    if key not in _CALIBRATION:
        lib, args, _ = calibration_kernel(target)
        _CALIBRATION[key] = (on_device(lib, spec), [tvm.runtime.tensor(a, dev) for a in args])
    return _CALIBRATION[key]


def _time(lib, args, dev, repeat: int, min_repeat_ms: int) -> list[float]:
    mod = getattr(lib, "mod", lib)
    timer = mod.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return [float(r) for r in timer(*args).results]


def _calibrate(request: CalibrateInput) -> CalibrateResult:
    dev = _device(request.device)
    lib, args = _calibration(request.target, request.device, dev)
    return CalibrateResult(samples=_time(lib, args, dev, request.repeat, request.min_repeat_ms))


def _retime(request: RetimeInput) -> RetimeResult:
    import statistics

    from tunebench.targets.tvm.remote import load_library

    spec = request.device
    dev = _device(spec)
    libs = [load_library(p, spec) for p in request.paths]
    lib_args = [_lib_args(p, request.args, spec, dev) for p in request.paths]  # packed weights differ per config
    cal_lib, cal_args = _calibration(request.target, spec, dev)
    samples: list[list[float]] = [[] for _ in libs]
    calibration = []
    rep, min_ms = request.repeat, request.min_repeat_ms
    for r in range(request.rounds):
        for k in range(len(libs)):
            i = (k + r) % len(libs)  # rotate the order, so no library is always first after the calibration
            samples[i] += _time(libs[i], lib_args[i], dev, rep, min_ms)
        calibration.append(statistics.median(_time(cal_lib, cal_args, dev, 3, min_ms)))
    return RetimeResult(samples=samples, calibration=calibration)


def _peak(request: PeakInput) -> PeakResult:
    from tunebench.targets.tvm.fixed_kernels import measure_peak
    from tunebench.targets.tvm.remote import on_device

    spec = request.device
    return PeakResult(peak=measure_peak(request.target, _device(spec), request.threads,
                                        load=lambda lib: on_device(lib, spec)))


def _acquire(request: AcquireInput) -> AcquireResult:
    from tunebench.targets.tvm.remote import SESSION

    waited = SESSION.acquire(request.device[1])
    return AcquireResult(waited_s=waited, server=SESSION.server)


def _release(request: ReleaseInput) -> None:
    from tunebench.targets.tvm.e2e import model_worker
    from tunebench.targets.tvm.remote import SESSION

    _INPUTS.clear()  # remote objects first: each refers to the session
    _CALIBRATION.clear()
    model_worker.forget_rows()
    SESSION.release()


def _model_request(name: str):
    def run(request):
        from tunebench.targets.tvm.e2e import model_worker

        return model_worker.handle(name, request)
    return run


_HANDLERS = {"build": _build, "run": _run, "check": _check, "retime": _retime, "calibrate": _calibrate,
             "peak": _peak, "load_tvm": _model_request("load_tvm"), "time": _model_request("time")}


def handle(name: str, request):
    """Entry point used by :class:`tunebench.targets.workers.Worker`: ``request`` is the input of
    request ``name`` (:mod:`tunebench.targets.tvm.messages`; ``"load_tvm"`` and ``"time"``:
    :mod:`tunebench.targets.tvm.e2e.model_messages`)."""
    from tunebench.targets.tvm.remote import SESSION, is_remote

    if name == "ping":
        return {"pid": __import__("os").getpid()}
    if name in ("acquire", "release"):
        return (_acquire if name == "acquire" else _release)(request)
    spec = getattr(request, "device", None)  # a build runs on no device
    if not is_remote(spec):
        return _HANDLERS[name](request)
    waited = SESSION.acquire(spec[1])  # held already inside the target's lock; else this request's own
    try:
        out = _HANDLERS[name](request)
    except Exception as exc:
        raise SESSION.lost(exc) from None
    return dataclasses.replace(out, server=SESSION.server, session_wait_s=waited)
