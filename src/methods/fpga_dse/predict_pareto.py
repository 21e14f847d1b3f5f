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

:class:`InitialDesignSettings` declares these two knobs once for ``ann``, ``bt`` and ``dac19``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import FRACTION, is_int, knob, opt, rule
from tunebench.methods.base import Method, TargetNeeds, first_phase_problem
from tunebench.pareto import pareto_front


@dataclass
class InitialDesignSettings(MethodSettings):
    """The initial designs of ``ann``, ``bt`` and ``dac19`` ([Sun-PhD] §3.6.4)."""

    n_init: int = knob(48, rule(lambda v: is_int(v) and v >= 2, "must be an integer >= 2"),
                       "initial designs ([Sun-PhD] §3.6.4: \"the number of initialization configurations is 48\", for "
                       "ANN, BT and DAC19): random ones evaluated at impl (ann, bt), RTED ones (dac19)")
    max_init_fraction: float | None = knob(0.25, opt(FRACTION),
                                           "our choice: cap n_init at 25% of the pruned space (binds only on small "
                                           "spaces; ours hold 144-216 configs: conv 45, SpMV 36 initial designs); "
                                           "null = no cap")


def initial_count(n_init: int, max_init_fraction: float | None, space_size: int) -> int:
    """How many initial designs: ``n_init``, capped at ``max_init_fraction`` of the space (at least 2)."""
    if max_init_fraction is None:
        return n_init
    return min(n_init, max(2, math.floor(max_init_fraction * space_size)))


class PredictParetoMethod(Method):
    name = "predict_pareto"
    needs = TargetNeeds(objectives="multi")

    def __init__(self, settings: InitialDesignSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        self.n_init = self.settings.n_init
        self.max_init_fraction = self.settings.max_init_fraction

    def check_budget(self, task, target_info, budget):
        """The initial designs, each measured at the top fidelity, before the model predicts anything."""
        n = min(initial_count(self.n_init, self.max_init_fraction, task.space.size), task.space.size)
        return first_phase_problem(self, task, budget, n, f"{n} random initial designs at "
                                                          f"{target_info.top_fidelity}")

    def make_model(self):
        """A fresh regressor with ``fit(X, y)`` / ``predict(X)``."""
        raise NotImplementedError

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.objectives = list(target_info.objectives)
        sc = target_info.scale or {}
        self.scale = np.array([float(sc.get(o, 1.0)) for o in self.objectives])
        self.n_init_eff = initial_count(self.n_init, self.max_init_fraction, self.space.size)
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
