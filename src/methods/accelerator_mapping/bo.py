"""``method=mapspace_bo``: Bayesian optimization of a layer's mapping over the valid-by-construction
encoding of [Dinh-MLArchSys23] §II (:mod:`tunebench.methods.accelerator_mapping.encoding`), with a GP surrogate
(BoTorch/GPyTorch in place of GPTune) and expected improvement; at the end, the Sobol indices of the
surrogate ([Dinh-MLArchSys23] §III-C, with SALib).

Each step fits a GP (Matern 5/2, ARD) to the log of the objective, scores ``n_candidates`` points of the
unit cube with log expected improvement and proposes the best-scored one whose mapping is not yet
measured. The GP sees a point as the mapping it decodes to (``gp_features=mapping``: log tiles per level,
loop places per level; :meth:`Encoding.mapping_features`) or as the encoding's coordinates
(``gp_features=encoding``, with a mixed categorical kernel for ``order_encoding=categorical``). Every
proposal fits the memories by construction; invalid measurements (none are expected) are left out of the GP.
"""

from __future__ import annotations

import math
import time

import numpy as np

from tunebench.methods.accelerator_mapping import objective_value
from tunebench.methods.accelerator_mapping.encoding import Encoding, sobol_points
from tunebench.methods.accelerator_mapping.sensitivity import sobol_report
from tunebench.methods.accelerator_mapping.settings import MapspaceBOSettings
from tunebench.methods.accelerator_mapping.surrogate import fit_gp, fit_multitask_gp, score_candidates
from tunebench.methods.base import Method, TargetNeeds
from tunebench.search_space import Config


class MapspaceBO(Method):
    """GP BO over the mapspace encoding (module docstring)."""

    name = "mapspace_bo"
    Settings = MapspaceBOSettings
    needs = TargetNeeds(objectives="single", mapspace=True)

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        s = self.settings
        self.enc = Encoding(task.mod, s.order_encoding)
        by_mapping = s.gp_features == "mapping"
        self._inputs = self.enc.mapping_features if by_mapping else self.enc.gp_inputs  # the GP's view of points
        self._cat_dims = [] if by_mapping else self.enc.cat_dims
        self.X: list[np.ndarray] = []  # points whose mapping was proposed, in order
        self.y: list[float] = []  # log objective (nan: invalid)
        self.point_of: dict[int, np.ndarray] = {}
        self.fit_s: list[float] = []
        self.n_fallback = 0
        self.model = None
        import torch

        self._sobol = torch.quasirandom.SobolEngine(self.enc.d, scramble=True, seed=self.seed % (2**31))
        self._init_queue: list[np.ndarray] = []
        self.source = None
        self.pretrain_s = 0.0
        if s.transfer_from:
            from tunebench.methods.accelerator_mapping.transfer import source_data

            start = time.perf_counter()
            points = sobol_points(self.enc.d, s.transfer_samples, self.seed + 1)
            self.source = source_data(task, target_info.lends, target_info.objectives[0], s.order_encoding,
                                      s.transfer_from, points, s.gp_features)
            self.pretrain_s = time.perf_counter() - start

    def _unit(self, n: int) -> np.ndarray:
        return np.clip(self._sobol.draw(n).double().numpy(), 1e-6, 1.0)

    def _initial_point(self) -> np.ndarray:
        """The next point of the initial design: the scrambled Sobol sequence's points in order. (The first
        point of each fresh draw of 64 would be every 64th point, which a Sobol sequence confines to one
        64th of its first coordinate.)"""
        if not self._init_queue:
            self._init_queue = list(self._unit(64))
        return self._init_queue.pop(0)

    def ask(self, n: int) -> list[Config]:
        out: list[Config] = []
        if self.space.size == 0:
            return out
        for _ in range(n):
            x, config = self._next()
            if config is None:
                break
            self.visited.add(config.index)
            self.point_of[config.index] = x
            out.append(config)
        return out

    def _next(self):
        observed = [i for i, v in enumerate(self.y) if math.isfinite(v)]
        n_init = 1 if self.source is not None else self.settings.n_init  # transfer: the sources' data stand in
        if len(self.X) + len(self.point_of) < n_init or len(observed) < (1 if self.source is not None else 2):
            cands = (self._initial_point() for _ in range(max(64, self.settings.n_init)))
        else:
            cands = self._ranked_candidates(observed)
        for x in cands:
            config = self.enc.decode(x)
            if config.index not in self.visited:
                return x, config
        # every candidate's mapping is measured: the raw space's unmeasured configs, at random
        left = self.space.sample(self.rng, 1, exclude=self.visited)
        if not left:
            return None, None
        self.n_fallback += 1
        return None, self.space.get(left[0])

    def _ranked_candidates(self, observed: list[int]) -> np.ndarray:
        s = self.settings
        keep = _training_subset([self.y[i] for i in observed], s.max_train)
        X = np.stack([self.X[observed[i]] for i in keep])
        y = np.array([self.y[observed[i]] for i in keep])
        start = time.perf_counter()
        if self.source is not None:
            sx, sy, src = self.source
            k = len(s.transfer_from)
            self.model = fit_multitask_gp(np.concatenate([sx, self._inputs(X)]), np.concatenate([sy, y]),
                                          np.concatenate([src, np.full(len(y), k)]), k, s.fit_maxiter)
        else:
            self.model = fit_gp(self._inputs(X), y, self._cat_dims, s.fit_maxiter)
        best = X[np.argsort(y)[:s.n_perturbed]]
        half = s.n_candidates // 2
        noise = self.rng.normal(0.0, s.perturb_sigma, size=(half, self.enc.d))
        if s.perturb_share < 1.0:  # move a random subset of the coordinates (at least one)
            moved = self.rng.random((half, self.enc.d)) < s.perturb_share
            moved[np.arange(half), self.rng.integers(self.enc.d, size=half)] = True
            noise *= moved
        local = np.clip(best[self.rng.integers(len(best), size=half)] + noise, 1e-6, 1.0)
        if self.enc.cat_dims:  # a categorical feature moves to a random category, one in d at a time
            flip = self.rng.random((half, len(self.enc.cat_dims))) < 1.0 / len(self.enc.cat_dims)
            fresh = self.rng.random((half, len(self.enc.cat_dims)))
            local[:, self.enc.cat_dims] = np.where(flip, fresh, local[:, self.enc.cat_dims])
        cands = np.concatenate([self._unit(s.n_candidates - half), local])
        scores = score_candidates(self.model, self._inputs(cands), float(np.min(y)), s.xi)
        self.fit_s.append(time.perf_counter() - start)
        return cands[np.argsort(-scores, kind="stable")]

    def tell(self, measurements):
        super().tell(measurements)
        for m in measurements:
            x = self.point_of.pop(m.config.index, None)
            if x is None:
                continue  # a fallback draw, or a prior record: not a point of the encoding
            value = objective_value(m) if m.valid else math.nan
            self.X.append(x)
            self.y.append(math.log(value) if m.valid and value > 0 else math.nan)

    def report(self) -> dict:
        out = {"order_encoding": self.settings.order_encoding, "gp_features": self.settings.gp_features,
               "encoding_dims": self.enc.d,
               "fallback_draws": self.n_fallback,
               "invalid_proposals": int(sum(not math.isfinite(v) for v in self.y))}
        if self.source is not None:
            out.update(transfer_sources=len(self.settings.transfer_from), source_evaluations=len(self.source[1]),
                       pretrain_s=self.pretrain_s)
        if self.fit_s:
            out["step_s_median"] = float(np.median(self.fit_s))
        if self.model is not None and self.settings.sobol_samples > 0:
            out.update(sobol_report(self.model, self.enc, self.settings.sobol_samples, self.seed, self._inputs))
        return out


def _training_subset(y: list[float], limit: int) -> list[int]:
    """Indices of at most ``limit`` observations: the best half and the latest half."""
    if len(y) <= limit:
        return list(range(len(y)))
    best = set(np.argsort(y)[:limit // 2].tolist())
    for i in range(len(y) - 1, -1, -1):
        if len(best) >= limit:
            break
        best.add(i)
    return sorted(best)
