"""``method=motpe``: Optuna's multi-objective TPE (optuna==5.0.0 ``TPESampler`` with several objectives =
[MOTPE]; docs/METHODS.md §motpe), driven through our loop (:mod:`tunebench.methods.fpga_dse.optuna_common`)."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.knobs import NAME, NONNEG_INT, POS_INT, knob
from tunebench.methods.fpga_dse.optuna_common import OptunaMethod, OptunaSettings


@dataclass
class MOTPESettings(OptunaSettings):
    """MOTPE's sampler; storage, study: see :class:`~tunebench.methods.fpga_dse.optuna_common.OptunaSettings`."""

    name: str = knob("motpe", NAME, "the method")
    n_startup_trials: int = knob(8, NONNEG_INT, "random trials first; 8 = [Sun-PhD] §3.6.4's initial designs for the "
                                                "BO methods (Optuna default 10)")
    n_ei_candidates: int = knob(24, POS_INT, "Optuna default")
    multivariate: bool = knob(False, None, "Optuna default")


class MOTPE(OptunaMethod):
    """Optuna's TPE sampler on several objectives. Settings: :class:`MOTPESettings`."""

    name = "motpe"
    Settings = MOTPESettings

    def make_sampler(self, seed: int):
        from optuna.samplers import TPESampler

        s = self.settings
        return TPESampler(n_startup_trials=s.n_startup_trials, n_ei_candidates=s.n_ei_candidates,
                          multivariate=s.multivariate, seed=seed)
