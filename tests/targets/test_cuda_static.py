"""``target=cuda`` without a GPU: the GPU's limits from a TVM target tag (``target.tag``), the target's static
check of proposed configs (the loop measures none it rejects), and CUDA code generation of every CUDA template
on configs that pass it, the kernels' numbers checked against PyTorch with their thread loops run serially on
llvm (:func:`tvm_helpers.serialize_gpu_schedule`)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm

from conftest import measure_settings, target_settings
from tunebench.errors import UserError
from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.search_space import TraceConfig
from tunebench.targets.base import is_static_invalid
from tunebench.targets.tvm.cuda import CUDATarget
from tunebench.targets.tvm.gpu_limits import tag_gpu, tag_limits, tag_problem, tightest
from tunebench.targets.tvm.templates import get_template
from tunebench.task import Task
from tunebench.testing.fakes import FakeTarget
from tvm_helpers import conv_te, dense_te, random_args, run_llvm, serialize_gpu_schedule

H100 = "nvidia/nvidia-h100"
H100_LIMITS = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "max_thread_x": 1024,
               "max_thread_y": 1024, "max_thread_z": 64, "max_vthread": 8}


class TagOnlyCUDATarget(CUDATarget):
    """``target=cuda`` whose GPU is described by ``target.tag`` alone: what the target decides without a GPU
    (its limits, its static check). Nothing can be measured on it."""

    def _probe_local(self) -> None:
        self._set_gpu(tag_gpu(self.settings.tag), "no GPU")
        self.device_spec = [self.device_type, self.device_id]
        self.device_key = "tag-only"


@pytest.fixture
def h100(tmp_path) -> CUDATarget:
    return TagOnlyCUDATarget(target_settings("cuda", tag=H100, lock_dir=str(tmp_path)),
                             measure_settings(cache_dir=str(tmp_path)))


def _task(mod, kind: str, template: str = "direct") -> Task:
    task = Task(id=f"{kind}-{template}", name=f"{kind}_{template}", kind=kind, mod=mod, shape={}, flops=1,
                target_kind="cuda", template=template)
    task.space = get_template(kind, "cuda", template).make_space(mod)
    return task


def _passing(target: CUDATarget, task: Task, n: int, seed: int = 0) -> list:
    """``n`` random configs of ``task`` that pass the target's static check."""
    rng = np.random.default_rng(seed)
    out = [task.space.get(i) for i in task.space.sample(rng, 60) if target.static_check(task, task.space.get(i)) is None]
    assert len(out) >= n
    return out[:n]


# ---- the limits of a tag -------------------------------------------------------------------

def test_h100_tag_limits_and_target():
    assert tag_limits(H100) == H100_LIMITS
    gpu = tag_gpu(H100)
    assert (gpu["compute_version"], gpu["warp_size"], gpu["max_thread_dimensions"]) == ("9.0", 32, [1024, 1024, 64])
    assert tightest({"a": 1, "b": 5}, {"b": 3, "c": 2}) == {"a": 1, "b": 3, "c": 2}


def test_the_tag_knob_takes_a_cuda_tag_of_this_tvm():
    assert target_settings("cuda", tag=H100).tag == H100
    assert target_settings("cuda").tag is None
    with pytest.raises(UserError, match=r"target.tag='nvidia/h100': not a target tag of TVM .*e.g. nvidia/"
                                        r"nvidia-h100.*; list them all: python -c .*tvm.target.tag.list_tags\(\)") as err:
        target_settings("cuda", tag="nvidia/h100")
    assert "\n" not in str(err.value)
    assert "of a llvm target" in tag_problem("aws/cpu/c5.12xlarge")


def test_the_target_takes_its_limits_from_the_tag(h100):
    assert h100.limits == H100_LIMITS
    assert h100.tvm_target["arch"] == "sm_90" and h100.device["tag"] == H100
    assert h100.info.details["tag"] == H100


def test_the_device_limits_still_apply_and_its_compute_capability_must_match(h100):
    smaller = {**tag_gpu(H100), "name": "a GPU", "max_shared_memory_per_block": 32768, "max_threads_per_block": 512}
    h100._set_gpu(smaller, "host")
    assert h100.limits == {**H100_LIMITS, "max_shared_memory_per_block": 32768, "max_threads_per_block": 512}
    assert h100.tvm_target["max_shared_memory_per_block"] == 32768
    with pytest.raises(UserError, match=r"target.tag=nvidia/nvidia-h100: a GPU of compute capability 9.0, but the GPU "
                                        r"found \(NVIDIA A100\) has 8.0"):
        h100._set_gpu({**tag_gpu(H100), "name": "NVIDIA A100", "compute_version": "8.0"}, "host")


# ---- the static check ----------------------------------------------------------------------

RESNET18_LAYERS = {  # ResNet-18's conv2 3x3, a strided 3x3, its 1x1 downsample, and its fc layer
    "conv3x3": ("conv2d", lambda: conv_te(1, 64, 56, 56, 64, 3, pad=1)),
    "conv3x3_s2": ("conv2d", lambda: conv_te(1, 128, 28, 28, 256, 3, stride=2, pad=1)),
    "conv1x1_s2": ("conv2d", lambda: conv_te(1, 64, 56, 56, 128, 1, stride=2, relu=False)),
    "dense": ("dense", lambda: dense_te(1, 512, 1000)),
}


@pytest.mark.parametrize("layer", list(RESNET18_LAYERS))
def test_static_check_is_the_templates_check_under_the_tags_limits(h100, layer):
    kind, make = RESNET18_LAYERS[layer]
    task = _task(make(), kind)
    tpl = get_template(kind, "cuda")
    verdicts = [h100.static_check(task, task.space.get(i)) for i in task.space.sample(np.random.default_rng(0), 200)]
    expected = [tpl.check(task.mod, task.space.get(i), H100_LIMITS)
                for i in task.space.sample(np.random.default_rng(0), 200)]
    assert verdicts == expected
    low = 0.1 if kind == "dense" else 0.3  # batch-1 dense (split-K GEMV): only threads_k * threads_n > 1024
    assert low < np.mean([v is not None for v in verdicts]) < 1.0  # uniform sampling wastes many trials here
    assert h100.static_check(task, TraceConfig(0, "[]")) is None  # a MetaSchedule trace: checked when built


def test_flex_static_check_verifies_the_lowered_kernel():
    """The flex template's knobs do not tell its shared memory: the static check lowers the kernel."""
    mod = conv_te(1, 16, 14, 14, 32, 3, pad=1)
    tpl = get_template("conv2d", "cuda", "flex")
    space = tpl.make_space(mod)
    tight = {**H100_LIMITS, "max_shared_memory_per_block": 1024}
    caught = 0
    for i in space.sample(np.random.default_rng(3), 30):
        cfg = space.get(i)
        if tpl.check(mod, cfg, tight) is None:
            verdict = tpl.static_check(mod, cfg, tight)
            assert verdict == tpl.verify(tpl.apply(mod, cfg), tight)
            caught += verdict is not None and "shared memory" in verdict
    assert caught > 0


@pytest.mark.parametrize("method", ["random", "autotvm"])
def test_the_loop_measures_no_config_the_cuda_check_rejects(h100, method):
    """On ResNet-18's conv2 under the H100's limits: nothing statically invalid is measured, and what was
    rejected took no trial (the measuring is a stand-in: no GPU here)."""
    task = _task(RESNET18_LAYERS["conv3x3"][1](), "conv2d")
    measured = FakeTarget(latency=lambda c: 1e-3 * (1 + c.index % 97), static=lambda c: h100.static_check(task, c))
    settings = {"name": method} if method == "random" else {"name": method, "plan_size": 8}
    res = tune_task(task, make_method(settings), measured, Budget(16), np.random.default_rng(0))
    assert len(res.measurements) == 16 and all(m.valid for m in res.measurements)
    assert all(h100.static_check(task, task.space.get(i)) is None for i in measured.measured)
    assert res.static_rejected and all(is_static_invalid(m) for m in res.static_rejected)


# ---- CUDA code generation and serial numerics ----------------------------------------------

def _torch_reference(kind: str, args: list[np.ndarray], stride: int = 1, pad: int = 0) -> np.ndarray:
    """What the workload computes, by PyTorch: conv2d (+ bias, relu) or dense (+ bias)."""
    torch = pytest.importorskip("torch")
    t = [torch.from_numpy(a) for a in args[:-1]]
    if kind == "dense":
        return (t[0] @ t[1] + t[2]).numpy()
    groups = t[0].shape[1] if kind == "depthwise_conv2d" else 1
    out = torch.nn.functional.conv2d(t[0], t[1], t[2].reshape(-1), stride=stride, padding=pad, groups=groups)
    return torch.relu(out).numpy()


SMALL = {  # (kind, workload, stride, pad): small enough to run serially in a second
    "conv2d": ("conv2d", lambda: conv_te(1, 16, 14, 14, 32, 3, pad=1), 1, 1),
    "depthwise_conv2d": ("depthwise_conv2d", lambda: conv_te(1, 32, 14, 14, 32, 3, stride=2, pad=1,
                                                            depthwise=True), 2, 1),
    "dense": ("dense", lambda: dense_te(2, 64, 48), 1, 0),
}


@pytest.mark.parametrize("template", ["direct", "flex"])
@pytest.mark.parametrize("label", list(SMALL))
def test_cuda_codegen_for_the_h100_and_serial_numerics(h100, label, template):
    """Configs that pass the static check compile to CUDA for the tag's sm_90a (no GPU, no nvcc) and,
    run serially on llvm, compute what PyTorch computes."""
    kind, make, stride, pad = SMALL[label]
    task = _task(make(), kind, template)
    tpl = get_template(kind, "cuda", template)
    args = random_args(task.mod, seed=0)
    ref = _torch_reference(kind, args, stride, pad)
    for cfg in _passing(h100, task, 2, seed=1):
        sched = tpl.apply(task.mod, cfg)
        source = tvm.compile(sched, target=tvm.target.Target(H100)).mod.imports[0].inspect_source()
        assert "__global__" in source and "__shared__" in source and "__syncthreads" in source
        np.testing.assert_allclose(run_llvm(serialize_gpu_schedule(sched), args), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layer", list(RESNET18_LAYERS))
def test_cuda_codegen_of_resnet18_sized_configs(h100, layer):
    """The full-sized layers: their statically valid configs generate CUDA kernels for the H100."""
    kind, make = RESNET18_LAYERS[layer]
    task = _task(make(), kind)
    tpl = get_template(kind, "cuda")
    for cfg in _passing(h100, task, 2, seed=2):
        source = tvm.compile(tpl.apply(task.mod, cfg), target=tvm.target.Target(H100)).mod.imports[0].inspect_source()
        assert "__global__" in source
        assert "__shared__" in source if kind != "dense" else "threadIdx.x" in source  # batch 1: split-K GEMV
