"""The cost model f̂ of Glimpse's loop (Algorithm 4, lines 7 and 16): a Gaussian process on the configs'
knob-value features, giving the mean μ that simulated annealing climbs and the spread σ that the neural
acquisition reads (MetaBO's inputs, [Volpp-ICLR20]).

Our choices where the thesis is silent: an RBF kernel whose one lengthscale is picked from a small grid by
the log marginal likelihood at each fit, targets standardized, noise variance 1e-3 of the standardized
targets. A fit on n measured configs costs O(n³): n stays in the hundreds, a few milliseconds.
"""

from __future__ import annotations

import numpy as np

LENGTHSCALES = (0.25, 0.5, 1.0, 2.0)  # x sqrt(feature dimension)
NOISE = 1e-3


class GP:
    """Exact GP regression with an RBF kernel (see the module docstring)."""

    def __init__(self) -> None:
        self.X: np.ndarray | None = None

    def fit(self, X: np.ndarray, y: np.ndarray) -> GP:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        self.y_mean = float(y.mean())
        self.y_std = float(y.std()) if y.std() > 1e-12 else 1.0
        z = (y - self.y_mean) / self.y_std
        d2 = _sqdist(X, X)
        best = None
        for ell in LENGTHSCALES:
            ls = ell * np.sqrt(max(1, X.shape[1]))
            K = np.exp(-0.5 * d2 / ls**2) + NOISE * np.eye(len(X))
            try:
                L = np.linalg.cholesky(K)
            except np.linalg.LinAlgError:
                continue
            alpha = np.linalg.solve(L.T, np.linalg.solve(L, z))
            lml = -0.5 * z @ alpha - np.log(np.diag(L)).sum()
            if best is None or lml > best[0]:
                best = (lml, ls, L, alpha)
        if best is None:  # never on an RBF kernel with noise; keep the prior
            self.X = None
            return self
        _, self.ls, self.L, self.alpha = best
        self.X = X
        return self

    def predict(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, std)`` at ``Xs`` in the units of the fitted targets."""
        Xs = np.asarray(Xs, dtype=np.float64)
        if self.X is None:
            return np.zeros(len(Xs)), np.ones(len(Xs))
        Ks = np.exp(-0.5 * _sqdist(Xs, self.X) / self.ls**2)
        mu = Ks @ self.alpha
        v = np.linalg.solve(self.L, Ks.T)
        var = np.clip(1.0 - np.sum(v * v, axis=0), 1e-12, None)
        return mu * self.y_std + self.y_mean, np.sqrt(var) * self.y_std


def _sqdist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.clip((A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T, 0.0, None)
