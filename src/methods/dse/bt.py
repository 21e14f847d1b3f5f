"""``method=bt``: boosted trees (XGBoost) per objective predict the space; evaluate the predicted
Pareto designs ([Sun-PhD] §3.6.3-3.6.4; flow in :mod:`tunebench.methods.dse.predict_pareto`)."""

from __future__ import annotations

from tunebench.methods.dse.predict_pareto import PredictParetoMethod


class BoostedTrees(PredictParetoMethod):
    """Args: n_init, max_init_fraction (see predict_pareto); max_depth (the thesis sweeps 1..6);
    learning_rate (the thesis sweeps {0.1, ..., 0.5}); n_estimators: boosting rounds."""

    name = "bt"

    def __init__(self, n_init: int = 48, max_init_fraction: float = 0.25, max_depth: int = 3,
                 learning_rate: float = 0.1, n_estimators: int = 100):
        super().__init__(n_init, max_init_fraction)
        self.max_depth = int(max_depth)
        self.learning_rate = float(learning_rate)
        self.n_estimators = int(n_estimators)

    def make_model(self):
        import xgboost as xgb

        return xgb.XGBRegressor(max_depth=self.max_depth, learning_rate=self.learning_rate,
                                n_estimators=self.n_estimators, n_jobs=1,
                                random_state=int(self.rng.integers(2**31)))
