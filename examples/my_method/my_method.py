"""An out-of-tree tuning method for tunebench: simulated annealing on the measured objective.

Proposes random walks (one knob changed) from the current config; accepts a measured config as the
new current one if it is better, or with the Metropolis probability exp(-relative loss / temperature).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import FRACTION, NAME, POS_NUM, knob
from tunebench.methods.base import Method, TargetNeeds


@dataclass
class AnnealingSettings(MethodSettings):
    name: str = knob("my_sa", NAME, "the method")
    t0: float = knob(0.3, POS_NUM, "initial temperature (a relative loss accepted with probability 1/e)")
    cooling: float = knob(0.8, FRACTION, "temperature factor after each measured batch")


class SimulatedAnnealing(Method):
    name = "my_sa"
    Settings = AnnealingSettings
    needs = TargetNeeds(objectives="single")

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.objective = target_info.objectives[0]
        self.current, self.value, self.temp = None, math.inf, self.settings.t0

    def ask(self, n):
        picks = []
        for _ in range(20 * n if self.current is not None else 0):
            i = self.space.random_walk(self.current, self.rng)
            if len(picks) < n and i not in self.visited and i not in picks:
                picks.append(i)
        picks += self.space.sample(self.rng, n - len(picks), exclude=self.visited | set(picks))
        self.visited.update(picks)
        return [self.space.get(i) for i in picks]

    def tell(self, measurements):
        super().tell(measurements)
        for m in measurements:
            v = m.objectives.get(self.objective, math.inf) if m.valid else math.inf
            if v < self.value or (math.isfinite(v) and self.rng.random() < math.exp((1 - v / self.value) / self.temp)):
                self.current, self.value = m.config.index, v
        self.temp *= self.settings.cooling
