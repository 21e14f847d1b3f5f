"""Glimpse's three learned parts ([Ahn-PhD] §4.4), in PyTorch, each small enough to evaluate in microseconds.

- :class:`PriorNet`, the prior distribution generator H (§4.4.1), a hypernetwork [Ha-ICLR17]: from the
  input ``z = [Π, Θ]`` (layer specification, Blueprint) a shared trunk and one head per knob emit the
  parameters π_k of that knob's prior, a weight vector over its value features φ: ``p_k(v) ∝ exp(π_k · φ(v))``
  (a log-normal bump per tile factor: :mod:`~tunebench.methods.tensor_programs.glimpse.encoding`). One distribution per
  dimension of the space, as the thesis designs it.
- :class:`AcquisitionNet`, the neural acquisition function of the Hardware-Aware Exploration (§4.4.2),
  MetaBO's form [Volpp-ICLR20]: a score of each candidate from the surrogate's standardized mean and
  spread, the candidate's prior log-probability, the budget used ``t/T`` and the Blueprint Θ; the policy is
  the softmax of the scores over the candidates.
- :class:`ValidityEnsemble`, the Hardware-Aware Sampling (§4.4.3): one logistic predictor per knob of
  P(invalid | φ(v), Θ, Π); each votes invalid at p > 0.5 and a config is rejected when more than τ of the
  predictors vote so (τ = 1/3, §4.4.3 footnote 2).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

HIDDEN = 64
ACQ_FEATURES = 4  # standardized mean, standardized spread, prior log-probability, t / T


class PriorNet(nn.Module):
    """H(Π, Θ) -> π_k for each knob k (see the module docstring)."""

    def __init__(self, in_dim: int, knob_dims: dict[str, int], hidden: int = HIDDEN):
        super().__init__()
        self.knob_dims = dict(knob_dims)
        self.trunk = nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.heads = nn.ModuleDict({name: nn.Linear(hidden, dim) for name, dim in self.knob_dims.items()})

    def params(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """π_k for every knob (z: (in_dim,) or (B, in_dim))."""
        h = self.trunk(z)
        return {name: head(h) for name, head in self.heads.items()}

    def log_probs(self, z: torch.Tensor, feats: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """log p_k over the entities of each knob in ``feats`` (name -> (n_entities, dim) features)."""
        pis = self.params(z)
        return {name: torch.log_softmax(f @ pis[name], dim=0) for name, f in feats.items()}


class AcquisitionNet(nn.Module):
    """α(μ̃, σ̃, log p̃, t/T, Θ) -> score (see the module docstring)."""

    def __init__(self, blueprint_dim: int, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(ACQ_FEATURES + blueprint_dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def acquisition_inputs(mu: np.ndarray, sigma: np.ndarray, logp: np.ndarray, best: float, y_std: float,
                       frac: float, theta: np.ndarray) -> np.ndarray:
    """The net's inputs for n candidates: ``(μ - best) / s``, ``σ / s`` (s: the observed targets' spread),
    the log prior probability relative to the candidates' best, the budget fraction and Θ."""
    s = y_std if y_std > 1e-12 else 1.0
    n = len(mu)
    cols = [(mu - best) / s, sigma / s, np.clip(logp - (logp.max() if n else 0.0), -20.0, 0.0) / 5.0,
            np.full(n, frac)]
    return np.concatenate([np.stack(cols, axis=1), np.repeat(theta[None, :], n, axis=0)], axis=1).astype(np.float32)


class ValidityEnsemble(nn.Module):
    """One logistic predictor of invalidity per knob (see the module docstring)."""

    def __init__(self, context_dim: int, knob_dims: dict[str, int]):
        super().__init__()
        self.knob_dims = dict(knob_dims)
        self.heads = nn.ModuleDict({name: nn.Linear(dim + context_dim, 1) for name, dim in self.knob_dims.items()})

    def logits(self, name: str, feats: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Invalidity logits of knob ``name``'s values (feats: (n, dim)) in ``context`` ([Θ, Π], (context_dim,))."""
        x = torch.cat([feats, context.expand(feats.shape[0], -1)], dim=1)
        return self.heads[name](x).squeeze(-1)


def votes_reject(votes: list[tuple[int, np.ndarray]], digits: np.ndarray, tau: float) -> np.ndarray:
    """Which configs (their entity ``digits``, (n, n_knobs)) the ensemble rejects: ``votes`` = per knob with a
    predictor, its position and the invalid vote of each of its values; a config is rejected when the
    fraction of predictors voting invalid exceeds ``tau``."""
    if not votes or len(digits) == 0:
        return np.zeros(len(digits), dtype=bool)
    return np.stack([table[digits[:, k]] for k, table in votes], axis=1).mean(axis=1) > tau
