"""Worker-process handler that times one whole model (a *row* of the end-to-end comparison).

Each row runs in its own worker process (:class:`tunebench.targets.workers.Worker`), started with
``TVM_NUM_THREADS`` / ``OMP_NUM_THREADS`` set to the thread count of the tuned kernels, so every
row runs with the same threads and nothing else of the harness shares its process. The harness
loads every row once and then times them in interleaved blocks (A B A B ...).

Requests (``name``, request; the requests and answers are in :mod:`tunebench.targets.tvm.e2e.model_messages`):

- ``"load_tvm"`` (:class:`LoadTvmInput`): ``lib_path`` (an exported Relax executable), ``inputs`` and
  ``params`` (numpy), ``device`` (``["cpu", 0]`` / ``["cuda", i]``): load it on a Relax VM and run it
  once; an executable with a ``main_transform_params`` function (weights packed for the tuned kernels)
  gets its weights through it once here, before any timing.
- ``"load_torch"`` (:class:`LoadTorchInput`): ``module`` (a ``torch.nn.Module``), ``inputs`` (tensors),
  ``device`` (``cpu`` / ``cuda``), ``threads``, ``tf32`` (allow TF32 tensor cores for matmul and cuDNN;
  False = strict FP32), ``compile`` (wrap the module in ``torch.compile``; the first call compiles):
  run it once under ``torch.inference_mode``.
- ``"time"`` (:class:`TimeInput`): ``n`` samples after ``warmup`` untimed ones. A sample is the mean
  time of ``number`` back-to-back inferences, ``number`` chosen so that a sample takes at least
  ``min_sample_ms`` (TVM's time evaluator does this for TVM rows; PyTorch rows count calls the same
  way), so that a sub-millisecond model is not timed at the resolution of one call. Returns a
  :class:`TimeResult` (seconds per inference, per sample).

Both loads return a :class:`LoadResult` (the outputs, numpy, and the seconds). A worker usually holds one
row; a request's ``row`` names it where one worker holds several (the TVM rows of a model on a remote
device, ``target.rpc``, all run in the target's runner worker, which holds the device's session: the
executable is uploaded there, run through the VM's stateful interface, and weights packed for the
tuned kernels are packed once on this host, whose CPU the remote one shares).
"""

from __future__ import annotations

import time

import numpy as np

from tunebench.targets.tvm.e2e.model_messages import (
    LoadOrtInput,
    LoadResult,
    LoadTorchInput,
    LoadTvmInput,
    TimeInput,
    TimeResult,
)

_ROWS: dict = {}  # row name -> the loaded row: "kind", "call" (runs one inference), "sync", ...


def keep_freed_memory() -> bool:
    """With ``TUNEBENCH_KEEP_FREED_MEMORY=1`` (the default of every row): glibc malloc never serves
    large blocks by ``mmap`` and never returns freed memory to the kernel (``mallopt``).

    Eager PyTorch allocates every intermediate tensor afresh. With glibc's defaults each large one
    is a fresh ``mmap`` whose pages fault in, zeroed, on every call: on the project machine that
    made a 3x3 conv 2-7x slower than with a caching allocator, by an amount that changed from
    process to process and within a process (PyTorch's CPU performance guide advises jemalloc or
    tcmalloc for this reason). TVM's VM plans its memory once, so the setting removes noise from
    the baselines without helping the tuned model. Returns whether it was applied."""
    import ctypes
    import ctypes.util
    import os

    if os.environ.get("TUNEBENCH_KEEP_FREED_MEMORY") != "1":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        m_trim_threshold, m_mmap_max = -1, -4  # <malloc.h>
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))
    except (OSError, AttributeError):  # not glibc
        return False


def prepare_tvm() -> None:
    keep_freed_memory()
    import tvm  # noqa: F401


def prepare_torch() -> None:
    from tunebench.safe_files import private_torch_caches

    keep_freed_memory()
    private_torch_caches()  # before PyTorch is imported: torch.compile's caches in this user's private folder
    import torch  # noqa: F401


def _flat(out) -> list[np.ndarray]:
    if hasattr(out, "detach"):
        return [out.detach().cpu().numpy()]
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [a for item in out for a in _flat(item)]


TRANSFORM_PARAMS = "main_transform_params"  # a tuned build's weight packing (relax LiftTransformParams)


def vm_args(vm, dev, inputs, params) -> list:
    """The arguments of ``vm["main"]``: the inputs, then the weights (numpy arrays) -- passed once
    through ``main_transform_params`` where the build has it (weights packed for tuned kernels)."""
    import tvm

    args = [tvm.runtime.tensor(np.ascontiguousarray(x), dev) for x in inputs]
    weights = [tvm.runtime.tensor(p, dev) for p in params]
    if vm.module.implements_function(TRANSFORM_PARAMS):
        weights = list(vm[TRANSFORM_PARAMS](weights))
    return args + weights


def _packed_here(lib_path: str, params) -> list:
    """The weights as ``main_transform_params`` of the executable at ``lib_path`` packs them, run on
    this host's CPU (numpy): only CPU builds pack weights, and the remote CPU shares this one's ISA."""
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.runtime.load_module(lib_path), tvm.cpu(0))
    return [w.numpy() for w in vm_args(vm, tvm.cpu(0), [], params)]


def _load_tvm(request: LoadTvmInput) -> LoadResult:
    from tvm import relax

    from tunebench.targets.tvm.remote import device_of, is_remote, load_library

    t0 = time.perf_counter()
    spec = request.device
    dev = device_of(spec)
    vm = relax.VirtualMachine(load_library(request.lib_path, spec), dev)
    row = {"kind": "tvm", "vm": vm, "dev": dev, "sync": dev.sync}
    if is_remote(spec):  # remote tuples cannot be unpacked here: set the inputs once, call statefully
        import tvm

        params = _packed_here(request.lib_path, request.params) \
            if vm.module.implements_function(TRANSFORM_PARAMS) else request.params
        args = [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in list(request.inputs) + list(params)]
        vm.set_input("main", *args)
        vm.invoke_stateful("main")
        out = _flat(vm.get_outputs("main"))
        row.update(args=args, timer_name="invoke_stateful", timer_args=("main",))
    else:
        args = vm_args(vm, dev, request.inputs, request.params)
        out = _flat(vm["main"](*args))
        row.update(args=args, timer_name="main", timer_args=tuple(args))
    _ROWS[request.row] = row
    return LoadResult(outputs=out, load_s=time.perf_counter() - t0)


def _load_torch(request: LoadTorchInput) -> LoadResult:
    import torch

    t0 = time.perf_counter()
    torch.set_num_threads(int(request.threads))
    cuda = str(request.device).startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = bool(request.tf32)
        torch.backends.cudnn.allow_tf32 = bool(request.tf32)
    module = request.module.to(request.device).eval()
    inputs = tuple(x.to(request.device) for x in request.inputs)
    if request.compile:
        module = torch.compile(module)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def call():
        with torch.inference_mode():
            return module(*inputs)

    out = _flat(call())
    sync()
    _ROWS[request.row] = {"kind": "torch", "call": call, "sync": sync}
    return LoadResult(outputs=out, load_s=time.perf_counter() - t0)


def ort_session(path: str, threads: int):
    """An ONNX Runtime session on the CPU execution provider with ``threads`` intra-op threads (one
    inter-op thread, sequential execution: the same threads as the other rows)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = int(threads), 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def _load_ort(request: LoadOrtInput) -> LoadResult:
    t0 = time.perf_counter()
    session = ort_session(request.path, request.threads)
    feed = {name: np.ascontiguousarray(x) for name, x in zip(request.names, request.inputs)}

    def call():
        return session.run(None, feed)

    out = [np.asarray(a) for a in call()]
    _ROWS[request.row] = {"kind": "ort", "call": call, "sync": lambda: None}
    return LoadResult(outputs=out, load_s=time.perf_counter() - t0)


def forget_rows() -> None:
    """Drop every loaded row (a remote device's session ends with its rows)."""
    _ROWS.clear()


def _calls_per_sample(row: dict, min_sample_s: float) -> int:
    """How many back-to-back inferences make one sample of at least ``min_sample_s`` (the same
    doubling TVM's time evaluator does), measured once per row."""
    if "number" not in row:
        call, sync, number = row["call"], row["sync"], 1
        while True:
            sync()
            t0 = time.perf_counter()
            for _ in range(number):
                call()
            sync()
            if time.perf_counter() - t0 >= min_sample_s or number >= 1 << 20:
                break
            number *= 2
        row["number"] = number
    return row["number"]


def _time(request: TimeInput) -> TimeResult:
    """``warmup`` untimed samples, then ``n`` timed ones (GPU: synchronized before and after)."""
    n, warmup, min_s = int(request.n), int(request.warmup), float(request.min_sample_ms) / 1e3
    row = _ROWS[request.row]
    if row["kind"] == "tvm":
        timer = row["vm"].time_evaluator(row["timer_name"], row["dev"], number=1, repeat=n + warmup,
                                         min_repeat_ms=int(request.min_sample_ms))
        return TimeResult(samples=[float(s) for s in timer(*row["timer_args"]).results][warmup:])
    call, sync = row["call"], row["sync"]
    number = _calls_per_sample(row, min_s)
    samples = []
    for _ in range(n + warmup):
        sync()
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        sync()
        samples.append((time.perf_counter() - t0) / number)
    return TimeResult(samples=samples[warmup:])


_HANDLERS = {"load_tvm": _load_tvm, "load_torch": _load_torch, "load_ort": _load_ort, "time": _time}


def handle(name: str, request: LoadTvmInput | LoadTorchInput | LoadOrtInput | TimeInput):
    """Entry point used by :class:`tunebench.targets.workers.Worker`: ``request`` is the input of
    request ``name`` (:mod:`tunebench.targets.tvm.e2e.model_messages`)."""
    return _HANDLERS[name](request)
