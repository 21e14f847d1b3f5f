"""The Amaranth generators compute what numpy computes (functional simulation), for every kernel."""
import numpy as np
import pytest

from tunebench.targets.fpga.generator import build, simulate
from tunebench.targets.fpga.kernels import get_kernel


def _inputs(k, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=k.arrays[a]["sizes"]) for a in (k.x_name, k.w_name)]


def _pick(space, **want):
    for i in range(space.size):
        cfg = space.get(i).to_dict()
        if all(cfg[key] == v for key, v in want.items()):
            return cfg
    raise AssertionError(f"no config with {want}")


@pytest.mark.parametrize("want", [
    dict(unroll_i=1, unroll_j=1, unroll_k=1, pipeline=0),       # one lane
    dict(unroll_i=1, unroll_j=2, unroll_k=4, pipeline=1),       # cyclic: 8 lanes, product registers
    dict(unroll_i=4, unroll_j=1, unroll_k=1, pipeline=0),       # block partition of A over 4 row lanes
    dict(unroll_i=1, unroll_j=2, unroll_k=4, pipeline=0),       # 8 lanes, adder trees of 4, no product register
    dict(unroll_i=8, unroll_j=1, unroll_k=1, pipeline=1),       # block partition of A over 8 row lanes
    dict(unroll_i=1, unroll_j=4, unroll_k=4, pipeline=2),       # 16 lanes, product and adder-tree registers
    dict(unroll_i=2, unroll_j=1, unroll_k=1, pipeline=2, storage="reg"),  # banks in flip-flops
])
def test_gemm_designs_match_numpy(want):
    k = get_kernel("gemm")
    cfg = _pick(k.space, **want)
    x, w = _inputs(k)
    out, cycles = simulate(k, cfg, x, w)
    np.testing.assert_array_equal(out, x.astype(np.int64) @ w.astype(np.int64))
    d = build(k, cfg)
    d.top._MustUse__silence = True
    assert cycles == d.cycles == 512 // d.lanes + 3 + cfg["pipeline"]  # steps + ROM + bank read + acc (+ pipeline regs)


@pytest.mark.parametrize("want", [
    dict(unroll_ox=1, unroll_ky=1, unroll_kx=1, pipeline=0),
    dict(unroll_ox=2, unroll_ky=1, unroll_kx=3, pipeline=1),    # halo: 4 image columns per cycle, 4 banks
    dict(unroll_ox=2, unroll_ky=3, unroll_kx=3, pipeline=0),    # 18 lanes, 3x4 = 12 image banks
])
def test_conv_designs_match_numpy(want):
    k = get_kernel("conv")
    cfg = _pick(k.space, **want)
    x, w = _inputs(k, seed=1)
    w = w[:3, :3] if w.shape != (3, 3) else w
    out, _ = simulate(k, cfg, x, w)
    ref = np.array([[np.sum(x[oy:oy + 3, ox:ox + 3].astype(np.int64) * w) for ox in range(6)] for oy in range(6)])
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("want, lanes", [
    (dict(unroll_r=1, unroll_c=1, unroll_k=1, pipeline=0), 1),
    (dict(unroll_r=1, unroll_c=1, unroll_k=3, pipeline=1), 3),   # the 3 diagonals of a row at once
    (dict(unroll_r=4, unroll_c=1, unroll_k=1, pipeline=2), 4),   # block partition: one lane per matrix block
    (dict(unroll_r=1, unroll_c=4, unroll_k=3, pipeline=0), 12),  # 12 val banks, 6 x banks (4 rows + halo)
])
def test_spmv_designs_match_numpy(want, lanes):
    k = get_kernel("spmv")
    cfg = _pick(k.space, **want)
    val, x = _inputs(k, seed=3)
    out, cycles = simulate(k, cfg, val, x)
    # y = M x with M the 32 x 40 block-tridiagonal matrix whose diagonals val holds (DIA format)
    M = np.zeros((32, 40), dtype=np.int64)
    for r in range(4):
        for c in range(8):
            for d in range(3):
                M[8 * r + c, 10 * r + c + d] = val[r, c, d]
    np.testing.assert_array_equal(out.reshape(-1), M @ x.reshape(-1).astype(np.int64))
    d = build(k, cfg)
    d.top._MustUse__silence = True
    assert d.lanes == lanes and cycles == d.cycles == 96 // lanes + 3 + cfg["pipeline"]


def test_every_pruned_design_simulates_correctly():
    """Every pruned design up to its storage binding and multiplier core (which only set Yosys'
    ``ram_style`` and ``-nodsp``: the RTL is the same; 102 designs), on one random input each: the
    generator has no untested corner."""
    for name in ("gemm", "conv", "spmv"):
        k = get_kernel(name)
        x, w = _inputs(k, seed=2)
        ref = k.reference(x, w)
        for i in range(k.space.size):
            cfg = k.space.get(i).to_dict()
            if cfg["storage"] != "bram" or cfg["mul_core"] != "dsp":
                continue
            out, _ = simulate(k, cfg, x, w)
            assert np.array_equal(out, ref), (name, i)
