"""Shared flow of the regression baselines ``ann`` and ``bt`` ([Sun-PhD] §3.6.3-3.6.4):

1. ``n_init`` random designs of the pruned space are evaluated at the highest fidelity (impl);
2. one regression model per objective is trained on them (features: the space's min-max encoding;
   targets: objectives divided by the target's normalization ``scale`` -- the thesis divides by
   estimated values "to scale different target values to a suitable range");
3. the models predict every design of the space; the predicted Pareto designs (measured designs
   count with their measured values) that are not yet measured are evaluated; then the method is done.

Invalid initial designs are left out of training. ``n_init`` is capped at ``max_init_fraction`` of
the space (our choice: the thesis's 48 initial designs were a small share of spaces with thousands of
configs; on a space of 16-36 designs 48 would be all of it; GEMM (216) keeps 48, conv (180) 45, SpMV (144) 36).
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.methods.base import Method, TargetNeeds
from tunebench.pareto import pareto_front


class PredictParetoMethod(Method):
    name = "predict_pareto"
    needs = TargetNeeds(objectives="multi")

    def __init__(self, n_init: int = 48, max_init_fraction: float = 0.25):
        self.n_init = int(n_init)
        self.max_init_fraction = float(max_init_fraction)

    def make_model(self):
        """A fresh regressor with ``fit(X, y)`` / ``predict(X)``."""
        raise NotImplementedError

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.objectives = list(target_info.objectives)
        sc = target_info.scale or {}
        self.scale = np.array([float(sc.get(o, 1.0)) for o in self.objectives])
        self.n_init_eff = max(2, min(self.n_init, math.floor(self.max_init_fraction * self.space.size)))
        self.init = self.space.sample(self.rng, self.n_init_eff)
        self.queue = list(self.init)
        self.measured: dict[int, np.ndarray | None] = {}
        self.predicted = False

    def ask(self, n):
        if not self.queue and not self.predicted and all(i in self.measured for i in self.init):
            self._predict()
        out = []
        while self.queue and len(out) < n:
            i = self.queue.pop(0)
            if i not in self.visited:
                self.visited.add(i)
                out.append(self.space.get(i))
        return out

    def tell(self, measurements):
        super().tell(measurements)
        for m in measurements:
            self.measured[m.config.index] = (np.array([m.objectives[o] for o in self.objectives]) / self.scale
                                             if m.valid else None)

    def _predict(self):
        self.predicted = True
        train = [(i, y) for i, y in self.measured.items() if y is not None]
        if len(train) < 2:
            return
        X = self.space.features([i for i, _ in train])
        Y = np.stack([y for _, y in train])
        allX = self.space.features(range(self.space.size))
        pred = np.zeros((self.space.size, len(self.objectives)))
        for j in range(len(self.objectives)):
            model = self.make_model()
            model.fit(X, Y[:, j])
            pred[:, j] = model.predict(allX)
        for i, y in self.measured.items():
            pred[i] = y if y is not None else np.inf  # measured: known values; invalid: never Pareto
        front = [int(i) for i in pareto_front(pred)]
        self.learned = sorted(front)  # measured ones on the front included; None until the prediction
        self.queue = [i for i in front if i not in self.measured]
