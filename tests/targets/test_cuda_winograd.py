"""The CUDA Winograd template (``target.template=winograd``) without a GPU: its computation and its
schedules against the task's own function (thread loops run serially on llvm), CUDA code, the GPU limits,
the timed kernel taking the transformed weight, and a whole model with the transform lifted out."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import tvm

from tunebench.targets.tvm.e2e.build import tuned_module
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.templates.cuda import CudaConv2dDirect
from tunebench.targets.tvm.templates.cuda_winograd import CudaWinograd
from tunebench.targets.tvm.templates.fused import LAYOUT_REWRITE, analyze, prepacked
from tunebench.targets.tvm.templates.gpu_verify import thread_bindings
from tunebench.targets.tvm.templates.winograd_compute import MATRICES, shape_of, winograd_func
from tunebench.targets.tvm.workloads.relax_import import import_model
from tunebench.targets.tvm.workloads.tasks import extract_tasks
from tvm_helpers import (
    CUDA,
    LIMITS,
    assert_close,
    conv_te,
    lifted_prepacks,
    random_args,
    run_compiled,
    run_llvm,
    sample_configs,
    serialize_gpu_schedule,
)

#: (batch, channels, side, filters, pad, bias, relu): F(4×4) and F(2×2), a side no tile divides, no padding,
#: no epilogue, a batch of two
SHAPES = [(1, 8, 8, 16, 1, True, True), (1, 4, 9, 3, 0, True, False), (2, 5, 7, 6, 1, False, False),
          (1, 6, 10, 5, 1, False, True)]


def winograd_valid_configs(mod, n: int, seed: int):
    """``n`` random configs of the Winograd space of ``mod`` that pass the GPU limits."""
    tpl = CudaWinograd()
    return [c for c in sample_configs(tpl.make_space(mod), 4 * n, seed) if tpl.check(mod, c, LIMITS) is None][:n]


@pytest.mark.parametrize("shape", SHAPES)
def test_winograd_schedules_compute_the_task(shape):
    n, c, side, f, pad, bias, relu = shape
    mod = conv_te(n, c, side, side, f, 3, pad=pad, bias=bias, relu=relu)
    args = random_args(mod, seed=1)
    ref = run_llvm(mod, args)
    unscheduled = winograd_func(mod, analyze(mod))
    assert [p.ty.shape for p in unscheduled["main"].params] == [p.ty.shape for p in mod["main"].params]
    assert_close(run_llvm(unscheduled, args), ref)
    for cfg in winograd_valid_configs(mod, 2, seed=2):
        assert_close(run_llvm(serialize_gpu_schedule(CudaWinograd().apply(mod, cfg)), args), ref)


def test_an_epilogue_the_rebuild_cannot_translate_is_an_error_when_the_space_is_made():
    """A ``Let`` in an epilogue (no task of the zoo has one): one line naming it, before any trial."""
    from tvm import te, tirx

    def i64(*v):
        return [tirx.const(d, "int64") for d in v]

    x, w = te.placeholder(i64(1, 4, 8, 8), name="x"), te.placeholder(i64(4, 4, 3, 3), name="w")
    pad = te.compute(i64(1, 4, 10, 10), lambda a, b, y, z: tirx.if_then_else(
        tirx.all(y >= 1, y < 9, z >= 1, z < 9), x[a, b, y - 1, z - 1], tirx.const(0.0, "float32")), name="pad_temp")
    rc, ry, rx = (te.reduce_axis(tuple(i64(0, e)), n) for n, e in (("rc", 4), ("ry", 3), ("rx", 3)))
    conv = te.compute(i64(1, 4, 8, 8), lambda n, f, y, z: te.sum(
        pad[n, rc, y + ry, z + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv2d_nchw")
    v = tirx.Var("v", "float32")
    square = te.compute(conv.shape, lambda *i: tirx.Let(v, conv(*i), v * v), name="T_square")
    mod = tvm.IRModule({"main": te.create_prim_func([x, w, square])})
    with pytest.raises(ValueError, match="cannot translate a Let in an epilogue"):
        CudaWinograd().make_space(mod)


def test_tile_size_follows_the_output_side():
    assert shape_of(analyze(conv_te(1, 8, 8, 8, 8, 3, pad=1))).m == 4
    small = shape_of(analyze(conv_te(1, 8, 7, 7, 8, 3, pad=1)))
    assert (small.m, small.alpha, small.tiles_h, small.tiles) == (2, 4, 4, 16)


def test_the_variant_takes_winograd_only_for_3x3_stride_1():
    tpl = get_template("conv2d", "cuda", "winograd")
    winograd = conv_te(1, 8, 8, 8, 8, 3, pad=1)
    assert tpl.source_class(winograd) is CudaWinograd
    assert [k.name for k in tpl.make_space(winograd).knobs] == [k.name for k in CudaWinograd().make_space(winograd).knobs]
    for other in (conv_te(1, 8, 8, 8, 8, 1), conv_te(1, 8, 9, 9, 8, 3, stride=2), conv_te(1, 8, 9, 9, 8, 5, pad=2)):
        assert tpl.source_class(other) is CudaConv2dDirect
        assert [k.name for k in tpl.make_space(other).knobs] == [k.name for k in CudaConv2dDirect().make_space(other).knobs]
    with pytest.raises(ValueError, match="stride 1"):
        CudaWinograd().make_space(conv_te(1, 8, 9, 9, 8, 3, stride=2))
    assert type(get_template("dense", "cuda", "winograd")) is type(get_template("dense", "cuda", "direct"))


def test_cuda_code_four_kernels_within_the_limits():
    """A ResNet-18 stage-1 layer: the input transform, the weight transform, the batched product and
    the output transform; the product's block as the knobs say; the transforms' constants folded."""
    mod = conv_te(1, 64, 56, 56, 64, 3, pad=1)
    tpl = CudaWinograd()
    space = tpl.make_space(mod)
    cfg = space.from_dict({"tile_y": (4, 2, 8, 1), "tile_x": (7, 1, 14, 2), "tile_rc": (8, 8),
                           "auto_unroll_max_step": 128, "unroll_explicit": 1})
    assert tpl.check(mod, cfg, LIMITS) is None
    sched = tpl.apply(mod, cfg)
    assert tpl.verify(sched, LIMITS) is None
    assert tpl.shared_bytes(analyze(mod), cfg) == 4 * 8 * (16 + 28)  # rc_i × (Ty + Tx) floats
    source = tvm.compile(sched, target=CUDA).mod.imports[0].inspect_source()
    kernels = [line for line in source.splitlines() if "__global__" in line and "{" in line]
    assert len(kernels) == 4
    assert sum("__launch_bounds__(128)" in k for k in kernels) == 3 and any("__launch_bounds__(128)" not in k
                                                                            for k in kernels)
    assert "Select" not in source and "? " not in source.split("main_kernel_1")[1][:20000]


def test_static_check_rejects_what_breaks_the_limits():
    mod = conv_te(1, 64, 56, 56, 64, 3, pad=1)
    space = CudaWinograd().make_space(mod)
    base = {"tile_y": (4, 2, 8, 1), "tile_x": (7, 1, 14, 2), "tile_rc": (8, 8), "auto_unroll_max_step": 0,
            "unroll_explicit": 0}
    many = space.from_dict({**base, "tile_y": (1, 1, 64, 1), "tile_x": (1, 1, 196, 1)})
    assert "threads per block" in CudaWinograd().check(mod, many, LIMITS)
    shared = space.from_dict({**base, "tile_rc": (1, 64), "tile_x": (1, 1, 4, 49)})
    assert "shared memory" in CudaWinograd().static_check(mod, shared, LIMITS)


def test_the_lowered_check_takes_each_kernel_alone():
    """The transforms launch 128 threads on threadIdx.x, the product 32 × 14 on threadIdx.y/x: each kernel is
    within the limits, though the largest extents of the two axes multiplied (128 × 32) would not be."""
    mod = conv_te(1, 64, 56, 56, 64, 3, pad=1)
    cfg = CudaWinograd().make_space(mod).from_dict({"tile_y": (2, 1, 32, 1), "tile_x": (7, 1, 14, 2), "tile_rc": (8, 8),
                                                    "auto_unroll_max_step": 0, "unroll_explicit": 0})
    sched = CudaWinograd().apply(mod, cfg)
    assert thread_bindings(sched)[2][0] == {"threadIdx.y": 32, "threadIdx.x": 14}
    assert CudaWinograd().check(mod, cfg, LIMITS) is None and CudaWinograd().verify(sched, LIMITS) is None


def test_timed_kernel_takes_the_transformed_weight():
    """The weight transform is marked as a weight rewrite: the timed kernel takes ``G W Gᵀ`` (computed
    here with NumPy) as its parameter and computes the task's output from it."""
    mod = conv_te(1, 6, 8, 8, 4, 3, pad=1)
    args = random_args(mod, seed=3)
    ref = run_llvm(mod, args)
    (cfg,) = winograd_valid_configs(mod, 1, seed=4)
    sched = CudaWinograd().apply(mod, cfg)
    assert LAYOUT_REWRITE in sched["main"].script()
    timed = prepacked(sched)
    g = np.array(MATRICES[4][2], dtype="float64")
    transformed = np.einsum("ea,kcab,nb->enck", g, args[1].astype("float64"), g).astype("float32")
    assert tuple(int(d) for d in timed["main"].params[1].ty.shape) == transformed.shape == (6, 6, 6, 4)
    assert_close(run_llvm(serialize_gpu_schedule(timed), [args[0], transformed, *args[2:]]), ref)


class ResidualNet(nn.Module):
    """Two 3×3 stride-1 convs with BN, ReLU and a residual add, then a strided conv (the direct template)."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 4, 3, stride=2, padding=1)

    def forward(self, x):
        y = torch.relu(self.bn1(self.c1(x)))
        return self.c3(torch.relu(self.c2(y) + y))


def test_a_model_computes_the_weight_transform_once_and_matches_pytorch(tmp_path):
    """Winograd schedules of a model's 3×3 stride-1 tasks (bias, ReLU and residual epilogues from Relax),
    run serially on llvm: the weight transforms are lifted into ``main_transform_params`` and the model
    computes PyTorch's output. The cuda build of the same schedules compiles without a GPU."""
    torch.manual_seed(0)
    model, x = ResidualNet().eval(), torch.randn(1, 3, 12, 12)
    tpl = get_template("conv2d", "cuda", "winograd")
    built = {}
    for kind in ("llvm", "cuda"):
        imported = import_model(model, x, kind)
        tasks = [t for t in extract_tasks(imported) if tpl.source_class(t.mod) is CudaWinograd]
        assert len(tasks) == 2
        schedules = {t.id: tpl.apply(t.mod, winograd_valid_configs(t.mod, 1, seed=5)[0]) for t in tasks}
        if kind == "llvm":
            schedules = {k: serialize_gpu_schedule(v) for k, v in schedules.items()}
        built[kind] = imported, tuned_module(imported, schedules, kind)
        assert len(lifted_prepacks(built[kind][1])) == 2
    imported, tuned = built["llvm"]
    assert run_compiled(imported, tuned, tmp_path, name="winograd (serial)")[1] <= 1e-4
    tvm.compile(built["cuda"][1], target=CUDA)


def test_a_build_worker_exports_the_kernel_taking_the_transformed_weight(tmp_path):
    """What ``target=cuda target.template=winograd`` builds for timing: the worker's build of a Winograd
    candidate exports a CUDA library and notes its parameters, the weight as ``alpha×alpha×C×K``."""
    import json
    import os

    from tunebench.targets.tvm.messages import BuildInput, TaskSpec
    from tunebench.targets.tvm.worker import args_file, handle
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    layer = {"in_channels": 8, "height": 14, "width": 14, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1}
    (task,), _ = model_tasks({"name": "layers", "layers": [layer]}, "cuda")
    (cfg,) = winograd_valid_configs(task.mod, 1, seed=6)
    spec = TaskSpec(key=task.id + "-winograd", mod_json=tvm.ir.save_json(task.mod), kind=task.kind,
                    target_kind="cuda", template="winograd")
    path = str(tmp_path / "winograd.so")
    handle("build", BuildInput(task=spec, index=cfg.index, target={"kind": "cuda", "arch": "sm_80"}, path=path,
                               limits=LIMITS))
    assert os.path.getsize(path) > 0
    with open(args_file(path)) as fh:
        shapes = [tuple(shape) for shape, _ in json.load(fh)]
    assert shapes[1] == (6, 6, 8, 16)  # F(4×4, 3×3) on 14×14: alpha = 6
