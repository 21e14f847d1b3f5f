"""``method=dac19``: regression from lower-fidelity reports to implementation results with an RTED initial
design ([Sun-PhD] §3.1 and §3.6.3-3.6.4 describing [DAC19] and [RTED]; docs/METHODS.md §dac19).

1. RTED picks ``n_init`` representative designs (``designs.rted``); each is evaluated at the cheapest
   fidelity (the "HLS report", the thesis's stand-in for [DAC19]'s ASIC implementation) and at the top one.
2. Per objective, a boosted-tree regressor ``low``: x -> cheapest-fidelity objective, and a regressor
   ``top``: [x, cheapest-fidelity objectives] -> top-fidelity objective (valid designs only).
3. Every design's top-fidelity objectives are predicted (measured cheap reports where they exist, else
   ``low``'s predictions, fed to ``top``); the predicted Pareto designs not yet measured are evaluated at
   the top fidelity. Then the method is done (``ask`` returns []).
Objectives are normalized as in cgp (resources by capacity, delay by 2x the initial maximum).
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.errors import UserError
from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.mfgp.acquisition import pareto_mask
from tunebench.methods.mfgp.designs import rted
from tunebench.methods.mfgp.objectives import ObjectiveScaler


class DAC19(Method):
    """Two-stage regression (x -> cheap report -> implementation) with an RTED initial design.

    Args:
        n_init: RTED designs (each measured at the cheapest and the top fidelity).
        max_init_fraction: at most this fraction of the space as RTED designs (None: no cap).
        rted_pool: random candidate pool RTED selects from; rted_mu: TED regularizer.
        max_pareto: at most this many predicted-Pareto designs evaluated (None: all of them).
        xgb_params, num_boost_round: the boosted-tree regressors (XGBoost native API).
        delay_factor: delay scale = this x the largest initial delay (as cgp).
    """

    name = "dac19"
    needs = TargetNeeds(objectives="multi", min_fidelities=2)

    def __init__(self, n_init: int = 48, max_init_fraction=None, rted_pool: int = 500, rted_mu: float = 0.1,
                 max_pareto=None, xgb_params=None, num_boost_round: int = 200, delay_factor: float = 2.0):
        if int(n_init) < 2:
            raise UserError(f"method.n_init={n_init!r} must be an integer >= 2")
        self.n_init, self.rted_pool, self.rted_mu = int(n_init), int(rted_pool), float(rted_mu)
        self.max_init_fraction = None if max_init_fraction is None else float(max_init_fraction)
        self.max_pareto = None if max_pareto is None else int(max_pareto)
        self.xgb_params = dict(xgb_params or {"max_depth": 3, "eta": 0.1, "nthread": 1})
        self.num_boost_round = int(num_boost_round)
        self.delay_factor = float(delay_factor)

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.objectives = list(target_info.objectives)
        self.fidelities = list(target_info.fidelities)
        if len(self.objectives) < 2 or not self.fidelities:
            raise UserError(f"method=dac19 needs a multi-objective target with fidelities; this target has "
                            f"objectives={self.objectives}, fidelities={self.fidelities}")
        self.low, self.top = self.fidelities[0], self.fidelities[-1]
        self.capacity = dict(target_info.capacity or {})
        self.X = np.asarray(self.space.features(range(self.space.size)), dtype=np.float64)
        n = self.n_init
        if self.max_init_fraction is not None:
            n = min(n, max(2, int(self.max_init_fraction * self.space.size)))
        self.initial = rted(self.X, n, self.rng, self.rted_pool, self.rted_mu)
        fids = [self.low, self.top] if self.low != self.top else [self.top]
        self.queue = [(i, f) for i in self.initial for f in fids]
        self.reports: dict[str, dict[int, dict | None]] = {f: {} for f in self.fidelities}
        self.phase = "initial"

    def ask(self, n: int) -> list:
        if not self.queue and self.phase == "initial":
            self.phase = "pareto"
            self.queue = [(i, self.top) for i in self._predicted_pareto()]
        out, self.queue = self.queue[:n], self.queue[n:]
        return [(self.space.get(i), f) for i, f in out]

    def tell(self, measurements) -> None:
        super().tell(measurements)
        for m in measurements:
            if m.fidelity not in self.reports:
                continue
            objs = dict(getattr(m, "objectives", {}) or {})
            ok = m.valid and all(o in objs and math.isfinite(objs[o]) for o in self.objectives)
            self.reports[m.fidelity][m.config.index] = objs if ok else None
            self.queue = [q for q in self.queue if q != (m.config.index, m.fidelity)]

    def _regressor(self, X: np.ndarray, y: np.ndarray):
        import xgboost as xgb

        params = {**self.xgb_params, "seed": self.seed % 2**31}
        booster = xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=self.num_boost_round)
        return lambda Z: booster.predict(xgb.DMatrix(Z))

    def _predicted_pareto(self) -> list[int]:
        valid_all = [r for f in self.reports.values() for r in f.values() if r is not None]
        scaler = ObjectiveScaler(self.objectives, self.capacity, valid_all, self.delay_factor)
        low_ok = {i: scaler(r) for i, r in self.reports[self.low].items() if r is not None}
        top_ok = {i: scaler(r) for i, r in self.reports[self.top].items() if r is not None}
        both = [i for i in top_ok if i in low_ok]
        if len(low_ok) < 2 or len(both) < 2:
            return []
        N, M = self.space.size, len(self.objectives)
        low_pred = np.zeros((N, M))
        ids = np.array(sorted(low_ok))
        for j in range(M):
            low_pred[:, j] = self._regressor(self.X[ids], np.array([low_ok[i][j] for i in ids]))(self.X)
        for i, v in low_ok.items():
            low_pred[i] = v
        inputs = np.hstack([self.X, low_pred])
        top_pred = np.zeros((N, M))
        for j in range(M):
            top_pred[:, j] = self._regressor(inputs[both], np.array([top_ok[i][j] for i in both]))(inputs)
        for i, r in self.reports[self.top].items():
            top_pred[i] = top_ok[i] if r is not None else np.inf  # measured: known values; invalid: never Pareto
        front = [int(i) for i in np.flatnonzero(pareto_mask(top_pred).numpy())]
        new = sorted((i for i in front if i not in self.reports[self.top]), key=lambda i: tuple(top_pred[i]))
        new = new if self.max_pareto is None else new[:self.max_pareto]
        self.learned = sorted({i for i in front if i in top_ok} | set(new))  # measured ones on the front too
        return new
