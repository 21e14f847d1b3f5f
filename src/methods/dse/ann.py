"""``method=ann``: 2-hidden-layer MLP per objective predicts the space; evaluate the predicted
Pareto designs ([Sun-PhD] §3.6.3-3.6.4; flow in :mod:`tunebench.methods.dse.predict_pareto`)."""

from __future__ import annotations

from tunebench.methods.dse.predict_pareto import PredictParetoMethod


class ANN(PredictParetoMethod):
    """Args: n_init, max_init_fraction (see predict_pareto); hidden: the two hidden layer widths;
    max_iter: training iterations (the thesis sweeps {500, 1000, ..., 5000}); learning_rate: Adam step."""

    name = "ann"

    def __init__(self, n_init: int = 48, max_init_fraction: float = 0.25, hidden: tuple = (64, 64),
                 max_iter: int = 1000, learning_rate: float = 1e-3):
        super().__init__(n_init, max_init_fraction)
        self.hidden = tuple(int(h) for h in hidden)
        self.max_iter = int(max_iter)
        self.learning_rate = float(learning_rate)

    def make_model(self):
        from sklearn.neural_network import MLPRegressor

        return MLPRegressor(hidden_layer_sizes=self.hidden, max_iter=self.max_iter,
                            learning_rate_init=self.learning_rate,
                            random_state=int(self.rng.integers(2**31)))
