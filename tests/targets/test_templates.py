"""Tests of the tuning templates (tunebench.targets.tvm.templates); CPU only, except ``gpu``-marked.

Workloads are real fused Relax tasks of a tiny PyTorch model (imported once per module) plus
TE functions that mimic the Relax structure (pad_temp -> main block -> epilogues, int64 shapes)
for VGG-sized layers whose spaces are only sized, never run.

The CUDA schedules are also checked numerically without a GPU: every thread-bound loop of a
scheduled function is turned into a serial loop and the result is run on llvm. This is exact
for these templates because each (serial) thread iteration fills its whole shared tile before
reading it, so the serial program computes what the kernel computes.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import tvm

from tunebench.targets.tvm.templates import TEMPLATE_KINDS, analyze, get_template
from tunebench.targets.tvm.templates.cpu_packed import CpuConv2dPacked
from tvm_helpers import (
    CUDA,
    LIMITS,
    LLVM,
    assert_close,
    conv_te,
    dense_te,
    random_args,
    run_llvm,
    sample_configs,
    serialize_gpu_schedule,
)

LABELS = ("conv3x3_res", "conv1x1_s2", "conv7x7_s2", "dw3x3_s2", "dense")


# ---- workloads -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def relax_tasks() -> dict:
    """The fused tasks of a small CNN, by label (each kind the harness meets)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    import tvm.s_tir.meta_schedule as ms
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c7 = nn.Conv2d(3, 8, 7, stride=2, padding=3)
            self.c3 = nn.Conv2d(8, 8, 3, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
            self.pw = nn.Conv2d(8, 16, 1, stride=2, bias=False)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = torch.relu(self.c7(x))
            y = torch.relu(self.c3(y) + y)
            y = torch.relu(self.dw(y))
            return self.fc(self.pw(y).mean((2, 3)))

    ep = torch.export.export(Net().eval(), (torch.randn(1, 3, 32, 32),))
    mod, _ = relax.frontend.detach_params(from_exported_program(ep, keep_params_as_input=True))
    passes = tvm.transform.Sequential([
        relax.transform.DecomposeOpsForInference(), relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
        relax.transform.FuseOps(), relax.transform.FuseTIR()])
    with LLVM:
        fused = passes(mod)
    out = {}
    for task in ms.relax_integration.extract_tasks(fused, LLVM):
        task_mod = task.dispatched[0]
        try:
            info = analyze(task_mod)
        except ValueError:  # transpose, mean, reshape: not tunable
            continue
        if info.kind == "dense":
            out["dense"] = task_mod
        elif info.kind == "depthwise_conv2d":
            out["dw3x3_s2"] = task_mod
        else:
            out[{7: "conv7x7_s2", 3: "conv3x3_res", 1: "conv1x1_s2"}[info.extents["ry"]]] = task_mod
    assert sorted(out) == sorted(LABELS)
    return out


# ---- registry and analysis -----------------------------------------------------------------

def test_get_template_resolves_every_kind():
    assert len(TEMPLATE_KINDS) == 12
    for (task_kind, target_kind, variant), cls in TEMPLATE_KINDS.items():
        tpl = get_template(task_kind, target_kind, variant)
        assert isinstance(tpl, cls) and (tpl.task_kind, tpl.target_kind) == (task_kind, target_kind)
    assert isinstance(get_template("conv2d", "llvm"), CpuConv2dPacked)  # the default variant
    with pytest.raises(ValueError, match="valid: packed, nchw"):
        get_template("conv2d", "llvm", "winograd")


@pytest.mark.parametrize("args, bad", [(("conv3d", "llvm"), "conv3d"), (("dense", "rocm"), "rocm")])
def test_get_template_unknown_kind(args, bad):
    with pytest.raises(ValueError, match=bad) as err:
        get_template(*args)
    assert "depthwise_conv2d" in str(err.value) or "cuda" in str(err.value)


def test_analyze_relax_tasks(relax_tasks):
    res = analyze(relax_tasks["conv3x3_res"])
    assert (res.kind, res.pad, res.padded) == ("conv2d", "pad_temp", True)
    assert res.epilogues == ("T_add", "T_add1", "compute")
    assert res.extents == {"n": 1, "f": 8, "y": 16, "x": 16, "rc": 8, "ry": 3, "rx": 3} and res.strides == (1, 1)
    pw = analyze(relax_tasks["conv1x1_s2"])
    assert (pw.padded, pw.epilogues, pw.strides) == (False, (), (2, 2))
    assert analyze(relax_tasks["conv7x7_s2"]).strides == (2, 2)
    dw = analyze(relax_tasks["dw3x3_s2"])
    assert (dw.kind, dw.extents["rc"], dw.strides) == ("depthwise_conv2d", 1, (2, 2))
    fc = analyze(relax_tasks["dense"])
    assert (fc.kind, fc.extents, fc.epilogues) == ("dense", {"y": 1, "x": 10, "k": 16}, ("T_add",))
    assert (fc.data_read, fc.weight_read) == (0, 1)


def test_template_rejects_other_kind(relax_tasks):
    with pytest.raises(ValueError, match="dense"):
        get_template("conv2d", "llvm").make_space(relax_tasks["dense"])


# ---- spaces --------------------------------------------------------------------------------

def test_vgg16_conv1_1_cuda_direct_space_size():
    mod = conv_te(1, 3, 224, 224, 64, 3, pad=1)
    space = get_template("conv2d", "cuda").make_space(mod)
    assert space.names == ("tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx",
                           "auto_unroll_max_step", "unroll_explicit")
    assert space.size == 202_309_632


def test_cuda_space_knobs(relax_tasks):
    dw = get_template("depthwise_conv2d", "cuda").make_space(relax_tasks["dw3x3_s2"])
    assert dw.names == ("tile_f", "tile_y", "tile_x", "auto_unroll_max_step", "unroll_explicit")
    assert dw.knobs[3].values == (0, 256, 1500)
    fc = get_template("dense", "cuda").make_space(relax_tasks["dense"])  # batch 1: the split-K GEMV template
    assert fc.names == ("threads_k", "threads_n", "vector", "k_inner", "auto_unroll_max_step")
    assert [len(k.entities) for k in fc.knobs] == [5, 6, 2, 4, 4]
    tiled = get_template("dense", "cuda").make_space(dense_te(2, 16, 10))
    assert tiled.names == ("tile_y", "tile_x", "tile_k", "auto_unroll_max_step", "unroll_explicit")
    assert [len(k.entities) for k in tiled.knobs] == [4, 16, 5, 3, 2]


@pytest.mark.parametrize("kind, mod", [
    ("conv2d", lambda: conv_te(1, 3, 224, 224, 64, 3, pad=1)),
    ("conv2d", lambda: conv_te(1, 256, 56, 56, 256, 3, pad=1)),
    ("conv2d", lambda: conv_te(1, 512, 14, 14, 512, 3, pad=1)),
    ("depthwise_conv2d", lambda: conv_te(1, 512, 14, 14, 512, 3, pad=1, depthwise=True)),
    ("dense", lambda: dense_te(1, 25088, 4096)),
])
def test_cpu_spaces_are_reasonable(kind, mod):
    space = get_template(kind, "llvm", "nchw").make_space(mod())
    assert 1 < space.size <= 1_000_000
    assert space.names[-2:] == ("order", "unroll_kw")
    packed = get_template(kind, "llvm", "packed").make_space(mod())
    assert 1 < packed.size <= 1_000_000
    want = {"conv2d": ("tile_ic", "tile_oc", "tile_ow", "unroll_kw"), "dense": ("tile_y", "tile_x", "tile_k"),
            "depthwise_conv2d": space.names}[kind]
    assert packed.names == want


# ---- llvm: scheduled output == unscheduled output --------------------------------------------

@pytest.mark.parametrize("variant", ["packed", "nchw", "flex"])
@pytest.mark.parametrize("label", LABELS)
def test_cpu_template_matches_reference(relax_tasks, label, variant):
    mod = relax_tasks[label]
    tpl = get_template(analyze(mod).kind, "llvm", variant)
    space = tpl.make_space(mod)
    args = random_args(mod, seed=0)
    ref = run_llvm(mod, args)
    for cfg in sample_configs(space, 4, seed=1):
        assert tpl.check(mod, cfg, LIMITS) is None and tpl.verify(mod, LIMITS) is None
        assert_close(run_llvm(tpl.apply(mod, cfg), args), ref)


@pytest.mark.parametrize("variant", ["packed", "nchw", "flex"])
def test_cpu_dense_batch_without_bias(variant):
    mod = dense_te(4, 24, 20, bias=False)
    tpl = get_template("dense", "llvm", variant)
    args = random_args(mod, seed=2)
    ref = run_llvm(mod, args)
    assert_close(ref, args[0] @ args[1])
    for cfg in sample_configs(tpl.make_space(mod), 4, seed=3):
        assert_close(run_llvm(tpl.apply(mod, cfg), args), ref)


# ---- cuda: lowering, codegen, checks -------------------------------------------------------

@pytest.mark.parametrize("variant", ["direct", "flex"])
@pytest.mark.parametrize("label", LABELS)
def test_cuda_template_codegen_and_serial_numerics(relax_tasks, label, variant):
    mod = relax_tasks[label]
    tpl = get_template(analyze(mod).kind, "cuda", variant)
    space = tpl.make_space(mod)
    args = random_args(mod, seed=0)
    ref = run_llvm(mod, args)
    for cfg in sample_configs(space, 3, seed=4):
        sched = tpl.apply(mod, cfg)
        by_knobs, lowered = tpl.check(mod, cfg, LIMITS) is None, tpl.verify(sched, LIMITS) is None
        # flex checks threads from its knobs; shared memory only after lowering
        assert by_knobs == lowered if variant == "direct" else by_knobs or not lowered
        source = tvm.compile(sched, target=CUDA).mod.imports[0].inspect_source()
        if label == "dense" and variant == "direct":  # batch 1: split-K GEMV, a warp reduction where K is split
            assert "__global__" in source and ("__shfl_down_sync" in source) == (cfg["threads_k"] > 1)
        else:
            assert "__global__" in source and "__shared__" in source and "__syncthreads" in source
        assert_close(run_llvm(serialize_gpu_schedule(sched), args), ref)


def test_cuda_source_compiles_with_nvcc(relax_tasks):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    from tvm.support import nvcc

    mod = relax_tasks["conv3x3_res"]
    tpl = get_template("conv2d", "cuda")
    cfg = tpl.make_space(mod).from_dict({
        "tile_f": [1, 2, 4, 1], "tile_y": [2, 1, 8, 1], "tile_x": [1, 2, 8, 1], "tile_rc": [4, 2],
        "tile_ry": [1, 3], "tile_rx": [3, 1], "auto_unroll_max_step": 512, "unroll_explicit": 1})
    source = tvm.compile(tpl.apply(mod, cfg), target=CUDA).mod.imports[0].inspect_source()
    with CUDA:
        ptx = nvcc.compile_cuda(source, target_format="ptx", arch="sm_80", compiler="nvcc")
    assert b".entry" in bytes(ptx)


def test_cuda_check_rejects_too_many_threads_and_too_much_shared_memory():
    mod = conv_te(1, 64, 56, 56, 64, 3, pad=1)
    tpl = get_template("conv2d", "cuda")
    space = tpl.make_space(mod)
    base = {"tile_rc": [8, 8], "tile_ry": [1, 3], "tile_rx": [3, 1], "auto_unroll_max_step": 512,
            "unroll_explicit": 1}
    sane = space.from_dict({**base, "tile_f": [4, 2, 8, 1], "tile_y": [7, 1, 8, 1], "tile_x": [7, 2, 4, 1]})
    many_threads = space.from_dict({**base, "tile_f": [1, 1, 64, 1], "tile_y": [14, 1, 4, 1],
                                    "tile_x": [7, 1, 8, 1]})  # 64 * 4 * 8 = 2048 threads
    big_shared = space.from_dict({**base, "tile_rc": [1, 64], "tile_f": [1, 4, 4, 4],
                                  "tile_y": [1, 8, 7, 1], "tile_x": [1, 8, 7, 1]})  # 64*58*56 floats

    assert tpl.check(mod, sane, LIMITS) is None
    assert tpl.verify(tpl.apply(mod, sane), LIMITS) is None
    err = tpl.check(mod, many_threads, LIMITS)
    assert err is not None and "2048 threads per block" in err
    assert "threads per block" in tpl.verify(tpl.apply(mod, many_threads), LIMITS)
    err = tpl.check(mod, big_shared, LIMITS)
    assert err is not None and "shared memory" in err
    assert "shared memory" in tpl.verify(tpl.apply(mod, big_shared), LIMITS)
    vthreads = space.from_dict({**base, "tile_f": [1, 16, 4, 1], "tile_y": [56, 1, 1, 1],
                                "tile_x": [14, 1, 4, 1]})
    assert "vthread.z extent 16 > max_vthread=8" == tpl.check(mod, vthreads, LIMITS)
    assert tpl.verify(tpl.apply(mod, vthreads), LIMITS) == tpl.check(mod, vthreads, LIMITS)


@pytest.mark.parametrize("kind, make", [
    ("conv2d", lambda: conv_te(2, 32, 28, 28, 64, 3, stride=2, pad=1)),
    ("depthwise_conv2d", lambda: conv_te(1, 64, 56, 56, 64, 3, stride=2, pad=1, depthwise=True)),
    ("dense", lambda: dense_te(8, 512, 1000)),
])
def test_cuda_verify_agrees_with_check(kind, make):
    """On random configs, check (knobs only) and verify (lowered code) give the same verdict,
    also under a tight shared-memory limit; the shared bytes are computed exactly."""
    mod = make()
    tpl = get_template(kind, "cuda")
    tight = dict(LIMITS, max_shared_memory_per_block=4096)
    n_invalid = 0
    for cfg in sample_configs(tpl.make_space(mod), 8, seed=5):
        sched = tpl.apply(mod, cfg)
        for limits in (LIMITS, tight):
            by_knobs, by_code = tpl.check(mod, cfg, limits), tpl.verify(sched, limits)
            assert by_knobs == by_code, cfg.to_dict()
            n_invalid += by_knobs is not None
    assert n_invalid > 0


# ---- real GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("label", LABELS)
def test_cuda_template_runs_on_gpu(relax_tasks, label):
    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA GPU")
    mod = relax_tasks[label]
    tpl = get_template(analyze(mod).kind, "cuda")
    args = random_args(mod, seed=0)
    ref = run_llvm(mod, args)
    dev = tvm.cuda(0)
    target = tvm.target.Target({"kind": "cuda"}, host=LLVM)
    for cfg in sample_configs(tpl.make_space(mod), 4, seed=6):
        if tpl.check(mod, cfg, LIMITS) is not None:
            continue
        arrays = [tvm.runtime.tensor(a, dev) for a in args[:-1]] + [tvm.runtime.tensor(np.zeros_like(ref), dev)]
        tvm.compile(tpl.apply(mod, cfg), target=target)["main"](*arrays)
        assert_close(arrays[-1].numpy(), ref)


def test_space_sizes_are_products(relax_tasks):
    for _label, mod in relax_tasks.items():
        for target_kind in ("llvm", "cuda"):
            space = get_template(analyze(mod).kind, target_kind).make_space(mod)
            assert space.size == math.prod(len(k.entities) for k in space.knobs)


def test_packed_kernel_takes_packed_weights(relax_tasks):
    """What is timed (the kernel taking its weights packed, the packing removed) computes the same
    as the checked function (which packs inside): weights packed here by the documented layouts."""
    from tunebench.targets.tvm.templates.fused import prepacked

    for label in ("conv3x3_res", "dense"):
        mod = relax_tasks[label]
        tpl = get_template(analyze(mod).kind, "llvm", "packed")
        args = random_args(mod, seed=4)
        ref = run_llvm(mod, args)
        for cfg in sample_configs(tpl.make_space(mod), 3, seed=5):
            w = args[1]
            if label == "dense":  # W[K, N] -> [N / bn, K, bn]
                bn = cfg["tile_x"][2]
                packed = w.reshape(w.shape[0], -1, bn).transpose(1, 0, 2)
            else:  # W[O, I, KH, KW] -> [O / oc_bn, I / ic_bn, KH, KW, ic_bn, oc_bn]
                ic, oc = cfg["tile_ic"][1], cfg["tile_oc"][1]
                o, i, kh, kw = w.shape
                packed = w.reshape(o // oc, oc, i // ic, ic, kh, kw).transpose(0, 2, 4, 5, 3, 1)
            timed = prepacked(tpl.apply(mod, cfg))
            assert tuple(int(d) for d in timed["main"].params[1].ty.shape) == packed.shape
            assert_close(run_llvm(timed, [args[0], np.ascontiguousarray(packed), *args[2:]]), ref)


# ---- the packed conv2d with padded output channels ----------------------------------------------

@pytest.mark.parametrize("shape", [
    dict(c=5, f=7, k=3, pad=1, bias=True, relu=True),  # a prime: no vector block but 1 or 7
    dict(c=7, f=17, k=1, pad=0, bias=False, relu=False),  # a prime, no epilogue (the output copy)
    dict(c=3, f=23, k=5, stride=2, pad=2, bias=True, relu=False),
])
def test_padded_output_channels_compute_the_same(shape):
    """A layer whose output channels have no divisor of 8 to 64: tile_oc splits the count padded to a
    multiple of 16, every sampled config computes the unpadded function's output."""
    from tunebench.targets.tvm.templates.cpu_packed_pad import CpuConv2dPackedPadded

    mod = conv_te(1, shape.pop("c"), 10, 10, shape["f"], shape.pop("k"), **{k: v for k, v in shape.items() if k != "f"})
    tpl = get_template("conv2d", "llvm", "packed")
    assert isinstance(tpl, CpuConv2dPackedPadded) and tpl.source_class(mod) is CpuConv2dPackedPadded
    space = tpl.make_space(mod)
    assert space.knobs[1].name == "tile_oc" and space.knobs[1].length == (16 if shape["f"] < 17 else 32)
    args = random_args(mod, seed=2)
    ref = run_llvm(mod, args)
    for cfg in [*sample_configs(space, 4, seed=3), space.get(space.size - 1)]:
        assert_close(run_llvm(tpl.apply(mod, cfg), args), ref)


def test_channels_with_a_vector_divisor_keep_the_packed_template_unchanged(relax_tasks):
    """Layers that need no padding get CpuConv2dPacked's space and the same scheduled modules (the
    measured spaces of such layers stay valid: their template's source is what they recorded)."""
    mod = relax_tasks["conv3x3_res"]
    tpl, base = get_template("conv2d", "llvm", "packed"), CpuConv2dPacked()
    assert tpl.source_class(mod) is CpuConv2dPacked
    space = tpl.make_space(mod)
    assert [k.describe() for k in space.knobs] == [k.describe() for k in base.make_space(mod).knobs]
    for cfg in sample_configs(space, 3, seed=7):
        tvm.ir.assert_structural_equal(tpl.apply(mod, cfg), base.apply(mod, cfg))


def test_which_channel_counts_are_padded():
    from tunebench.targets.tvm.templates.cpu_packed_pad import needs_padding, padded

    assert [f for f in (7, 11, 12, 24, 45, 53, 64, 71, 100, 134, 200, 512) if needs_padding(f)] == [7, 53, 71, 134]
    assert (padded(71), padded(134), padded(7)) == (80, 144, 16)


def test_a_measured_space_names_the_source_that_schedules_its_layer():
    """A padded layer's space records cpu_packed_pad.py, an unpadded one cpu_packed.py (replay checks that
    file's sha256)."""
    from conftest import target_settings
    from tunebench.targets import make_target
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    conv = {"in_channels": 5, "height": 10, "width": 10, "kernel": 3, "stride": 1, "padding": 1}
    tasks, _ = model_tasks({"name": "layers", "layers": [{**conv, "out_channels": 7}, {**conv, "out_channels": 16}]},
                           "llvm")
    target = make_target(target_settings("llvm"))
    assert [target.space_facts(t)["template_file"] for t in tasks] == [
        "targets/tvm/templates/cpu_packed_pad.py", "targets/tvm/templates/cpu_packed.py"]
