"""Glimpse's GPU side: the datasheet table (data/glimpse/gpus.csv), its features and device-name matching, and
the static validity of CUDA configs under a tag's limits (CPU only: lowering needs no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm

from tunebench.errors import UserError
from tunebench.methods.tensor_programs.glimpse import gpu_specs
from tunebench.methods.tensor_programs.glimpse.gpu_validity import cuda_tasks, static_labels, tag_limits
from tunebench.targets.tvm.gpu_limits import STATIC_SHARED_BYTES

REQUIRED = ("nvidia/nvidia-titan-xp", "nvidia/geforce-rtx-2070", "nvidia/geforce-rtx-2080-ti",
            "nvidia/geforce-rtx-3090", "nvidia/nvidia-h100", "nvidia/nvidia-a100", "nvidia/nvidia-v100",
            "nvidia/nvidia-t4")
RTX3090 = "nvidia/geforce-rtx-3090"


# ---- the datasheet table --------------------------------------------------------------------

def test_every_row_is_a_tvm_tag_and_the_table_spans_generations():
    table = gpu_specs.gpu_table()
    tags = [s.tag for s in table]
    assert len(table) >= 40 and len(set(tags)) == len(tags)
    assert set(s.tvm_tag for s in table) <= set(tvm.target.tag.list_tags())
    assert [s.tag for s in table if s.tvm_tag != s.tag] == ["nvidia/nvidia-h200"]  # TVM 0.27 has no H200 tag
    assert set(REQUIRED) <= set(tags)
    majors = {int(s.compute_capability) for s in table}
    assert {2, 3, 5, 6, 7, 8, 9} <= majors and max(majors) >= 10  # Fermi .. Hopper and Blackwell


def test_rows_are_consistent():
    for s in gpu_specs.gpu_table():
        assert s.fp32_gflops == pytest.approx(2 * s.cuda_cores * s.boost_clock_mhz / 1000, abs=0.051), s.tag
        assert s.cuda_cores // s.sm_count in (32, 48, 64, 128, 192) and s.cuda_cores % s.sm_count == 0, s.tag
        assert s.base_clock_mhz is None or s.base_clock_mhz <= s.boost_clock_mhz, s.tag
        assert s.memory_gb > 0 and s.memory_bandwidth_gbs > 0 and s.tdp_w > 0 and s.source, s.tag
        assert s.warp_size == 32 and s.max_threads_per_block == 1024, s.tag
    h100 = gpu_specs.spec_for_tag("nvidia/nvidia-h100")
    assert (h100.sm_count, h100.cuda_cores, h100.arch, h100.compute_capability) == (132, 16896, "sm_90a", 9.0)
    assert h100.l2_bytes == 50 * 2**20 and gpu_specs.spec_for_tag(RTX3090).l2_bytes == 0  # tag lacks it


def test_unknown_tag_is_an_error_naming_it(tmp_path):
    path = tmp_path / "gpus.csv"
    path.write_text(",".join(gpu_specs.COLUMNS) + "\nnvidia/no-such-gpu,X,1,128,,1000,1,10,256.0,10,made up,\n")
    with pytest.raises(UserError, match="nvidia/no-such-gpu"):
        gpu_specs.gpu_table(str(path))
    with pytest.raises(UserError, match="nvidia/no-such-gpu"):
        gpu_specs.spec_for_tag("nvidia/no-such-gpu")
    path.write_text(",".join(gpu_specs.COLUMNS) + "\nnvidia/new-gpu,Y,1,128,,1000,1,10,256.0,10,made up,nvidia/no-such-gpu\n")
    with pytest.raises(UserError, match="nvidia/no-such-gpu"):  # limits_from must be a tag of this TVM
        gpu_specs.gpu_table(str(path))


def test_a_gpu_without_a_tvm_tag_takes_the_limits_of_the_gpu_it_shares_its_die_with():
    h200, h100 = gpu_specs.spec_for_device_name("NVIDIA H200"), gpu_specs.spec_for_tag("nvidia/nvidia-h100")
    assert (h200.tag, h200.tvm_tag, h100.tvm_tag) == ("nvidia/nvidia-h200", "nvidia/nvidia-h100", "nvidia/nvidia-h100")
    assert (h200.arch, h200.max_shared_memory_per_block, h200.l2_bytes) == (h100.arch, h100.max_shared_memory_per_block,
                                                                           h100.l2_bytes)
    assert (h200.memory_gb, h200.memory_bandwidth_gbs) == (141, 4800) and h100.memory_bandwidth_gbs == 3350
    assert gpu_specs.spec_for_device_name("NVIDIA H200 NVL") is None  # another board


def test_features_are_finite_and_tell_gpus_apart():
    table = gpu_specs.gpu_table()
    X = np.stack([gpu_specs.gpu_features(s) for s in table])
    assert X.shape == (len(table), len(gpu_specs.FEATURES)) and X.dtype == np.float64
    assert np.isfinite(X).all()
    a, b = (gpu_specs.gpu_features(gpu_specs.spec_for_tag(t)) for t in ("nvidia/nvidia-t4", RTX3090))
    assert not np.allclose(a, b)
    assert len({tuple(row) for row in X.round(9)}) == len(table)  # no two GPUs share a vector
    assert gpu_specs.compute_capability("sm_120") == 12.0 and gpu_specs.compute_capability("sm_86") == 8.6


@pytest.mark.parametrize("device_name, tag", [
    ("NVIDIA H100 80GB HBM3", "nvidia/nvidia-h100"),
    ("NVIDIA GeForce RTX 3090", RTX3090),
    ("NVIDIA GeForce RTX 3090 Ti", "nvidia/geforce-rtx-3090-ti"),
    ("NVIDIA GeForce RTX 2080 Ti", "nvidia/geforce-rtx-2080-ti"),
    ("Tesla V100-SXM2-16GB", "nvidia/nvidia-v100"),
    ("NVIDIA A100-SXM4-40GB", "nvidia/nvidia-a100"),
    ("Tesla T4", "nvidia/nvidia-t4"),
    ("Tesla K40m", "nvidia/tesla-k40"),
    ("NVIDIA TITAN Xp", "nvidia/nvidia-titan-xp"),
    ("NVIDIA TITAN X (Pascal)", "nvidia/nvidia-titan-x"),
    ("GeForce GTX TITAN X", "nvidia/geforce-gtx-titan-x"),
    ("NVIDIA RTX A6000", "nvidia/rtx-a6000"),
    ("NVIDIA H100 PCIe", None),  # another board than the SXM5 row
    ("NVIDIA A100-SXM4-80GB", None),  # another memory size
    ("Tesla V100-PCIE-16GB", None),
    ("NVIDIA GeForce RTX 4080", None),  # no row
    ("Orin", None),  # a Jetson SoC: choose the module by tag
])
def test_device_name_matching(device_name, tag):
    spec = gpu_specs.spec_for_device_name(device_name)
    assert (spec.tag if spec else None) == tag


# ---- static validity ----------------------------------------------------------------------------

def test_tag_limits():
    limits = tag_limits(RTX3090)
    assert limits == {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "max_thread_x": 1024,
                      "max_thread_y": 1024, "max_thread_z": 64, "max_vthread": 8}
    thor = "nvidia/jetson-agx-thor"
    assert tag_limits(thor)["max_shared_memory_per_block"] == STATIC_SHARED_BYTES
    assert tag_limits(thor, static_shared=False)["max_shared_memory_per_block"] == 232448
    with pytest.raises(UserError, match="nvidia/no-such-gpu"):
        tag_limits("nvidia/no-such-gpu")


@pytest.fixture(scope="module")
def conv3x3():
    """ResNet-18's first 3x3 conv of layer1: 64 -> 64 channels, 56 x 56, pad 1, stride 1."""
    for task, template, space in cuda_tasks("resnet18"):
        s = task.shape
        if (s["in_channels"], s["out_channels"], s["height"], s["kernel"], s["stride"]) == (64, 64, 56, 3, 1):
            return task, template, space
    raise AssertionError("ResNet-18 has a 64 -> 64 3x3 conv at 56 x 56")


def _config(space, f, y, x, rc, ry, rx):
    return space.from_dict({"tile_f": f, "tile_y": y, "tile_x": x, "tile_rc": rc, "tile_ry": ry, "tile_rx": rx,
                            "auto_unroll_max_step": 512, "unroll_explicit": 1})


def _staged_bytes(f, y, x, rc, ry, rx) -> int:
    """By hand: the input tile rc_i x (Ty - 1 + ry_i) x (Tx - 1 + rx_i) and the weights Tf x rc_i x ry_i x rx_i
    (stride 1, no dilation), T* = vthread x thread x inner of the tile knob, 4-byte floats."""
    tf, ty, tx = (np.prod(t[1:]) for t in (f, y, x))
    return 4 * int(rc[1] * (ty - 1 + ry[1]) * (tx - 1 + rx[1]) + tf * rc[1] * ry[1] * rx[1])


def test_hand_checked_configs_under_rtx3090_limits(conv3x3):
    task, template, space = conv3x3
    limits = tag_limits(RTX3090)
    many_threads = ([1, 1, 64, 1], [14, 1, 4, 1], [7, 1, 8, 1], [8, 8], [1, 3], [3, 1])
    big_shared = ([2, 2, 8, 2], [7, 1, 8, 1], [7, 1, 8, 1], [2, 32], [1, 3], [1, 3])
    sane = ([4, 2, 8, 1], [7, 1, 8, 1], [7, 2, 4, 1], [8, 8], [1, 3], [3, 1])
    threads = {name: knobs[0][2] * knobs[1][2] * knobs[2][2]
               for name, knobs in (("many", many_threads), ("big", big_shared), ("sane", sane))}
    assert threads == {"many": 64 * 4 * 8, "big": 8 * 8 * 8, "sane": 8 * 8 * 4}  # 2048 > 1024; 512; 256
    assert _staged_bytes(*many_threads) == 4 * (8 * 6 * 8 + 64 * 8 * 3) == 7680
    assert _staged_bytes(*big_shared) == 4 * (32 * 10 * 10 + 32 * 32 * 9) == 49664  # > 48 KiB = 49152
    assert _staged_bytes(*sane) == 4 * (8 * 10 * 8 + 16 * 8 * 3) == 4096

    configs = [_config(space, *k) for k in (many_threads, big_shared, sane)]
    labels = static_labels(task, template, space, [c.index for c in configs], limits, lowered=True)
    assert labels.tolist() == [False, False, True]
    reasons = [template.verify(template.apply(task.mod, c), limits) for c in configs[:2]]
    assert reasons[0].startswith("2048 threads per block")
    assert reasons[1] == "49664 bytes of shared memory per block > max_shared_memory_per_block=49152"
    thor = tag_limits("nvidia/jetson-agx-thor", static_shared=False)  # the tag's opt-in 227 KiB
    assert static_labels(task, template, space, [c.index for c in configs], thor).tolist() == [False, True, True]


def test_knob_and_lowered_labels_agree(conv3x3):
    task, template, space = conv3x3
    limits = tag_limits(RTX3090)
    indices = space.sample(np.random.default_rng(0), 30)
    by_knobs = static_labels(task, template, space, indices, limits)
    by_code = static_labels(task, template, space, indices, limits, lowered=True)
    assert by_knobs.tolist() == by_code.tolist()
    assert 0 < by_knobs.sum() < len(indices)  # both kinds in the sample


def test_static_validity_trains_the_ensemble_that_the_method_uses(conv3x3):
    from tunebench.methods.annealing import index_digits
    from tunebench.methods.tensor_programs.glimpse.gpu_data import gpu_hardware, static_groups_for
    from tunebench.methods.tensor_programs.glimpse.networks import votes_reject
    from tunebench.methods.tensor_programs.glimpse.train import TrainSettings, train

    task, template, space = conv3x3
    indices = space.sample(np.random.default_rng(1), 400)
    tags = [RTX3090, "nvidia/nvidia-titan-xp"]
    groups = static_groups_for(tags, [(task, template, space, indices)])
    assert len(groups) == 2 and all(g.y is None and 0 < g.valid.sum() < len(g.valid) for g in groups)
    model = train(groups, TrainSettings(validity_epochs=200))
    assert set(model.pcas) == {"gpu"} and set(model.validity_dims) >= {"tile_f", "tile_y", "tile_x"}
    from tunebench.methods.tensor_programs.glimpse.encoding import entity_features

    z = model.z(task.kind, task.shape, task.flops, gpu_hardware(RTX3090))
    votes = model.invalid_votes([k.name for k in space.knobs], entity_features(space), z)
    rejected = votes_reject(votes, index_digits(space, np.asarray(indices)), 1 / 3)
    valid = groups[0].valid
    assert (~valid[~rejected]).mean() < (~valid).mean()  # fewer invalid configs among those it accepts
