"""Helpers of the tests that use TVM: workloads shaped like the fused Relax tasks, running them on llvm, and
schedule templates on a GPU target without a GPU."""

import re

import numpy as np
import tvm
from tvm import te, tirx

from tunebench.search_space import Space

LLVM = tvm.target.Target({"kind": "llvm", "num-cores": 2})
CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
LIMITS = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "max_thread_x": 1024,
          "max_thread_y": 1024, "max_thread_z": 64, "max_vthread": 8}


def serialize_gpu_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """The scheduled function with every thread binding made a serial loop and every buffer
    global, so that it runs on llvm (see the module docstring)."""
    text = re.sub(r'T\.thread_binding\(([^,]+), thread="[^"]+"(, annotations=\{[^}]*\})?\)', r"range(\1)",
                  mod.script())
    text = text.replace('scope="shared"', 'scope="global"').replace('scope="local"', 'scope="global"')
    assert "thread_binding" not in text
    return tvm.script.from_source(text)


# ---- workloads shaped like the fused Relax tasks (pad_temp -> main block -> epilogues, int64 shapes) ----

def _i64(*values):
    return [tirx.const(v, "int64") for v in values]


def conv_te(n, c, h, w, f, k, stride=1, pad=0, bias=True, relu=True, depthwise=False) -> tvm.IRModule:
    """A conv2d (NCHW) PrimFunc shaped like the Relax one: pad_temp, conv, T_add, compute."""
    zero = tirx.const(0.0, "float32")
    data = te.placeholder(_i64(n, c, h, w), name="x")
    weight = te.placeholder(_i64(f, 1 if depthwise else c, k, k), name="w")
    hp, wp = h + 2 * pad, w + 2 * pad
    padded = te.compute(_i64(n, c, hp, wp), lambda a, b, y, x: tirx.if_then_else(
        tirx.all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[a, b, y - pad, x - pad], zero),
        name="pad_temp")
    oh, ow = (hp - k) // stride + 1, (wp - k) // stride + 1
    rc = te.reduce_axis(tuple(_i64(0, 1 if depthwise else c)), "rc")
    ry, rx = te.reduce_axis(tuple(_i64(0, k)), "ry"), te.reduce_axis(tuple(_i64(0, k)), "rx")
    chan = (lambda ff: ff + rc) if depthwise else (lambda ff: rc)
    out = te.compute(_i64(n, f, oh, ow), lambda nn, ff, yy, xx: te.sum(
        padded[nn, chan(ff), yy * stride + ry, xx * stride + rx] * weight[ff, rc, ry, rx], axis=[rc, ry, rx]),
        name="group_conv2d_nchw" if depthwise else "conv2d_nchw")
    args = [data, weight]
    if bias:
        b = te.placeholder(_i64(1, f, 1, 1), name="b")
        args.append(b)
        conv = out
        out = te.compute(conv.shape, lambda a, ff, y, x: conv[a, ff, y, x] + b[a, ff, 0, 0], name="T_add")
    if relu:
        pre = out
        out = te.compute(pre.shape, lambda *i: tirx.max(pre(*i), zero), name="compute")
    return tvm.IRModule({"main": te.create_prim_func(args + [out])})


def dense_te(m, k, n, bias=True) -> tvm.IRModule:
    """A dense PrimFunc shaped like the Relax one: matmul A[M, K] x W[K, N], then T_add bias."""
    a = te.placeholder(_i64(m, k), name="A")
    w = te.placeholder(_i64(k, n), name="W")
    r = te.reduce_axis(tuple(_i64(0, k)), "k")
    out = te.compute(_i64(m, n), lambda i, j: te.sum(a[i, r] * w[r, j], axis=r), name="matmul")
    args = [a, w]
    if bias:
        b = te.placeholder(_i64(n), name="bias")
        args.append(b)
        mm = out
        out = te.compute(mm.shape, lambda i, j: mm[i, j] + b[j], name="T_add")
    return tvm.IRModule({"main": te.create_prim_func(args + [out])})


# ---- running ----

def random_args(mod: tvm.IRModule, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(s) for s in p.shape]).astype("float32") for p in mod["main"].params]


def run_llvm(mod: tvm.IRModule, args: list[np.ndarray]) -> np.ndarray:
    """Compile for llvm, run on copies of ``args`` (last = output), return the output."""
    dev = tvm.cpu()
    arrays = [tvm.runtime.tensor(a.copy(), dev) for a in args[:-1]]
    arrays.append(tvm.runtime.tensor(np.zeros_like(args[-1]), dev))
    tvm.compile(mod, target=LLVM)["main"](*arrays)
    return arrays[-1].numpy()


def sample_configs(space: Space, n: int, seed: int):
    return [space.get(i) for i in space.sample(np.random.default_rng(seed), n)]


def assert_close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


# ---- whole models (the end-to-end step's build on llvm) ----

TOL = 1e-4  # the output check's default relative tolerance


def run_compiled(imported, mod, tmp_path, name="model"):
    """Compile ``mod`` like the harness (exported library), run it once here and check it against PyTorch."""
    from tunebench.targets.tvm.e2e.build import check_output, compile_model, flat_numpy
    from tunebench.targets.tvm.e2e.model_worker import vm_args

    path = str(tmp_path / f"{name.replace(' ', '_')}.so")  # one file per build: dlopen caches by path
    compile_model(mod, {"kind": "llvm", "num-cores": 2}, path, name=name)
    vm = tvm.relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    args = vm_args(vm, tvm.cpu(), [flat_numpy(x)[0] for x in imported.inputs], imported.params)
    return check_output(flat_numpy(vm["main"](*args)), flat_numpy(imported.torch_output()), TOL, name)


def call_counts(mod: tvm.IRModule) -> dict[str, int]:
    """Function name -> number of ``call_tir`` sites in ``main``."""
    call_tir, counts = tvm.ir.Op.get("relax.call_tir"), {}
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, tvm.relax.Call) and value.op.same_as(call_tir):
                counts[value.args[0].name_hint] = counts.get(value.args[0].name_hint, 0) + 1
    return counts


def lifted_prepacks(tuned: tvm.IRModule) -> set[str]:
    """The weight-packing functions of a tuned module, checked to be lifted: the module has
    ``main_transform_params`` and ``main`` never packs (it takes the packed weights)."""
    names = {gv.name_hint for gv in tuned.get_global_vars()}
    assert "main_transform_params" in names
    prepack = {n for n in names if n.endswith("_weight_prepack")}
    assert not set(call_counts(tuned)) & prepack
    return prepack
