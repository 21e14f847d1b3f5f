"""``method=motpe``: Optuna's multi-objective TPE sampler through our loop
(:mod:`tunebench.methods.dse.optuna_common`)."""

from __future__ import annotations

from tunebench.methods.dse.optuna_common import OptunaMethod


class MOTPE(OptunaMethod):
    """Args: n_startup_trials (random trials first); n_ei_candidates; multivariate; storage, study
    (where the study lives: :mod:`~tunebench.methods.dse.optuna_storage`)."""

    name = "motpe"

    def __init__(self, n_startup_trials: int = 8, n_ei_candidates: int = 24, multivariate: bool = False,
                 storage: str | None = None, study: str | None = None):
        self.n_startup_trials = int(n_startup_trials)
        self.n_ei_candidates = int(n_ei_candidates)
        self.multivariate = bool(multivariate)
        self._shared(storage, study)

    def make_sampler(self, seed: int):
        from optuna.samplers import TPESampler

        return TPESampler(n_startup_trials=self.n_startup_trials, n_ei_candidates=self.n_ei_candidates,
                          multivariate=self.multivariate, seed=seed)
