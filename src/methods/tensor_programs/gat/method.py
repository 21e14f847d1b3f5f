"""``method=gat``: GTuner ([Sun-PhD] Ch. 5) = MetaSchedule's evolutionary search + the GAT cost model.

Everything but the cost model is :class:`~tunebench.methods.tensor_programs.metaschedule.MetaSchedule` (same space
generator, evolutionary search, measurement through the tunebench target, database). The cost
model is a ``ms.cost_model.PyCostModel`` wrapping :class:`~tunebench.methods.tensor_programs.gat.model.GATCostModel`:

- ``predict``: features of the candidates (:mod:`tunebench.methods.tensor_programs.gat.features`), predicted log
  latency ``p``; returned as the normalized throughput score ``exp(min(p) - p)`` in (0, 1] (the
  evolutionary search samples parents in proportion to the scores, so they must be >= 0; higher =
  faster, as XGBModel's scores).
- ``update`` (after each measured round): the round's valid measurements join the task's
  training data and the model is fine-tuned on all of it for ``online_epochs`` epochs (with a
  pretrained model) or trained for ``epochs`` epochs (from scratch).

Per round the search measures its ``num_trials_per_iter`` best-predicted candidates (the paper
measures the best 80; the trial budget may end a round early).
"""

from __future__ import annotations

import logging

import numpy as np

from tunebench.errors import UserError
from tunebench.methods.tensor_programs.gat.settings import GATSettings
from tunebench.methods.tensor_programs.metaschedule import MetaSchedule

log = logging.getLogger(__name__)


def make_py_cost_model(model, min_train: int = GATSettings.min_train, online_epochs: int = GATSettings.online_epochs):
    """A MetaSchedule PyCostModel around ``model`` (a GATCostModel) -- see the module docstring."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    from tunebench.methods.tensor_programs.gat.features import candidate_features

    @derived_object
    class GATPyCostModel(PyCostModel):
        def __init__(self):
            super().__init__()
            self.model = model
            self.stats: list[np.ndarray] = []
            self.graphs: list = []
            self.lat: list[float] = []
            self.n_updates = 0

        def load(self, path: str) -> None:
            m = self.model  # a checkpoint from save() / `gat train`, trained on with this model's settings
            self.model = type(m).load(path, lr=m.lr, epochs=m.epochs, batch_size=m.batch_size)

        def save(self, path: str) -> None:
            self.model.save(path)

        def update(self, context, candidates, results) -> None:
            if not candidates:
                return
            stats, graphs = candidate_features(context, candidates)
            for s, g, r in zip(stats, graphs, results):
                if r.run_secs is not None and len(r.run_secs) > 0:
                    self.stats.append(s)
                    self.graphs.append(g)
                    self.lat.append(float(np.median([float(x) for x in r.run_secs])))
            if len(self.lat) < min_train:
                return
            epochs = online_epochs if self.model.fitted else None
            self.model.fit(np.stack(self.stats), self.graphs, np.asarray(self.lat), epochs=epochs)
            self.n_updates += 1

        def predict(self, context, candidates) -> np.ndarray:
            n = len(candidates)
            if n == 0:
                return np.zeros(0, dtype="float64")
            if not self.model.fitted:  # no data and no pretrained model: uninformative, like XGB untrained
                return np.random.default_rng(n).uniform(size=n).astype("float64")
            stats, graphs = candidate_features(context, candidates)
            pred = self.model.predict(stats, graphs)
            return np.exp(np.min(pred) - pred).astype("float64")

    return GATPyCostModel()


class GAT(MetaSchedule):
    """GTuner: MetaSchedule's evolutionary search with the GAT cost model (see module docstring).

    Settings: :class:`~tunebench.methods.tensor_programs.gat.settings.GATSettings` (MetaSchedule's search knobs and the
    cost model's, each with its source).
    """

    name = "gat"
    Settings = GATSettings

    def __init__(self, settings: GATSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.model_args = s.net_args()
        self.train_args = dict(lr=s.lr, epochs=s.epochs, batch_size=s.batch_size, seed=s.seed)
        self.online_epochs, self.min_train, self.pretrained = s.online_epochs, s.min_train, s.pretrained

    def _make_cost_model(self):
        from tunebench.methods.tensor_programs.gat.model import GATCostModel

        if self.pretrained:
            model = GATCostModel.load(self.pretrained, **self.train_args)
            if model.net_args != self.model_args:
                raise UserError(f"method.pretrained={self.pretrained} holds a {model.net_args} network; the "
                                f"config asks for {self.model_args}")
        else:
            model = GATCostModel(**self.model_args, **self.train_args)
        self.gat_model = model
        return make_py_cost_model(model, min_train=self.min_train, online_epochs=self.online_epochs)
