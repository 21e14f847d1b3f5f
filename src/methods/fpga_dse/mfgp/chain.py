"""Per-fidelity surrogates chained cheapest first (:class:`FidelityChain`): ``nargp`` ([NARGP],
[Sun-PhD] Eq. 3.9: the lower fidelity's posterior mean is concatenated to x) or ``ar1``
(f_i(x) = rho f_{i-1}(x) + delta(x), variance rho^2 var_{i-1} + var_delta). The models chained are
those of :mod:`tunebench.methods.fpga_dse.mfgp.models`."""

from __future__ import annotations

import math
import warnings

import torch
from gpytorch.utils.warnings import GPInputWarning

from tunebench.methods.fpga_dse.mfgp.models import DTYPE


class FidelityChain:
    """Per-fidelity surrogates, cheapest first, chained by the lower fidelity's posterior mean.

    Args:
        make: ``make(level, d_x, d_f) -> model`` with ``fit(X, Y)`` and ``predict(X)``.
        chaining: ``nargp`` (lower mean concatenated to x, [Sun-PhD] Eq. 3.9) or ``ar1`` (linear link,
            needs IndependentGP(link="ar1") models).
    """

    def __init__(self, n_levels: int, d_x: int, M: int, make, chaining: str = "nargp"):
        if chaining not in ("nargp", "ar1"):
            raise ValueError(f"chaining must be nargp or ar1, got {chaining!r}")
        self.n_levels, self.d_x, self.M, self.chaining = n_levels, d_x, M, chaining
        self.models = [make(k, d_x, 0 if k == 0 else M) for k in range(n_levels)]
        self.fitted = [False] * n_levels
        self._memo: dict = {}  # (level, X bytes) -> (mean, cov): lower levels are predicted once per fit

    def _input(self, level: int, X) -> torch.Tensor:
        X = torch.as_tensor(X, dtype=DTYPE)
        if level == 0:
            return X
        lower_mean, _ = self.predict(level - 1, X)
        return torch.cat([X, lower_mean], dim=1)

    def fit(self, data: list[tuple], refit: list[bool] | None = None) -> list[float]:
        """Fit every level on its (X [n_k, d_x], Y [n_k, M]); a level with < 2 points stays unfitted
        (and so do the levels above it). Returns the MLL per level (nan when unfitted or not refitted).

        Args:
            refit: per level, whether to optimize its hyperparameters again (default: all). A level not
                refitted keeps its hyperparameters but gets the new (chained) inputs and targets.
        """
        values = []
        self._memo.clear()
        for k, (X, Y) in enumerate(data):
            self._memo.clear()  # level k changes below: predictions of it made before are stale
            if len(X) < 2 or (k and not self.fitted[k - 1]):
                self.fitted[k] = False
                values.append(math.nan)
                continue
            inputs = self._input(k, X)
            if self.fitted[k] and refit is not None and not refit[k]:
                self.models[k].set_data(inputs, Y)
                values.append(math.nan)
            else:
                values.append(self.models[k].fit(inputs, Y))
            self.fitted[k] = True
        return values

    @torch.no_grad()
    def predict(self, level: int, X) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean [N, M] and covariance [N, M, M] of fidelity ``level`` at X [N, d_x]."""
        if not self.fitted[level]:
            raise RuntimeError(f"fidelity level {level} is not fitted")
        X = torch.as_tensor(X, dtype=DTYPE)
        key = (level, tuple(X.shape), X.numpy().tobytes())
        if key in self._memo:
            return self._memo[key]
        with warnings.catch_warnings():  # predicting at the training inputs is intended here
            warnings.simplefilter("ignore", GPInputWarning)
            mean, cov = self.models[level].predict(self._input(level, X))
        if self.chaining == "ar1" and level > 0:
            _, lower_cov = self.predict(level - 1, X)
            rho = self.models[level].rho()
            cov = cov + torch.diag_embed(rho ** 2 * lower_cov.diagonal(dim1=-2, dim2=-1))
        self._memo[key] = (mean, cov)
        return mean, cov

    @torch.no_grad()
    def predict_joint(self, level: int, X) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean [N, M] and per-objective joint covariance [M, N, N] (independent models only)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GPInputWarning)
            mean, cov = self.models[level].predict_joint(self._input(level, X))
        if self.chaining == "ar1" and level > 0:
            _, lower = self.predict_joint(level - 1, X)
            rho = self.models[level].rho()
            cov = cov + rho[:, None, None] ** 2 * lower
        return mean, cov
