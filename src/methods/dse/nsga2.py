"""``method=nsga2``: Optuna's NSGA-II sampler through our loop (:mod:`tunebench.methods.dse.optuna_common`)."""

from __future__ import annotations

from tunebench.methods.dse.optuna_common import OptunaMethod


class NSGA2(OptunaMethod):
    """Args: population_size; crossover_prob; swapping_prob; mutation_prob (None = 1 / n_params); storage,
    study (where the study lives: :mod:`~tunebench.methods.dse.optuna_storage`)."""

    name = "nsga2"

    def __init__(self, population_size: int = 8, crossover_prob: float = 0.9, swapping_prob: float = 0.5,
                 mutation_prob: float | None = None, storage: str | None = None, study: str | None = None):
        self.population_size = int(population_size)
        self.crossover_prob = float(crossover_prob)
        self.swapping_prob = float(swapping_prob)
        self.mutation_prob = mutation_prob
        self._shared(storage, study)

    def make_sampler(self, seed: int):
        from optuna.samplers import NSGAIISampler

        return NSGAIISampler(population_size=self.population_size, crossover_prob=self.crossover_prob,
                             swapping_prob=self.swapping_prob, mutation_prob=self.mutation_prob, seed=seed)
