"""``method=bt``: boosted trees (XGBoost) per objective predict the space; evaluate the predicted
Pareto designs ([Sun-PhD] §3.6.3-3.6.4; docs/METHODS.md §bt; flow in
:mod:`tunebench.methods.fpga_dse.predict_pareto`). Multi-objective targets only."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.knobs import NAME, POS_INT, POS_NUM, knob
from tunebench.methods.fpga_dse.predict_pareto import InitialDesignSettings, PredictParetoMethod


@dataclass
class BTSettings(InitialDesignSettings):
    """Boosted-trees baseline for FPGA DSE ([Sun-PhD] §3.6.3-3.6.4); n_init, max_init_fraction: see
    :class:`~tunebench.methods.fpga_dse.predict_pareto.InitialDesignSettings`."""

    name: str = knob("bt", NAME, "the method")
    max_depth: int = knob(3, POS_INT, "[Sun-PhD] sweeps tree depth 1..6 (§3.6.4); 3 = the middle (and XGBoost's "
                                      "AutoTVM setting)")
    learning_rate: float = knob(0.1, POS_NUM, "[Sun-PhD] sweeps {0.1, 0.2, 0.3, 0.4, 0.5} (§3.6.4); 0.1 = the first")
    n_estimators: int = knob(100, POS_INT, "not given in the thesis; XGBoost's default number of rounds")


class BoostedTrees(PredictParetoMethod):
    """An ``xgboost.XGBRegressor`` per objective. Settings: :class:`BTSettings`."""

    name = "bt"
    Settings = BTSettings

    def __init__(self, settings: BTSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.max_depth = s.max_depth
        self.learning_rate = s.learning_rate
        self.n_estimators = s.n_estimators

    def make_model(self):
        import xgboost as xgb

        return xgb.XGBRegressor(max_depth=self.max_depth, learning_rate=self.learning_rate,
                                n_estimators=self.n_estimators, n_jobs=1,
                                random_state=int(self.rng.integers(2**31)))
