"""The valid-by-construction mapspace encoding of [Dinh-MLArchSys23] §II-A: a point of the unit cube
becomes a mapping that fits every memory.

Tile part (eqs. 1-3): for each buffer level, outer to inner (scratchpad, accumulator, register), one
feature per dimension, ``f_d`` in (0, 1]. The dimensions the level's capacity depends on (eq. 1 for the
scratchpad: weights plus inputs; the accumulator: partial sums; the register: weights) get tiles
``t_d = alpha f_d`` with one common ``alpha`` (eq. 2) chosen so that the footprint fills the capacity
(eq. 3, solved for this hierarchy's footprints by bisection, since the input halo ``s (OY - 1) + FY`` makes
it no plain monomial); each tile is clipped to [1, the tile of the level above] and rounded down to a
divisor of it, so the footprint only shrinks and the mapping fits. A dimension the capacity does not
depend on is a plain bound, ``t_d = f_d x (tile above)`` rounded down alike (the "simple constant bound" of
§II-A). The DRAM level takes what is left.

Loop-order part, per level (four): ``scores`` (one feature per dimension; loops sorted by score,
lowest innermost) or ``categorical`` (one feature per level: the permutation's index, ``floor(v P)``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from tunebench.search_space import Config

ORDER_ENCODINGS = ("scores", "categorical")
_EPS = 1e-6


def sobol_points(d: int, n: int, seed: int) -> np.ndarray:
    """The first ``n`` points of a scrambled Sobol sequence in (0, 1]^d (clipped away from 0, where a
    feature would give an empty tile), float64."""
    import torch

    engine = torch.quasirandom.SobolEngine(d, scramble=True, seed=seed % (2**31))
    return np.clip(engine.draw(n).double().numpy(), _EPS, 1.0)


@lru_cache(maxsize=4096)
def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def floor_divisor(n: int, value: float) -> int:
    """The largest divisor of ``n`` that is <= ``value`` (1 at least)."""
    best = 1
    for d in _divisors(n):
        if d <= value + 1e-9:
            best = d
        else:
            break
    return best


def _floor_divisors(n: np.ndarray, value: np.ndarray) -> np.ndarray:
    """:func:`floor_divisor` element-wise."""
    out = np.ones(len(n))
    for m in np.unique(n):
        rows = n == m
        divs = np.array(_divisors(int(m)), dtype=float)
        out[rows] = divs[np.maximum(np.searchsorted(divs, value[rows] + 1e-9, side="right") - 1, 0)]
    return out


class Encoding:
    """The map from (0, 1]^d to the mappings of one mapspace (a task's ``mod`` on ``target=accel``:
    :class:`~tunebench.targets.accel.mapspace.MapSpace`, whose memory levels it reads; module docstring)."""

    def __init__(self, mapspace, order: str = "scores"):
        if order not in ORDER_ENCODINGS:
            raise ValueError(f"order encoding {order!r}; valid: {', '.join(ORDER_ENCODINGS)}")
        self.ms, self.order = mapspace, order
        self.levels, self.buffers = mapspace.LEVELS, mapspace.BUFFERS
        self.dims = mapspace.dims
        n = len(self.dims)
        self.n_tile = len(self.buffers) * n
        self.n_order = len(self.levels) * (n if order == "scores" else 1)
        self.d = self.n_tile + self.n_order
        self.n_perms = len(mapspace.permutations)
        #: feature indices that are categorical (the permutation index per level)
        self.cat_dims = list(range(self.n_tile, self.d)) if order == "categorical" else []
        self.constrained = {lv: {d for op in mapspace.LEVEL_OPERANDS[lv] for d in mapspace.RELEVANT[op]}
                            for lv in self.buffers}

    def names(self) -> list[str]:
        """One name per feature: ``tile_<level>_<dim>``, ``order_<level>_<dim>`` or ``order_<level>``."""
        out = [f"tile_{self.levels[lv]}_{d}" for lv in self.buffers for d in self.dims]
        if self.order == "scores":
            return out + [f"order_{lv}_{d}" for lv in self.levels for d in self.dims]
        return out + [f"order_{lv}" for lv in self.levels]

    # ---- tiles --------------------------------------------------------------------------------
    def _footprint(self, lv: int, tile: dict) -> float:
        """Bits level ``lv`` holds for ``tile`` (per dimension a number, or an array of one per point)."""
        full = {d: 1.0 for d in ("B", "K", "C", "OY", "OX", "FY", "FX")}
        for d in self.dims:
            full[d] = tile[d]
        if lv > 0:
            for d, s in self.ms.spatial.items():
                full[d] = full[d] * s  # not in place: ``tile``'s arrays stay as they are
        return self.ms.footprint_bits(lv, full)  # partial sums at full width: a safe bound

    def _level_tiles(self, lv: int, f: np.ndarray, outer: dict) -> dict:
        cap = self.ms.capacity_bits[lv]
        tiles, cons = {}, []
        for d, fd in zip(self.dims, f):
            fd = min(max(float(fd), _EPS), 1.0)
            if d in self.constrained[lv]:
                cons.append((d, fd))
            else:
                tiles[d] = floor_divisor(outer[d], fd * outer[d])
        def real(alpha: float) -> dict:
            return {**{d: 1 for d in tiles}, **{d: min(max(alpha * fd, 1.0), outer[d]) for d, fd in cons}}
        lo, hi = 0.0, max((outer[d] / fd for d, fd in cons), default=0.0)
        if cons and self._footprint(lv, real(hi)) > cap:
            for _ in range(60):  # bisection: the footprint grows with alpha (eq. 3)
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if self._footprint(lv, real(mid)) <= cap else (lo, mid)
            alpha = lo
        else:
            alpha = hi
        for d, t in real(alpha).items():
            if d not in tiles:
                tiles[d] = floor_divisor(outer[d], t)
        return tiles

    def factors(self, x: np.ndarray) -> list[dict]:
        """Per level (inner to outer) the factor of each dimension of point ``x``."""
        n = len(self.dims)
        outer = {d: self.ms.temporal[d] for d in self.dims}
        cum = {}
        for k, lv in enumerate(self.buffers):
            cum[lv] = self._level_tiles(lv, x[k * n:(k + 1) * n], outer)
            outer = cum[lv]
        below = dict.fromkeys(self.dims, 1)
        out = []
        for lv in range(len(self.levels)):
            tile = cum.get(lv, {d: self.ms.temporal[d] for d in self.dims})
            out.append({d: tile[d] // below[d] for d in self.dims})
            below = tile
        return out

    def cumulative_tiles(self, X: np.ndarray) -> np.ndarray:
        """The buffer levels' cumulative tiles of many points at once, (n, buffers, dims), the levels inner to
        outer: what :meth:`factors` decides, point by point, with the same arithmetic (and so the same tiles)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        n = len(self.dims)
        outer = np.tile(np.array([self.ms.temporal[d] for d in self.dims], dtype=float), (len(X), 1))
        out = np.empty((len(X), len(self.buffers), n))
        for k, lv in enumerate(self.buffers):
            outer = out[:, lv] = self._level_tiles_batch(lv, X[:, k * n:(k + 1) * n], outer)
        return out

    def _level_tiles_batch(self, lv: int, F: np.ndarray, outer: np.ndarray) -> np.ndarray:
        """:meth:`_level_tiles` for the rows of ``F`` (features) and ``outer`` (the tiles of the level above)."""
        cap = self.ms.capacity_bits[lv]
        F = np.clip(F, _EPS, 1.0)
        cons = np.array([d in self.constrained[lv] for d in self.dims])
        tiles = np.ones_like(outer)
        for j in np.flatnonzero(~cons):
            tiles[:, j] = _floor_divisors(outer[:, j], F[:, j] * outer[:, j])
        if not cons.any():
            return tiles

        def real(alpha: np.ndarray) -> np.ndarray:
            return np.where(cons, np.minimum(np.maximum(alpha[:, None] * F, 1.0), outer), 1.0)

        hi = np.max(np.where(cons, outer / F, -np.inf), axis=1)
        lo = np.zeros(len(F))
        def footprint(tile: np.ndarray) -> np.ndarray:
            return self._footprint(lv, dict(zip(self.dims, tile.T)))

        over = footprint(real(hi)) > cap
        for _ in range(60):  # bisection, as in _level_tiles, on the rows whose largest tiles do not fit
            mid = 0.5 * (lo + hi)
            ok = footprint(real(mid)) <= cap
            lo, hi = np.where(over & ok, mid, lo), np.where(over & ~ok, mid, hi)
        t = real(np.where(over, lo, hi))
        for j in np.flatnonzero(cons):
            tiles[:, j] = _floor_divisors(outer[:, j], t[:, j])
        return tiles

    def mapping_features(self, X: np.ndarray) -> np.ndarray:
        """The GP's view of points ``X`` (n, d) as the mappings they decode to (``gp_features=mapping``):
        per buffer level and dimension, log(cumulative tile) / log(the dimension's extent); per level and
        dimension, the loop's place among the level's loops of factor > 1 (0 innermost, 1 outermost; 0.5
        where the level has fewer than two such loops, or the dimension's factor is 1). Points that decode
        to one mapping get one row."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        n = len(self.dims)
        extent = np.array([self.ms.temporal[d] for d in self.dims], dtype=float)
        cum = self.cumulative_tiles(X)
        logs = np.log(extent)
        tile_part = np.where(extent > 1, np.log(cum) / np.where(extent > 1, logs, 1.0), 0.5).reshape(len(X), -1)
        outer = np.concatenate([cum, np.tile(extent, (len(X), 1, 1))], axis=1)
        factor = outer / np.concatenate([np.ones((len(X), 1, n)), cum], axis=1)  # per level, inner to outer
        order_part = np.full((len(X), len(self.levels), n), 0.5)
        for i, x in enumerate(X):
            for lv, order in enumerate(self.orders(x)):
                live = [self.dims.index(d) for d in order if factor[i, lv, self.dims.index(d)] > 1]
                for rank, j in enumerate(live if len(live) > 1 else []):
                    order_part[i, lv, j] = rank / (len(live) - 1)
        return np.concatenate([tile_part, order_part.reshape(len(X), -1)], axis=1)

    # ---- orders -------------------------------------------------------------------------------
    def orders(self, x: np.ndarray) -> list[tuple]:
        n, part = len(self.dims), x[self.n_tile:]
        if self.order == "scores":
            return [tuple(self.dims[i] for i in np.argsort(part[lv * n:(lv + 1) * n], kind="stable"))
                    for lv in range(len(self.levels))]
        return [self.ms.permutations[min(int(v * self.n_perms), self.n_perms - 1)] for v in part]

    def decode(self, x) -> Config:
        """The (fitting) mapping of point ``x`` in (0, 1]^d, as a config of the task's space."""
        x = np.asarray(x, dtype=float)
        return self.ms.config_of(self.factors(x), self.orders(x))

    def gp_inputs(self, x: np.ndarray) -> np.ndarray:
        """The GP's view of points ``x`` (n, d): categorical features as category indices."""
        out = np.array(x, dtype=float, copy=True)
        if self.cat_dims:
            out[:, self.cat_dims] = np.minimum(np.floor(out[:, self.cat_dims] * self.n_perms), self.n_perms - 1)
        return out
