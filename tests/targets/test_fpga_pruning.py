"""[Sun-PhD] Algorithm 1 pruning of the directive spaces: which configs the rules remove, and why."""
import pytest

from tunebench.targets.fpga.kernels import get_kernel

BASE_GEMM = dict(unroll_i=1, unroll_j=1, unroll_k=1, partition_A_type="cyclic", partition_A_factor=1,
                 partition_B_type="cyclic", partition_B_factor=1, pipeline=0, mul_core="dsp")


@pytest.mark.parametrize("change, rule", [
    ({}, ""),                                                                      # the plain design survives
    (dict(unroll_k=4, partition_A_factor=4, partition_B_factor=4), ""),           # cyclic x inner unroll
    (dict(unroll_i=2, partition_A_type="block", partition_A_factor=2), ""),       # block x outer unroll
    (dict(partition_A_type="block"), "duplicate"),                                # factor 1: type irrelevant
    (dict(unroll_k=2, partition_A_type="block", partition_A_factor=2, partition_B_factor=2), "type"),  # A, B share k
    (dict(unroll_i=2, unroll_k=2, partition_A_factor=4, partition_B_factor=2), "cyclic->inner"),
    (dict(unroll_i=2, unroll_k=2, partition_A_type="block", partition_A_factor=4,
          partition_B_type="block", partition_B_factor=2), "block->outer"),
    (dict(unroll_k=4, partition_A_factor=2, partition_B_factor=4), "factor"),     # factor < unroll: loop not unrollable
    (dict(unroll_k=2, partition_A_factor=4, partition_B_factor=2), "factor"),     # factor > unroll: memory wasted
    (dict(unroll_j=2, unroll_k=2, partition_A_factor=2, partition_B_factor=2), "factor"),  # B needs 2x2 = 4 banks
])
def test_gemm_rules(change, rule):
    why = get_kernel("gemm").prune_reason({**BASE_GEMM, **change})
    assert why.split(":", 1)[0] == rule, why


def test_conv_block_partition_conflicts_with_the_halo():
    k = get_kernel("conv")
    cfg = dict(unroll_oy=2, unroll_ox=1, unroll_ky=1, unroll_kx=1, partition_img_type="block",
               partition_img_factor=2, partition_w_type="cyclic", partition_w_factor=1, pipeline=0, mul_core="dsp")
    assert k.prune_reason(cfg).startswith("conflict: bank 0 of img")  # rows 0 and 3 both in bank 0
    ok = dict(cfg, unroll_oy=1, unroll_ox=2, unroll_kx=3, partition_img_type="cyclic", partition_img_factor=4,
              partition_w_factor=3)
    assert k.prune_reason(ok) == ""  # 2 outputs x 3 taps read 4 distinct columns: cyclic factor 4


def test_spmv_val_has_no_reuse():
    """SpMV (DIA): every lane reads its own matrix value, so val needs as many banks as lanes, while
    x is shared along a row's diagonals (the halo: 4 rows x 3 diagonals read 6 elements of x)."""
    k = get_kernel("spmv")
    cfg = dict(unroll_r=1, unroll_c=4, unroll_k=3, partition_val_type="cyclic", partition_val_factor=12,
               partition_x_type="cyclic", partition_x_factor=6, pipeline=0, mul_core="dsp", storage="bram")
    assert k.prune_reason(cfg) == ""
    assert k.prune_reason(dict(cfg, partition_val_factor=6)).startswith("factor: partition_val_factor=6")
    assert k.prune_reason(dict(cfg, unroll_r=2)).startswith("cyclic->inner")
    rows = dict(cfg, unroll_r=2, unroll_c=1, unroll_k=1, partition_val_type="block", partition_val_factor=2,
                partition_x_type="block", partition_x_factor=2)
    assert k.prune_reason(rows) == ""  # one lane per pair of matrix blocks: no bank is shared


@pytest.mark.parametrize("name, full, kept", [("gemm", 64800, 216), ("conv", 72576, 180), ("spmv", 38880, 144)])
def test_space_sizes_and_accounting(name, full, kept):
    k = get_kernel(name)
    sp = k.space
    assert sp.full_size == full and sp.size == kept
    assert sum(k.removed.values()) + kept == full  # every removed config is charged to exactly one rule
    # every kept config satisfies all rules and its features are min-max encoded in [0, 1]
    assert all(k.prune_reason(sp.get(i).to_dict()) == "" for i in range(sp.size))
    f = sp.features(range(sp.size))
    assert f.shape == (kept, len(sp.knobs)) and f.min() >= 0 and f.max() <= 1
