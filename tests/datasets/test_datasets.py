"""Model zoo -> Relax import -> tasks: shapes, weights, FLOPs, ids, numerics (CPU only)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn as nn

from tunebench.datasets import MODELS, build_model, layers_model
from tunebench.datasets.zoo import BasicBlock
from tunebench.targets.tvm.workloads.relax_import import (
    fold_batchnorm,
    import_model,
    make_target,
    prepare_for_export,
    run_relax,
)
from tunebench.targets.tvm.workloads.tasks import clear_cache, extract_tasks, model_tasks


@pytest.fixture(scope="module", autouse=True)
def _drop_model_cache():
    """The zoo models stay cached while this module runs and are freed afterwards."""
    yield
    clear_cache()


def _tasks(name: str):
    return model_tasks({"name": name}, "llvm")[0]


def _epilogue(task_name: str) -> str:
    """``fused_conv2d4_add3_add4_relu2`` -> ``add_add_relu`` (the ops fused after the main op)."""
    ops = [re.sub(r"\d+$", "", op) for op in task_name.split("_")[2:]]
    return "_".join(ops)


def _conv_key(t) -> tuple:
    s = t.shape
    return (t.kind, s["in_channels"], s["out_channels"], s["height"], s["kernel"], s["stride"],
            s["padding"])


def _torch_layers(module: nn.Module, x: torch.Tensor) -> Counter:
    """Multiset of conv/linear layer shapes seen by forward hooks on the PyTorch model."""
    seen: Counter = Counter()

    def hook(mod, inputs, _out):
        n, *rest = inputs[0].shape
        if isinstance(mod, nn.Conv2d):
            seen[("depthwise_conv2d" if mod.groups > 1 else "conv2d", n, rest[0], rest[1], rest[2],
                  mod.out_channels, mod.kernel_size[0], mod.stride[0], mod.padding[0], mod.groups)] += 1
        else:
            seen[("dense", n, mod.in_features, mod.out_features)] += 1

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        module(x)
    for h in handles:
        h.remove()
    return seen


def _task_layers(tasks) -> Counter:
    """The same multiset from the tasks, each counted ``weight`` times."""
    seen: Counter = Counter()
    for t in tasks:
        s = t.shape
        if t.kind == "dense":
            key = ("dense", s["batch"], s["in_features"], s["out_features"])
        else:
            key = (t.kind, s["batch"], s["in_channels"], s["height"], s["width"], s["out_channels"],
                   s["kernel"], s["stride"], s["padding"], s["groups"])
        seen[key] += t.weight
    return seen


# ---- zoo -------------------------------------------------------------------------------------

def test_unknown_model_is_one_line_value_error():
    with pytest.raises(ValueError) as err:
        build_model("resnet50")
    msg = str(err.value)
    assert "\n" not in msg and "'resnet50'" in msg
    assert all(name in msg for name in MODELS)
    with pytest.raises(ValueError, match=r"unknown model 'nope'.*layers"):
        model_tasks({"name": "nope"}, "llvm")
    with pytest.raises(ValueError, match="opencl"):
        make_target("opencl")


def test_build_model_is_deterministic():
    (m1, x1), (m2, x2) = build_model("mobilenet_v1", seed=3), build_model("mobilenet_v1", seed=3)
    assert torch.equal(x1, x2) and x1.shape == (1, 3, 224, 224)
    for p1, p2 in zip(m1.state_dict().values(), m2.state_dict().values()):
        assert torch.equal(p1, p2)
    m3, _ = build_model("mobilenet_v1", seed=4)
    assert not torch.equal(m1.fc.weight, m3.fc.weight)
    with torch.no_grad():
        assert m1(x1).shape == (1, 1000)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_tasks_match_pytorch_layers(name):
    """Every conv/linear layer of the PyTorch model is one occurrence of one task."""
    module, x = build_model(name)
    tasks = _tasks(name)
    assert _task_layers(tasks) == _torch_layers(module, x)
    for t in tasks:
        assert t.target_kind == "llvm" and re.fullmatch(r"[0-9a-f]{12}", t.id)
        assert list(t.mod.functions.keys())[0].name_hint == "main"
    assert len({t.id for t in tasks}) == len(tasks)


# ---- ResNet-18 -------------------------------------------------------------------------------

def _resnet18_expected() -> list[tuple]:
    """(kind, in, out, hw, kernel, stride, pad, epilogue, weight) in model order.

    Residual blocks fuse ``bias add + residual add + relu`` into the second conv; in a
    downsampling block the residual add goes with the 1x1 downsample conv (called after the
    main path), so that block's second conv keeps only its bias add.
    """
    exp = [("conv2d", 3, 64, 224, 7, 2, 3, "add_relu", 1),
           ("conv2d", 64, 64, 56, 3, 1, 1, "add_relu", 2),
           ("conv2d", 64, 64, 56, 3, 1, 1, "add_add_relu", 2)]
    for cin, cout, hw in [(64, 128, 56), (128, 256, 28), (256, 512, 14)]:
        exp += [("conv2d", cin, cout, hw, 3, 2, 1, "add_relu", 1),
                ("conv2d", cout, cout, hw // 2, 3, 1, 1, "add", 1),
                ("conv2d", cin, cout, hw, 1, 2, 0, "add_add_relu", 1),
                ("conv2d", cout, cout, hw // 2, 3, 1, 1, "add_relu", 1),
                ("conv2d", cout, cout, hw // 2, 3, 1, 1, "add_add_relu", 1)]
    return exp


def test_resnet18_tasks_and_weights():
    tasks = _tasks("resnet18")
    convs = [t for t in tasks if t.kind == "conv2d"]
    got = [_conv_key(t) + (_epilogue(t.name), t.weight) for t in convs]
    assert got == _resnet18_expected()
    assert sum(t.weight for t in convs) == 20  # 1 stem + 16 block convs + 3 downsamples
    dense = [t for t in tasks if t.kind == "dense"]
    assert [(t.shape, t.weight, _epilogue(t.name)) for t in dense] == [
        ({"batch": 1, "in_features": 512, "out_features": 1000}, 1, "add")]
    assert tasks[-1].kind == "dense" and len(tasks) == 19


def test_resnet18_flops():
    tasks = _tasks("resnet18")
    layer1 = next(t for t in tasks if t.name.endswith("add1_relu1") and t.shape["height"] == 56)
    assert layer1.flops == 2 * 64 * 56 * 56 * 64 * 3 * 3 == 231_211_008
    stem = tasks[0]
    assert stem.flops == 2 * 64 * 112 * 112 * 3 * 7 * 7
    assert tasks[-1].flops == 2 * 512 * 1000
    conv_flops = sum(t.flops * t.weight for t in tasks if t.kind == "conv2d")
    # The usual "1.8 GFLOPs" of ResNet-18 counts multiply-accumulates; flops = 2 x MACs.
    assert conv_flops / 2 == pytest.approx(1.814e9, rel=0.02)


# ---- MobileNet-v1, VGG-16, AlexNet ------------------------------------------------------------

def test_mobilenet_v1_depthwise_tasks():
    tasks = _tasks("mobilenet_v1")
    dw = [t for t in tasks if t.kind == "depthwise_conv2d"]
    got = [(t.shape["in_channels"], t.shape["height"], t.shape["stride"], t.weight) for t in dw]
    assert got == [(32, 112, 1, 1), (64, 112, 2, 1), (128, 56, 1, 1), (128, 56, 2, 1),
                   (256, 28, 1, 1), (256, 28, 2, 1), (512, 14, 1, 5), (512, 14, 2, 1),
                   (1024, 7, 1, 1)]
    for t in dw:
        s = t.shape
        assert s["groups"] == s["in_channels"] == s["out_channels"] and s["kernel"] == 3
        oh = (s["height"] + 2 - 3) // s["stride"] + 1
        assert t.flops == 2 * s["out_channels"] * oh * oh * 9
    pw = [t for t in tasks if t.kind == "conv2d" and t.shape["kernel"] == 1]
    assert sum(t.weight for t in pw) == 13
    assert sum(t.flops * t.weight for t in tasks) / 2 == pytest.approx(569e6, rel=0.01)


def test_vgg16_conv_shapes():
    tasks = _tasks("vgg16")
    got = [(t.shape["in_channels"], t.shape["out_channels"], t.shape["height"], t.weight)
           for t in tasks if t.kind == "conv2d"]
    assert got == [(3, 64, 224, 1), (64, 64, 224, 1), (64, 128, 112, 1), (128, 128, 112, 1),
                   (128, 256, 56, 1), (256, 256, 56, 2), (256, 512, 28, 1), (512, 512, 28, 2),
                   (512, 512, 14, 3)]
    assert all(t.shape["kernel"] == 3 and t.shape["stride"] == 1 and t.shape["padding"] == 1
               for t in tasks if t.kind == "conv2d")
    assert [(t.shape["in_features"], t.shape["out_features"]) for t in tasks if t.kind == "dense"] \
        == [(25088, 4096), (4096, 4096), (4096, 1000)]
    assert sum(t.flops * t.weight for t in tasks) / 2 == pytest.approx(15.47e9, rel=0.01)


def test_alexnet_conv_shapes():
    tasks = _tasks("alexnet")
    assert [_conv_key(t)[1:] for t in tasks if t.kind == "conv2d"] == [
        (3, 64, 224, 11, 4, 2), (64, 192, 27, 5, 1, 2), (192, 384, 13, 3, 1, 1),
        (384, 256, 13, 3, 1, 1), (256, 256, 13, 3, 1, 1)]
    assert [(t.shape["in_features"], t.shape["out_features"], _epilogue(t.name))
            for t in tasks if t.kind == "dense"] == [
        (9216, 4096, "add_relu"), (4096, 4096, "add_relu"), (4096, 1000, "add")]
    assert all(t.weight == 1 for t in tasks)
    imported = model_tasks({"name": "alexnet"}, "llvm")[1]
    names = [gv.name_hint for gv in imported.mod.get_global_vars()]
    assert not [n for n in names if "transpose" in n]  # Linear weights are stored pre-transposed


def test_same_workload_same_id_across_models():
    """The 4096x4096 dense+relu layer of AlexNet and VGG-16 is one workload."""
    ids = lambda name: {t.id for t in _tasks(name) if t.kind == "dense"}  # noqa: E731
    assert len(ids("alexnet") & ids("vgg16")) == 2  # 4096->4096 (+relu) and 4096->1000


# ---- layers model, cache, ids, cuda -------------------------------------------------------------

LAYER_A = dict(in_channels=8, height=14, width=14, out_channels=16, kernel=3, stride=1, padding=1)
LAYER_B = dict(in_channels=16, height=14, width=14, out_channels=16, kernel=1, stride=2, padding=0,
               relu=False)
LAYER_DW = dict(in_channels=16, height=10, width=10, out_channels=16, kernel=3, stride=2, padding=1,
                groups=16)


def test_layers_model_one_task_per_distinct_layer():
    cfg = {"name": "layers", "layers": [LAYER_A, LAYER_B, dict(LAYER_A), LAYER_DW]}
    tasks, imported = model_tasks(cfg, "llvm")
    assert [(t.kind, t.weight, _epilogue(t.name)) for t in tasks] == [
        ("conv2d", 2, "add_relu"), ("conv2d", 1, "add"), ("depthwise_conv2d", 1, "add_relu")]
    assert tasks[0].shape == {"batch": 1, "in_channels": 8, "height": 14, "width": 14,
                              "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "groups": 1}
    assert tasks[1].shape["stride"] == 2 and tasks[1].flops == 2 * 16 * 7 * 7 * 16
    assert tasks[2].shape["groups"] == 16 and tasks[2].flops == 2 * 16 * 5 * 5 * 9
    module, xs = layers_model(cfg["layers"])
    assert len(xs) == 4 and [tuple(o.shape) for o in module(*xs)] == [
        (1, 16, 14, 14), (1, 16, 7, 7), (1, 16, 14, 14), (1, 16, 5, 5)]
    outs = run_relax(imported)
    for got, ref in zip(outs, imported.torch_output()):
        np.testing.assert_allclose(got, ref, atol=1e-4)


def test_layers_model_rejects_bad_shapes():
    from tunebench.errors import UserError

    with pytest.raises(UserError, match=r"model.layers\[0\] misses height"):
        model_tasks({"name": "layers", "layers": [{"in_channels": 3}]}, "llvm")
    with pytest.raises(UserError, match=r"model.layers=\[\]: must be a non-empty list"):
        model_tasks({"name": "layers", "layers": []}, "llvm")


def test_layers_model_dense_layers():
    """Dense specs become matmul tasks of their shape beside conv tasks; bad dense specs are one line."""
    from tunebench.errors import UserError

    tasks, _ = model_tasks({"name": "layers", "layers": [LAYER_A, {"in_features": 64, "out_features": 10}]}, "llvm")
    dense = [t for t in tasks if t.kind == "dense"]
    assert len(tasks) == 2 and len(dense) == 1
    assert dense[0].shape == {"batch": 1, "in_features": 64, "out_features": 10} and dense[0].flops == 2 * 64 * 10
    with pytest.raises(UserError, match=r"model.layers\[0\] misses out_features; required: in_features, out_features"):
        model_tasks({"name": "layers", "layers": [{"in_features": 8}]}, "llvm")
    with pytest.raises(UserError, match=r"model.layers\[0\].kernel is unknown; valid: in_features, out_features"):
        model_tasks({"name": "layers", "layers": [{"in_features": 8, "out_features": 4, "kernel": 3}]}, "llvm")


def test_model_tasks_cache_is_instant_and_returns_copies():
    cfg = {"name": "layers", "layers": [LAYER_A]}
    first, imp1 = model_tasks(cfg, "llvm")
    t0 = time.perf_counter()
    second, imp2 = model_tasks(dict(cfg), "llvm")
    assert time.perf_counter() - t0 < 0.1
    assert imp1 is imp2 and [t.id for t in first] == [t.id for t in second]
    second[0].shape["kernel"] = 99
    assert model_tasks(cfg, "llvm")[0][0].shape["kernel"] == 3


def test_cuda_extraction_needs_no_gpu():
    cfg = {"name": "layers", "layers": [LAYER_A, LAYER_DW]}
    cuda, _ = model_tasks(cfg, "cuda")
    llvm, _ = model_tasks(cfg, "llvm")
    assert [t.target_kind for t in cuda] == ["cuda", "cuda"]
    assert [t.shape for t in cuda] == [t.shape for t in llvm]
    assert not {t.id for t in cuda} & {t.id for t in llvm}


_ID_SCRIPT = """
import json, sys
from tunebench.targets.tvm.workloads.tasks import model_tasks
cfg = json.loads(sys.argv[1])
print(json.dumps([[t.id, t.name] for t in model_tasks(cfg, sys.argv[2])[0]]))
"""


@pytest.mark.parametrize("target_kind", ["llvm", "cuda"])
def test_task_ids_stable_across_processes(target_kind):
    cfg = {"name": "layers", "layers": [LAYER_A, LAYER_B, LAYER_DW]}
    here = [[t.id, t.name] for t in model_tasks(cfg, target_kind)[0]]
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", _ID_SCRIPT, json.dumps(cfg), target_kind],
                         capture_output=True, text=True, check=True, env=env, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == here


# ---- numerics ------------------------------------------------------------------------------------

def _small_cnn() -> nn.Module:
    """Conv+BN+ReLU, two residual blocks (one downsampling), a depthwise conv+BN, FC."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        BasicBlock(16, 32, 2), BasicBlock(32, 32),
        nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    for m in model.modules():  # non-trivial BN statistics, so folding matters
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model.eval()


def test_run_relax_matches_pytorch_with_bn_folding():
    model, x = _small_cnn(), torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    folded = fold_batchnorm(model)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert type(folded) is type(model)  # a plain module of its own class: it goes to worker processes
    import pickle

    assert isinstance(pickle.loads(pickle.dumps(prepare_for_export(model))), type(model))
    with torch.no_grad():
        ref = model(x).numpy()
        np.testing.assert_allclose(folded(x).numpy(), ref, atol=1e-5)
    imported = import_model(model, x, "llvm")
    out = run_relax(imported, make_target("llvm"))
    assert out.shape == (1, 10)
    assert np.abs(out - ref).max() < 1e-4
    assert not any("batch_norm" in gv.name_hint for gv in imported.mod.get_global_vars())
    tasks = extract_tasks(imported)
    assert [(t.kind, _epilogue(t.name)) for t in tasks] == [
        ("conv2d", "add_relu"), ("conv2d", "add_relu"), ("conv2d", "add"),
        ("conv2d", "add_add_relu"), ("conv2d", "add_relu"), ("conv2d", "add_add_relu"),
        ("depthwise_conv2d", "add_relu"), ("dense", "add")], [t.name for t in tasks]


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v1"])
def test_zoo_model_runs_like_pytorch(name):
    """The whole fused model (untuned TIR) against the original, unfolded PyTorch model."""
    module, x = build_model(name)
    with torch.no_grad():
        ref = module(x).numpy()
    out = run_relax(model_tasks({"name": name}, "llvm")[1])
    assert out.shape == (1, 1000) and np.abs(out - ref).max() < 1e-4


# ---- YOLO-v1 and OverFeat ([Zheng-ASPLOS20] §6.6) ------------------------------------------------

def test_yolo_v1_distinct_convolutions_are_the_c2d_suite():
    from tunebench.datasets.operators import OPERATORS

    module, x = build_model("yolo_v1")
    seen = _torch_layers(module, x)
    convs = [k for k in seen if k[0] == "conv2d"]
    assert sum(seen[k] for k in convs) == 24 and len(convs) == 15
    got = {(c, h, k_out, k, s, p) for _, _, c, h, _, k_out, k, s, p, _ in convs}
    want = {(c["in_channels"], c["height"], c["out_channels"], c["kernel"], c["stride"], c["padding"])
            for c in OPERATORS["c2d"].cases}
    assert got == want
    assert [k[2:] for k in seen if k[0] == "dense"] == [(50176, 4096), (4096, 1470)]


def test_overfeat_layers():
    module, x = build_model("overfeat")
    seen = _torch_layers(module, x)
    assert [k[2:5] + k[5:8] for k in seen if k[0] == "conv2d"] == [
        (3, 231, 231, 96, 11, 4), (96, 28, 28, 256, 5, 1), (256, 12, 12, 512, 3, 1), (512, 12, 12, 1024, 3, 1),
        (1024, 12, 12, 1024, 3, 1)]
    assert [k[2:] for k in seen if k[0] == "dense"] == [(36864, 3072), (3072, 4096), (4096, 1000)]
