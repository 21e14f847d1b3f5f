"""``method=ann``: 2-hidden-layer MLP per objective predicts the space; evaluate the predicted
Pareto designs ([Sun-PhD] §3.6.3-3.6.4; docs/METHODS.md §ann; flow in
:mod:`tunebench.methods.fpga_dse.predict_pareto`). Multi-objective targets only."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.knobs import NAME, POS_INT, POS_NUM, each, knob
from tunebench.methods.fpga_dse.predict_pareto import InitialDesignSettings, PredictParetoMethod


@dataclass
class ANNSettings(InitialDesignSettings):
    """ANN baseline for FPGA DSE ([Sun-PhD] §3.6.3-3.6.4); n_init, max_init_fraction: see
    :class:`~tunebench.methods.fpga_dse.predict_pareto.InitialDesignSettings`."""

    name: str = knob("ann", NAME, "the method")
    hidden: list[int] = knob([64, 64], each(POS_INT, "must be a list of positive layer widths"),
                             "\"a model with 2 hidden layers\" ([Sun-PhD] §3.6.4); widths not given -> 64 each (our "
                             "choice)")
    max_iter: int = knob(1000, POS_INT, "training iterations; [Sun-PhD] sweeps {500, 1000, ..., 5000} (§3.6.4); "
                                        "1000 = sklearn's Adam converges on <50 points")
    learning_rate: float = knob(0.001, POS_NUM, "not given in the thesis; Adam's usual default (sklearn "
                                                "MLPRegressor)")


class ANN(PredictParetoMethod):
    """An MLP per objective (sklearn ``MLPRegressor``, Adam). Settings: :class:`ANNSettings`."""

    name = "ann"
    Settings = ANNSettings

    def __init__(self, settings: ANNSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.hidden = tuple(s.hidden)
        self.max_iter = s.max_iter
        self.learning_rate = s.learning_rate

    def make_model(self):
        from sklearn.neural_network import MLPRegressor

        return MLPRegressor(hidden_layer_sizes=self.hidden, max_iter=self.max_iter,
                            learning_rate_init=self.learning_rate,
                            random_state=int(self.rng.integers(2**31)))
