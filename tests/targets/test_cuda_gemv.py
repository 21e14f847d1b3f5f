"""The batch-1 CUDA dense template (``CudaGemv``, the ``direct`` dense of one row) without a GPU: which dense
tasks take it, CUDA code for the H100 tag (sm_90a) with warp shuffles where K is split across threads, the
numbers against NumPy with the thread loops run serially on llvm, the static check under the tag's limits;
and on a GPU (``gpu`` marker) its time and achieved bandwidth against PyTorch on VGG-16's fc6 / fc7."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import te, tirx

from tunebench.search_space import Config
from tunebench.targets.tvm.gpu_limits import tag_limits
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.templates.cuda_gemv import CudaGemv, threads_k_values
from tvm_helpers import dense_te, random_args, run_llvm, serialize_gpu_schedule

H100 = "nvidia/nvidia-h100"
GEMV_KNOBS = ("threads_k", "threads_n", "vector", "k_inner", "auto_unroll_max_step")


def dense_relu_te(m: int, k: int, n: int) -> tvm.IRModule:
    """A dense + bias + relu PrimFunc shaped like the Relax one (matmul, T_add, compute)."""
    def i64(*v):
        return [tirx.const(x, "int64") for x in v]

    a, w, b = te.placeholder(i64(m, k), name="A"), te.placeholder(i64(k, n), name="W"), te.placeholder(i64(n), name="b")
    r = te.reduce_axis(tuple(i64(0, k)), "k")
    mm = te.compute(i64(m, n), lambda i, j: te.sum(a[i, r] * w[r, j], axis=r), name="matmul")
    add = te.compute(mm.shape, lambda i, j: mm[i, j] + b[j], name="T_add")
    out = te.compute(mm.shape, lambda i, j: tirx.max(add[i, j], tirx.const(0.0, "float32")), name="compute")
    return tvm.IRModule({"main": te.create_prim_func([a, w, b, out])})


def config(space, **values) -> Config:
    """The config of ``space`` with these knob values."""
    return space.from_dict(values)


def cuda_source(sched: tvm.IRModule) -> str:
    return tvm.compile(sched, target=tvm.target.Target(H100)).mod.imports[0].inspect_source()


def test_batch1_dense_takes_the_gemv_template_and_larger_batches_the_tiled_one():
    tpl = get_template("dense", "cuda", "direct")
    one = tpl.make_space(dense_te(1, 25088, 4096))
    assert one.names == GEMV_KNOBS
    assert one.knobs[0].values == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) == threads_k_values(25088)
    assert 1000 < one.size < 10_000
    assert tpl.make_space(dense_te(8, 512, 1000)).names[:3] == ("tile_y", "tile_x", "tile_k")
    assert get_template("dense", "llvm", "packed").make_space(dense_te(1, 64, 32)).names == ("tile_y", "tile_x",
                                                                                             "tile_k")


VALID = [  # (threads_k, threads_n, vector, k_inner, auto_unroll): sub-warp, one warp, several warps, no split
    (8, 4, 4, 2, 16), (32, 2, 4, 4, 0), (64, 4, 2, 1, 64), (128, 1, 4, 2, 512), (256, 2, 1, 1, 0), (1, 32, 2, 2, 16),
]


@pytest.mark.parametrize("bias_relu", [False, True])
def test_cuda_code_for_the_h100_and_serial_numerics(bias_relu):
    """Valid configs compile to CUDA for the tag's sm_90a (no GPU, no nvcc): a warp shuffle wherever K is
    split across threads, float4 weight loads at vector 4, no shared memory within one warp; run serially on
    llvm they compute what NumPy computes (bias, and relu, fused)."""
    mod = dense_relu_te(1, 512, 128) if bias_relu else dense_te(1, 512, 128)
    tpl = get_template("dense", "cuda")
    space = tpl.make_space(mod)
    args = random_args(mod, seed=0)
    ref = args[0].astype(np.float64) @ args[1] + args[2]
    ref = np.maximum(ref, 0) if bias_relu else ref
    limits = tag_limits(H100)
    for tk, tn, vec, ki, unroll in VALID:
        cfg = config(space, threads_k=tk, threads_n=tn, vector=vec, k_inner=ki, auto_unroll_max_step=unroll)
        assert tpl.static_check(mod, cfg, limits) is None
        sched = tpl.apply(mod, cfg)
        assert tpl.verify(sched, limits) is None
        source = cuda_source(sched)
        assert "__global__" in source and ("__shfl_down_sync" in source) == (tk > 1)
        assert ("float4" in source) == (vec == 4)
        assert ("__shared__" in source) == (tk > 32)  # one value per warp crosses warps
        assert f"__launch_bounds__({tk * tn})" in source
        np.testing.assert_allclose(run_llvm(serialize_gpu_schedule(sched), args), ref, rtol=1e-4, atol=1e-4)


def test_uneven_splits_are_guarded():
    """Splits that do not divide N or K leave the last block / step guarded; the numbers still match."""
    mod = dense_te(1, 48, 96)
    tpl = CudaGemv()
    space = tpl.make_space(mod)
    args = random_args(mod, seed=2)
    ref = args[0].astype(np.float64) @ args[1] + args[2]
    for tk, tn, vec, ki in ((16, 32, 2, 8), (16, 32, 4, 2)):  # 64 / 128 columns per block, 128 / 32 rows per step
        cfg = config(space, threads_k=tk, threads_n=tn, vector=vec, k_inner=ki, auto_unroll_max_step=0)
        sched = tpl.apply(mod, cfg)
        assert tpl.check(mod, cfg, tag_limits(H100)) is None and "__shfl_down_sync" in cuda_source(sched)
        np.testing.assert_allclose(run_llvm(serialize_gpu_schedule(sched), args), ref, rtol=1e-4, atol=1e-4)


def test_shared_bytes_are_the_reductions_scratch():
    """Above one warp on K the reduction exchanges one float per warp and thread group, plus the result."""
    mod = dense_te(1, 512, 96)
    tpl = CudaGemv()
    space = tpl.make_space(mod)
    cfg = config(space, threads_k=128, threads_n=4, vector=1, k_inner=1, auto_unroll_max_step=0)
    source = cuda_source(tpl.apply(mod, cfg))
    declared = sum(int(line.split("[")[1].split("]")[0]) for line in source.splitlines() if "__shared__" in line)
    assert 4 * declared == tpl.shared_bytes(tpl.analyze(mod), cfg) == 4 * 4 * (128 // 32 + 1)


def test_static_check_rejects_configs_over_the_tags_limits():
    mod = dense_te(1, 4096, 4096)
    tpl = get_template("dense", "cuda")
    space = tpl.make_space(mod)
    limits = tag_limits(H100)
    over = config(space, threads_k=256, threads_n=8, vector=4, k_inner=1, auto_unroll_max_step=0)
    assert tpl.static_check(mod, over, limits) == ("2048 threads per block (threadIdx.x=256, threadIdx.y=8) > "
                                                   "max_threads_per_block=1024")
    assert tpl.check(mod, over, {**limits, "max_threads_per_block": 4096}) is None
    narrow = config(space, threads_k=32, threads_n=32, vector=4, k_inner=1, auto_unroll_max_step=0)
    assert "threadIdx.y extent 32 > max_thread_y=16" == tpl.check(mod, narrow, {**limits, "max_thread_y": 16})
    verdicts = [tpl.static_check(mod, space.get(i), limits) for i in space.sample(np.random.default_rng(0), 300)]
    assert 0.1 < np.mean([v is not None for v in verdicts]) < 0.9


@pytest.mark.parametrize("k, n", [(25088, 4096), (4096, 1000)])
def test_vgg16_fc_layers_generate_cuda(k, n):
    """VGG-16's fc6 / fc8 sizes: statically valid configs of their spaces compile to CUDA for the H100."""
    mod = dense_relu_te(1, k, n)
    tpl = get_template("dense", "cuda")
    space = tpl.make_space(mod)
    limits = tag_limits(H100)
    rng = np.random.default_rng(1)
    valid = [space.get(i) for i in space.sample(rng, 80) if tpl.static_check(mod, space.get(i), limits) is None][:3]
    assert len(valid) == 3
    for cfg in valid:
        assert "__global__" in cuda_source(tpl.apply(mod, cfg))


# ---- real GPU ------------------------------------------------------------------------------

VGG_FC = {"fc6": (25088, 4096), "fc7": (4096, 4096)}
GPU_CONFIGS = [(4, 8, 4, 4, 64), (8, 4, 4, 2, 16), (32, 4, 4, 2, 16), (64, 4, 4, 1, 16), (256, 1, 4, 2, 0)]


def _median_s(fn, calls: int = 20, reps: int = 30) -> float:
    """Median seconds per call of ``fn()`` on the GPU: ``calls`` back-to-back calls between two CUDA events,
    ``reps`` times, after warm-up."""
    import torch

    for _ in range(calls):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / calls)
    return float(np.median(times))


@pytest.mark.gpu
@pytest.mark.parametrize("layer", list(VGG_FC))
def test_gemv_on_gpu_against_pytorch(layer, record_property):
    """VGG-16's fc6 / fc7 at batch 1: a few configs of the template, each output-checked, the fastest timed
    against ``torch.nn.functional.linear`` (FP32, TF32 off); achieved GB/s reported (bytes moved once: weights,
    bias, input, output)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not tvm.cuda(0).exist:
        pytest.skip("no CUDA GPU (PyTorch or TVM sees none)")
    torch.backends.cuda.matmul.allow_tf32 = False
    k, n = VGG_FC[layer]
    mod = dense_relu_te(1, k, n)
    tpl = get_template("dense", "cuda")
    space = tpl.make_space(mod)
    dev = tvm.cuda(0)
    target = tvm.target.Target({"kind": "cuda"}, host={"kind": "llvm"})  # the arch of the device found
    limits = {"max_threads_per_block": dev.max_threads_per_block, "max_shared_memory_per_block":
              dev.max_shared_memory_per_block}
    args = random_args(mod, seed=0)
    ref = np.maximum(args[0].astype(np.float64) @ args[1] + args[2], 0)
    x, w, b = (torch.from_numpy(a).cuda() for a in args[:3])
    w_t = w.t().contiguous()  # PyTorch's own layout: weight [N, K]
    best = None
    for tk, tn, vec, ki, unroll in GPU_CONFIGS:
        cfg = config(space, threads_k=tk, threads_n=tn, vector=vec, k_inner=ki, auto_unroll_max_step=unroll)
        if tpl.static_check(mod, cfg, limits) is not None:
            continue
        func = tvm.compile(tpl.apply(mod, cfg), target=target)["main"]
        arrays = [tvm.runtime.tensor(a, dev) for a in args[:3]] + [tvm.runtime.tensor(np.zeros_like(args[3]), dev)]
        func(*arrays)
        np.testing.assert_allclose(arrays[-1].numpy(), ref, rtol=1e-3, atol=1e-3)
        seconds = _median_s(lambda f=func, a=arrays: f(*a))
        best = min(best or (seconds, cfg), (seconds, cfg), key=lambda t: t[0])
    assert best is not None
    torch_s = _median_s(lambda: torch.relu(torch.nn.functional.linear(x, w_t, b)))
    moved = 4 * (k * n + n + k + n)
    gbps, torch_gbps = moved / best[0] / 1e9, moved / torch_s / 1e9
    record_property("gemv", {"layer": layer, "config": best[1].to_dict(), "ms": best[0] * 1e3, "gbps": gbps,
                             "torch_ms": torch_s * 1e3, "torch_gbps": torch_gbps})
    print(f"{layer}: gemv {best[0] * 1e3:.4f} ms {gbps:.0f} GB/s {best[1].to_dict()}; "
          f"torch {torch_s * 1e3:.4f} ms {torch_gbps:.0f} GB/s")
    assert gbps > 0
