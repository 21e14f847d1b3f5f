"""Fixed TVM kernels of the measurement protocol: the calibration kernel and the peak microbenchmarks.

- :func:`calibration_kernel`: a 256^3 (cuda: 1024^3) float32 matmul with a fixed schedule. Timed
  before and after every task and around the end-to-end step: if it gets slower, something else
  is using the device (see :mod:`tunebench.protocol.noise`).
- :func:`fma_kernel`: FMA throughput: every thread (CPU: one per configured core; GPU: a full
  grid) updates ``chains`` independent accumulators of ``lanes`` floats, ``acc = acc * a + b``,
  held in registers, so the loop is bound by the FMA units only. GFLOP/s = 2 x FMAs / time.
- :func:`triad_kernel`: STREAM triad ``c = a + 3 b`` on arrays far larger than the caches;
  bandwidth = 12 bytes per element / time.

:func:`measure_peak` times them (best of several shapes, since the best vector width and chain
count depend on the CPU) and returns the machine's measured peak.
"""

from __future__ import annotations

import numpy as np


def _target(target: dict):
    import tvm

    return tvm.target.Target(dict(target))


def _is_gpu(target: dict) -> bool:
    return "gpu" in _target(target).keys


def calibration_kernel(target: dict):
    """``(compiled module, argument arrays as numpy, FLOPs)`` of the calibration matmul."""
    import tvm
    from tvm import te

    n = 1024 if _is_gpu(target) else 256
    a = te.placeholder((n, n), "float32", name="a")
    b = te.placeholder((n, n), "float32", name="b")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b, c]))
    blk = sch.get_sblock("c")
    i, j, kk = sch.get_loops(blk)
    if _is_gpu(target):
        io, ii = sch.split(i, [None, 16])
        jo, ji = sch.split(j, [None, 16])
        sch.reorder(io, jo, ii, ji, kk)
        sch.bind(io, "blockIdx.y")
        sch.bind(jo, "blockIdx.x")
        sch.bind(ii, "threadIdx.y")
        sch.bind(ji, "threadIdx.x")
    else:
        io, ii = sch.split(i, [None, 4])
        jo, ji = sch.split(j, [None, 64])
        jv, js = sch.split(ji, [None, 16])
        sch.reorder(io, jo, kk, ii, jv, js)
        sch.parallel(io)
        sch.unroll(ii)
        sch.vectorize(js)
        sch.decompose_reduction(blk, kk)
    rng = np.random.default_rng(7)
    args = [rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32"),
            np.zeros((n, n), "float32")]
    return tvm.compile(sch.mod, target=_target(target)), args, 2 * n ** 3


def fma_kernel(target: dict, threads: int, lanes: int, chains: int, steps: int):
    """``(compiled module, argument arrays, FLOPs)`` of the FMA-throughput kernel."""
    import tvm

    func = _fma_gpu(lanes, chains, steps) if _is_gpu(target) else _fma_cpu(threads, lanes, chains, steps)
    width = GPU_BLOCKS * 256 if _is_gpu(target) else threads * lanes
    args = [np.full((width,), 0.999, "float32"), np.zeros((width,), "float32")]
    flops = 2 * width * chains * steps * 8  # every (thread, lane) runs chains x steps x 8 FMAs
    return tvm.compile(tvm.IRModule({"main": func}), target=_target(target)), args, flops


def _fma_cpu(threads: int, lanes: int, chains: int, steps: int):
    from tvm.script import tirx as T

    @T.prim_func
    def fma(x: T.Buffer((threads * lanes,), "float32"), out: T.Buffer((threads * lanes,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for p in T.parallel(threads):
            acc = T.decl_buffer((chains, lanes), "float32", scope="local")
            for c in T.unroll(chains):
                for v in T.vectorized(lanes):
                    acc[c, v] = x[p * lanes + v] + T.float32(c)
            for _ in range(steps):
                for _m in T.unroll(8):
                    for c in T.unroll(chains):
                        for v in T.vectorized(lanes):
                            acc[c, v] = acc[c, v] * T.float32(0.999) + T.float32(0.5)
            for v in T.vectorized(lanes):
                out[p * lanes + v] = acc[0, v]
                for c in range(1, chains):
                    out[p * lanes + v] = out[p * lanes + v] + acc[c, v]

    return fma


GPU_BLOCKS = 4096  # many waves of blocks on any GPU, so the last, partial wave costs little


def _fma_gpu(lanes: int, chains: int, steps: int):
    """GPU variant: ``lanes`` is unused (one float per thread and chain); GPU_BLOCKS blocks of 256."""
    from tvm.script import tirx as T

    width = GPU_BLOCKS * 256

    @T.prim_func
    def fma(x: T.Buffer((width,), "float32"), out: T.Buffer((width,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for bx in T.thread_binding(GPU_BLOCKS, thread="blockIdx.x"):
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                acc = T.decl_buffer((chains,), "float32", scope="local")
                for c in T.unroll(chains):
                    acc[c] = x[bx * 256 + tx] + T.float32(c)
                for _ in range(steps):
                    for _m in T.unroll(8):
                        for c in T.unroll(chains):
                            acc[c] = acc[c] * T.float32(0.999) + T.float32(0.5)
                out[bx * 256 + tx] = acc[0]
                for c in range(1, chains):
                    out[bx * 256 + tx] = out[bx * 256 + tx] + acc[c]

    return fma


def triad_kernel(target: dict, n: int):
    """``(compiled module, argument arrays, bytes moved)`` of the STREAM triad on ``n`` floats."""
    import tvm
    from tvm import te

    a = te.placeholder((n,), "float32", name="a")
    b = te.placeholder((n,), "float32", name="b")
    c = te.compute((n,), lambda i: a[i] + b[i] * te.const(3.0, "float32"), name="c")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b, c]))
    (i,) = sch.get_loops(sch.get_sblock("c"))
    if _is_gpu(target):
        bx, tx = sch.split(i, [None, 256])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    else:
        outer, inner = sch.split(i, [None, 64 * 1024])
        _, vec = sch.split(inner, [None, 16])
        sch.parallel(outer)
        sch.vectorize(vec)
    args = [np.ones(n, "float32"), np.ones(n, "float32"), np.zeros(n, "float32")]
    return tvm.compile(sch.mod, target=_target(target)), args, 12 * n


def time_kernel(lib, args, dev, repeat: int, min_repeat_ms: int) -> list[float]:
    """Seconds per call of ``lib["main"]`` on ``args`` (numpy), ``repeat`` samples."""
    import tvm

    tensors = [tvm.runtime.tensor(a, dev) for a in args]
    mod = getattr(lib, "mod", lib)  # tvm.compile gives an Executable; a loaded library is a Module
    timer = mod.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return [float(r) for r in timer(*tensors).results]


# (lanes, chains) tried for the FMA peak: AVX-512 (16 lanes, 32 registers), AVX2 (8 lanes,
# 16 registers), 128-bit SIMD (4 lanes); the best of them is the machine's FMA peak
CPU_FMA_SHAPES = ((16, 24), (16, 12), (8, 12), (8, 8), (4, 24))
GPU_FMA_SHAPES = ((1, 8), (1, 16))


def measure_peak(target: dict, dev, threads: int, load=None) -> dict:
    """The device's FMA throughput (GFLOP/s, FP32) and triad bandwidth (GB/s) with ``threads`` threads
    (the worker's TVM thread pool must have that many; GPUs ignore it). ``load``: makes a library
    compiled here usable on ``dev`` (a remote device: :func:`tunebench.targets.tvm.remote.on_device`)."""
    load = load or (lambda lib: lib)
    gpu = _is_gpu(target)
    best = {"fma_gflops": 0.0}
    for lanes, chains in GPU_FMA_SHAPES if gpu else CPU_FMA_SHAPES:
        lib, args, flops = fma_kernel(target, threads, lanes, chains, steps=2000 if gpu else 2500)
        t = min(time_kernel(load(lib), args, dev, repeat=5, min_repeat_ms=50))
        if flops / t / 1e9 > best["fma_gflops"]:
            best = {"fma_gflops": flops / t / 1e9, "fma_lanes": lanes, "fma_chains": chains}
    n = 1 << (26 if gpu else 25)  # 256 MB (cuda) / 128 MB per array
    lib, args, nbytes = triad_kernel(target, n)
    t = min(time_kernel(load(lib), args, dev, repeat=10, min_repeat_ms=0))
    return {**best, "mem_gbps": nbytes / t / 1e9, "threads": threads, "triad_elements": n}
