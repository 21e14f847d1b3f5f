"""``method=nsga2``: [NSGA-II] through Optuna (optuna==5.0.0 ``NSGAIISampler``), a generic multi-objective
baseline (docs/METHODS.md §nsga2), driven through our loop (:mod:`tunebench.methods.fpga_dse.optuna_common`).
Proposals outside the pruned space are repaired to the nearest unmeasured config."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.knobs import FRACTION, NAME, is_int, knob, opt, rule
from tunebench.methods.fpga_dse.optuna_common import OptunaMethod, OptunaSettings


@dataclass
class NSGA2Settings(OptunaSettings):
    """NSGA-II's sampler; storage, study: see :class:`~tunebench.methods.fpga_dse.optuna_common.OptunaSettings`."""

    name: str = knob("nsga2", NAME, "the method")
    population_size: int = knob(8, rule(lambda v: is_int(v) and v >= 2, "must be an integer >= 2"),
                                "our choice: Optuna's default 50 exceeds the default per-task budgets (16-32 trials)")
    crossover_prob: float = knob(0.9, FRACTION, "Optuna default (NSGAIISampler)")
    swapping_prob: float = knob(0.5, FRACTION, "Optuna default (uniform crossover swap probability)")
    mutation_prob: float | None = knob(None, opt(FRACTION), "Optuna default: null = 1 / number of parameters")


class NSGA2(OptunaMethod):
    """Optuna's NSGA-II sampler. Settings: :class:`NSGA2Settings`."""

    name = "nsga2"
    Settings = NSGA2Settings

    def make_sampler(self, seed: int):
        from optuna.samplers import NSGAIISampler

        s = self.settings
        return NSGAIISampler(population_size=s.population_size, crossover_prob=s.crossover_prob,
                             swapping_prob=s.swapping_prob, mutation_prob=s.mutation_prob, seed=seed)
