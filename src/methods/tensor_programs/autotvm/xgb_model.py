"""AutoTVM's XGBoost cost model (``XGBoostCostModel`` in ``tvm/autotvm/tuner/xgboost_cost_model.py``).

The model maps a config's knob features to a score (higher = faster):

- **features** (``feature="knob"``): the space's normalized knob encoding, one row per config
  (``Space.features``: ``log2(factor)/log2(length)`` per split part, ``entity/(n-1)`` per choice).
  AutoTVM's "knob" feature is the raw factor / option value; every per-feature transform here is
  monotone, so the trees can split the same way. AutoTVM's ``itervar``/``curve`` features need its
  old TE feature extractor and are not offered.
- **labels**: throughput normalized by the largest one in the training set (``y / max(y)``);
  invalid measurements have throughput 0.
- **loss**: ``"rank"`` = ``rank:pairwise`` (the scores are relative ranks), ``"reg"`` = squared
  error on the normalized throughput (``reg:linear`` in AutoTVM, now ``reg:squarederror``).
- **training**: up to ``num_boost_round`` rounds, early-stopped when the average recall@N on the
  training set has not improved for ``early_stopping_rounds`` rounds (AutoTVM's ``a-recall@N``
  with N = plan size; see :func:`average_recall`); predictions use the trees up to the best round.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import xgboost as xgb

from tunebench.methods.annealing import index_digits
from tunebench.search_space import Space

log = logging.getLogger(__name__)

#: AutoTVM's ``xgb_params`` (same for both losses except the objective)
AUTOTVM_PARAMS = {"max_depth": 3, "gamma": 1e-4, "min_child_weight": 1, "subsample": 1.0, "eta": 0.3,
                  "lambda": 1.0, "alpha": 0.0}
OBJECTIVES = {"rank": "rank:pairwise", "reg": "reg:squarederror"}


def average_recall(preds: np.ndarray, labels: np.ndarray, n: int) -> float:
    """Mean over k = 1..n of |top-k by ``preds`` ∩ top-k by ``labels``| / k (both of shape (m,)).

    AutoTVM's ``a-recall@n`` (``xgb_average_recalln_curve_score``), without its off-by-one in the
    recall curve. Ties are broken by position (stable sort). n is capped at m.
    """
    m = len(labels)
    n = min(n, m)
    if n == 0:
        return 0.0
    pred_pos = np.empty(m, dtype=np.int64)
    pred_pos[np.argsort(-preds, kind="stable")] = np.arange(1, m + 1)
    true_pos = np.empty(m, dtype=np.int64)
    true_pos[np.argsort(-labels, kind="stable")] = np.arange(1, m + 1)
    # a config is in both top-k sets for every k >= max(its two positions)
    in_both = np.cumsum(np.bincount(np.maximum(pred_pos, true_pos), minlength=m + 1))[1:n + 1]
    return float(np.mean(in_both / np.arange(1, n + 1)))


class KnobFeatures:
    """Vectorized ``Space.features``: one lookup table per knob, gathered by the configs' digits."""

    def __init__(self, space: Space):
        self.space = space
        self.tables = [np.array([k.encode(e) for e in range(len(k.entities))], dtype=np.float32).reshape(
            len(k.entities), k.n_features) for k in space.knobs]

    def __call__(self, indices) -> np.ndarray:
        """Features of ``indices`` (int, shape (n,)): float32 of shape (n, space.n_features) in [0, 1]."""
        digits = index_digits(self.space, np.asarray(indices, dtype=np.int64).reshape(-1))
        if digits.shape[0] == 0:
            return np.zeros((0, self.space.n_features), dtype=np.float32)
        return np.concatenate([tab[digits[:, k]] for k, tab in enumerate(self.tables)], axis=1)


class XGBCostModel:
    """AutoTVM's XGBoost cost model over one space.

    Args:
        space: the space whose configs are scored (features come from it).
        loss_type: ``"rank"`` (pairwise rank loss) or ``"reg"`` (regression on normalized throughput).
        feature: ``"knob"`` (the only feature type offered; see the module docstring).
        num_boost_round: maximum boosting rounds (AutoTVM: 8000).
        early_stopping_rounds: stop after this many rounds without a better training a-recall@N.
        recall_n: N of the early-stopping metric (AutoTVM: the plan size, 64).
        params: XGBoost parameters overriding :data:`AUTOTVM_PARAMS` (``nthread`` absent or None:
            ``os.cpu_count()``); the objective follows ``loss_type``; ``lambdarank_*`` pair settings
            are passed only to the rank loss.
        seed: seeds the row shuffle and XGBoost's own sampling (pair sampling of the rank loss).

    After ``fit``, ``last_fit`` holds ``{"n", "n_invalid", "rounds", "best_iteration", "a_recall", "seconds"}``.
    """

    def __init__(self, space: Space, loss_type: str = "rank", feature: str = "knob", num_boost_round: int = 8000,
                 early_stopping_rounds: int = 20, recall_n: int = 64, params: dict | None = None, seed: int = 0):
        if loss_type not in OBJECTIVES:
            raise ValueError(f"loss_type={loss_type!r}: valid: {', '.join(OBJECTIVES)}")
        if feature != "knob":
            raise ValueError(f"feature={feature!r}: only 'knob' features are available (AutoTVM's 'itervar' and "
                             "'curve' need its TE feature extractor)")
        self.space, self.loss_type, self.feature = space, loss_type, feature
        self.num_boost_round, self.early_stopping_rounds = int(num_boost_round), int(early_stopping_rounds)
        self.recall_n = int(recall_n)
        params = {**AUTOTVM_PARAMS, **(params or {})}
        if params.get("nthread") is None:
            params["nthread"] = os.cpu_count() or 1
        if loss_type != "rank":  # pair-construction settings mean nothing to the regression loss
            params = {k: v for k, v in params.items() if not k.startswith("lambdarank_")}
        self.params = {**params, "objective": OBJECTIVES[loss_type], "verbosity": 0,
                       "disable_default_eval_metric": 1}
        self.features = KnobFeatures(space)
        self._rng = np.random.default_rng(seed)
        self.booster: xgb.Booster | None = None
        self._n_trees = 0
        self.y_max = 0.0  # the throughput that normalized the labels: score * y_max is GFLOPS for "reg"
        self.last_fit: dict = {}

    # ---- training --------------------------------------------------------------------------
    def fit(self, indices, gflops) -> XGBCostModel:
        """Train on measured configs: ``indices`` (n,) ints, ``gflops`` (n,) throughput, 0 for invalid."""
        return self.fit_features(self.features(indices), gflops)

    def fit_features(self, x: np.ndarray, gflops) -> XGBCostModel:
        """Train on a feature matrix ``x`` (n, n_features) and throughputs ``gflops`` (n,)."""
        tic = time.perf_counter()
        y = np.nan_to_num(np.asarray(gflops, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
        if len(y) != len(x) or len(y) == 0:
            raise ValueError(f"fit: {len(x)} feature rows and {len(y)} labels")
        self.y_max = float(y.max())
        y = y / max(self.y_max, 1e-8)
        order = self._rng.permutation(len(y))  # AutoTVM shuffles the rows (order matters to pair sampling)
        # the DMatrix copy on the model's threads too: on XGBoost's default (every core) it took 45 ms for 120
        # rows against 0.2 ms on 1 thread while other work shared the 2-core project machine; same matrix
        dtrain = xgb.DMatrix(x[order], label=y[order], nthread=self.params["nthread"])
        params = {**self.params, "seed": int(self._rng.integers(2**31))}
        n = self.recall_n

        def metric(preds, dmat):
            return f"a-recall@{min(n, dmat.num_row())}", average_recall(preds, dmat.get_label(), n)

        history: dict = {}
        self.booster = xgb.train(params, dtrain, num_boost_round=self.num_boost_round, evals=[(dtrain, "tr")],
                                 custom_metric=metric, maximize=True,
                                 early_stopping_rounds=self.early_stopping_rounds, evals_result=history,
                                 verbose_eval=False)
        rounds = self.booster.num_boosted_rounds()
        best = int(getattr(self.booster, "best_iteration", rounds - 1))
        self._n_trees = best + 1
        curve = next(iter(history["tr"].values()))
        self.last_fit = {"n": len(y), "n_invalid": int(np.sum(y <= 0)), "rounds": rounds, "best_iteration": best,
                         "a_recall": float(curve[best]), "seconds": time.perf_counter() - tic}
        log.debug("XGB fit: %s", self.last_fit)
        return self

    # ---- prediction ------------------------------------------------------------------------
    def predict(self, indices) -> np.ndarray:
        """Scores of configs ``indices`` (n,): float64 (n,), higher = predicted faster.

        ``"rank"``: relative scores (only their order means something); ``"reg"``: predicted
        throughput as a fraction of the best training throughput ``y_max``.
        """
        return self.predict_features(self.features(indices))

    def predict_features(self, x: np.ndarray) -> np.ndarray:
        """Scores of a feature matrix ``x`` (n, n_features): float64 (n,)."""
        if self.booster is None:
            raise RuntimeError("XGBCostModel.predict before fit")
        if len(x) == 0:
            return np.zeros(0)
        return self.booster.inplace_predict(x, iteration_range=(0, self._n_trees)).astype(np.float64)
