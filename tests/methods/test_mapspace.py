"""method=mapspace_bo: the encoding maps every point to a fitting mapping, BO beats random search on a
small synthetic mapspace, the surrogate's Sobol indices."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.methods.accelerator_mapping.encoding import Encoding, floor_divisor
from tunebench.targets.accel.mapspace import LEVELS
from tunebench.targets.accel.settings import AccelSettings
from tunebench.targets.accel.target import make_mapspace
from tunebench.task import Task
from tunebench.testing.fakes import FakeTarget

torch.set_num_threads(1)
MATMUL = {"batch": 64, "in_features": 128, "out_features": 512}
CONV = {"in_channels": 256, "height": 14, "width": 14, "out_channels": 256, "kernel": 3, "stride": 1, "padding": 1}


def test_floor_divisor():
    assert [floor_divisor(12, v) for v in (0.5, 1, 2.9, 3, 5.99, 6, 11, 12, 40)] == [1, 1, 2, 3, 4, 6, 6, 12, 12]


@pytest.mark.parametrize("spec, order", [(MATMUL, "categorical"), (CONV, "scores")])
def test_every_point_decodes_to_a_fitting_mapping(spec, order):
    """10,000 random points of the unit cube (and its corners) are mappings that fit every buffer; the
    raw mapspace, sampled uniformly, mostly does not (what the encoding saves)."""
    ms = make_mapspace(AccelSettings(), spec)
    enc = Encoding(ms, order)
    rng = np.random.default_rng(0)
    points = np.concatenate([rng.random((10_000, enc.d)), np.full((1, enc.d), 1e-9), np.ones((1, enc.d))])
    configs = [enc.decode(x) for x in points]
    assert all(ms.fits(c) for c in configs)
    assert len({c.index for c in configs}) > 1000  # the encoding reaches many mappings, not a few
    raw = [ms.space.get(i) for i in ms.space.sample(rng, 2000)]
    assert sum(ms.fits(c) for c in raw) < 0.5 * len(raw)


def test_encoding_fills_the_capacity():
    """eq. (3): with every aspect ratio equal, the scratchpad's tile is as large as it fits, to within one
    rounding step per dimension."""
    ms = make_mapspace(AccelSettings(), CONV)
    enc = Encoding(ms, "scores")
    factors = enc.factors(np.full(enc.d, 0.5))
    tile = ms.tiles(factors)[2]
    used = ms.footprint_bits(2, tile) / ms.capacity_bits[2]
    assert 0.25 < used <= 1.0


def dram_words(ms):
    """A synthetic objective of a mapping: words moved from DRAM if every DRAM-level iteration reloads the
    scratchpad's tiles and writes the accumulator's back (no reuse across DRAM iterations)."""
    def objective(config) -> float:
        factors = ms.factors(config)
        tiles = ms.tiles(factors)
        outer = math.prod(factors[3].values())
        spad, acc = tiles[2], tiles[1]
        w = math.prod(spad[d] for d in ("K", "C", "FY", "FX"))
        i = spad["B"] * spad["C"] * (spad["OY"] + spad["FY"] - 1) * (spad["OX"] + spad["FX"] - 1)
        o = math.prod(acc[d] for d in ("B", "K", "OY", "OX")) * math.prod(factors[2].values())
        return float(outer * (w + i + o)) if ms.fits(config) else math.inf
    return objective


def test_bo_beats_random_search_on_a_small_synthetic_mapspace():
    """Over 5 seeds, 16 trials each: mapspace_bo's best is lower than random search's on average (random
    search samples the raw mapspace, where most mappings do not fit)."""
    settings = AccelSettings(scratchpad_kib=16, accumulator_kib=4)
    ms = make_mapspace(settings, {"batch": 32, "in_features": 256, "out_features": 256})
    task = Task(id="synthetic_map", name="synthetic", kind="dense", mod=ms, shape={}, flops=1, space=ms.space)
    target = FakeTarget(dram_words(ms), batch_size=1, details={"mapspace": True})
    best = {"mapspace_bo": [], "random": []}
    for seed in range(5):
        for name in best:
            method = make_method({"name": name, **({"n_init": 4, "n_candidates": 256, "sobol_samples": 0,
                                                   "fit_maxiter": 30} if name == "mapspace_bo" else {})})
            result = tune_task(task, method, target, Budget(16), np.random.default_rng(seed))
            best[name].append(result.best_so_far[-1])
    assert all(math.isfinite(b) for b in best["mapspace_bo"])
    assert np.mean(np.log(best["mapspace_bo"])) < np.mean(np.log(np.minimum(best["random"], 1e30)))


def test_the_initial_design_is_consecutive_sobol_points():
    """The n_init points before the first GP are the scrambled Sobol sequence in order, spread over every
    coordinate: not the first of each fresh block of 64 (every 64th point, which a Sobol sequence confines
    to one 64th of its first coordinate)."""
    ms = make_mapspace(AccelSettings(), MATMUL)
    task = Task(id="init_map", name="init", kind="dense", mod=ms, shape={}, flops=1, space=ms.space)
    target = FakeTarget(dram_words(ms), batch_size=1, details={"mapspace": True})
    method = make_method({"name": "mapspace_bo", "n_init": 16, "sobol_samples": 0})
    tune_task(task, method, target, Budget(16), np.random.default_rng(3))
    X = np.stack(method.X)
    assert X.shape == (16, Encoding(ms, "scores").d)
    sobol = torch.quasirandom.SobolEngine(X.shape[1], scramble=True, seed=method.seed % 2**31)
    expected = np.clip(sobol.draw(64).double().numpy(), 1e-6, 1.0)
    assert all(any(np.array_equal(x, e) for e in expected[:32]) for x in X)  # in order, a few skipped at most
    assert (X.max(axis=0) - X.min(axis=0)).min() > 0.5


def test_report_has_the_surrogates_sobol_indices():
    ms = make_mapspace(AccelSettings(), MATMUL)
    task = Task(id="sobol_map", name="sobol", kind="dense", mod=ms, shape={}, flops=1, space=ms.space)
    target = FakeTarget(dram_words(ms), batch_size=1, details={"mapspace": True})
    method = make_method({"name": "mapspace_bo", "n_init": 4, "n_candidates": 128, "sobol_samples": 16,
                          "fit_maxiter": 20})
    result = tune_task(task, method, target, Budget(8), np.random.default_rng(0))
    rep = result.report
    enc = Encoding(ms, "scores")
    assert set(rep["sobol_st"]) == set(enc.names()) and len(enc.names()) == 3 * 3 + len(LEVELS) * 3
    assert rep["sobol_tiles_st"] >= 0 and rep["sobol_order_st"] >= 0 and len(rep["sobol_top"]) == 3
    assert rep["invalid_proposals"] == 0 and rep["fallback_draws"] == 0


@pytest.mark.parametrize("view", ["mapping", "encoding"])
def test_transfer_pretrains_on_other_memory_configurations(view):
    """§III-B: observations of the same layer on two other accelerators (ZigZag on Sobol points) and the
    target's own, in one multi-task GP, with either view of the points; a changed knob that is no target knob
    is one error line."""
    from tunebench.errors import UserError
    from tunebench.targets.accel.target import AccelTarget

    target = AccelTarget(AccelSettings())
    ms = make_mapspace(target.settings, MATMUL)
    spec = {"batch": 64, "in_features": 128, "out_features": 512, "relu": True}
    task = Task(id="transfer_map", name="transfer", kind="dense", mod=ms, shape=spec, flops=1, space=ms.space)
    sources = [{"scratchpad_kib": 64}, {"scratchpad_kib": 1024}]
    method = make_method({"name": "mapspace_bo", "transfer_from": sources, "transfer_samples": 8, "n_candidates": 64,
                          "sobol_samples": 0, "fit_maxiter": 20, "gp_features": view})
    result = tune_task(task, method, target, Budget(4), np.random.default_rng(0))
    rep = result.report
    assert rep["transfer_sources"] == 2 and 0 < rep["source_evaluations"] <= 16 and rep["pretrain_s"] > 0
    assert result.n_invalid == 0 and len(result.measurements) == 4
    with pytest.raises(UserError, match=r"method.transfer_from\[0\]=\{'scratchpad': 64\}: must change knobs"):
        make_method({"name": "mapspace_bo", "transfer_from": [{"scratchpad": 64}]})
    with pytest.raises(UserError, match=r"method.transfer_from\[0\].scratchpad_kib=0.1: too small"):
        make_method({"name": "mapspace_bo", "transfer_from": [{"scratchpad_kib": 0.1}]})


STEM = {"in_channels": 3, "height": 224, "width": 224, "out_channels": 64, "kernel": 7, "stride": 2, "padding": 3}


@pytest.mark.parametrize("spec, settings", [
    (MATMUL, AccelSettings()), (CONV, AccelSettings()), ({"batch": 512, "in_features": 512, "out_features": 512},
                                                         AccelSettings()),
    (STEM, AccelSettings(scratchpad_kib=32, accumulator_kib=16)),  # C unrolled but no loop: its 3 still counts
])
def test_the_batch_decoder_decides_the_same_tiles(spec, settings):
    """``cumulative_tiles`` (many points at once) gives every point the tiles ``factors`` gives it alone,
    corners of the cube included."""
    ms = make_mapspace(settings, spec)
    enc = Encoding(ms, "scores")
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.random((300, enc.d)), np.full((1, enc.d), 1e-9), np.ones((1, enc.d)),
                        rng.choice([1e-6, 1.0], size=(20, enc.d))])
    cum = enc.cumulative_tiles(X)
    for x, tiles in zip(X, cum):
        run = dict.fromkeys(enc.dims, 1)
        for lv, factors in enumerate(enc.factors(x)[:3]):
            for j, d in enumerate(enc.dims):
                run[d] *= factors[d]
                assert tiles[lv, j] == run[d]


def test_mapping_features_are_the_mapping_a_point_decodes_to():
    """Hand-computed: 64 x 512 x 128 (temporal B 64, K 32, C 8) at tile features 0.5 decodes to register
    B16, accumulator B32 K32 C4, scratchpad everything; every level's order B, K, C (innermost first). Tile
    part: log2 of each tile over log2 of the extent; order part: each loop's place among its level's loops
    of factor > 1 (0.5 where the level has fewer than two). Points that decode to one mapping get one row."""
    ms = make_mapspace(AccelSettings(), MATMUL)
    enc = Encoding(ms, "scores")
    x = np.full(enc.d, 0.5)
    x[enc.n_tile:] = np.linspace(0.1, 0.9, enc.n_order)
    expected = [4 / 6, 0, 0, 5 / 6, 1, 2 / 3, 1, 1, 1,  # tiles: register, accumulator, scratchpad (B, K, C)
                0.5, 0.5, 0.5, 0, 0.5, 1, 0, 0.5, 1, 0.5, 0.5, 0.5]  # orders: register, acc., scratchpad, DRAM
    np.testing.assert_allclose(enc.mapping_features(x[None])[0], expected, atol=1e-12)
    rng = np.random.default_rng(2)
    for order in ("scores", "categorical"):
        enc = Encoding(ms, order)
        X = rng.random((400, enc.d))
        rows = enc.mapping_features(X)
        seen: dict = {}
        for x, row in zip(X, rows):
            seen.setdefault(enc.decode(x).index, row)
            np.testing.assert_array_equal(seen[enc.decode(x).index], row)
        assert len({tuple(r) for r in rows}) > 50


@pytest.mark.parametrize("order", ["scores", "categorical"])
def test_bo_runs_on_either_view_of_the_points(order):
    """``gp_features`` ``mapping`` and ``encoding`` both propose fitting, distinct mappings, and report the view."""
    ms = make_mapspace(AccelSettings(), MATMUL)
    task = Task(id="view_map", name="view", kind="dense", mod=ms, shape={}, flops=1, space=ms.space)
    target = FakeTarget(dram_words(ms), batch_size=1, details={"mapspace": True})
    for view in ("mapping", "encoding"):
        method = make_method({"name": "mapspace_bo", "order_encoding": order, "gp_features": view, "n_init": 4,
                              "n_candidates": 128, "sobol_samples": 8, "fit_maxiter": 20})
        result = tune_task(task, method, target, Budget(10), np.random.default_rng(0))
        assert result.n_invalid == 0 and len({m.config.index for m in result.measurements}) == 10
        assert result.report["gp_features"] == view and result.report["sobol_tiles_st"] >= 0
