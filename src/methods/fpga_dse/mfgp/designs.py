"""Initial designs: random nested sets across fidelities ([Sun-PhD] Alg. 2 line 4) and RTED ([TED],
as used by [RTED] and by the DAC19 baseline of [Sun-PhD] §3.6.3)."""

from __future__ import annotations

import numpy as np


def nested_counts(space_size: int, n_per_fidelity: list[int]) -> list[int]:
    """How many designs :func:`nested_random` gives each fidelity (none fidelity more than the space holds)."""
    n = min(n_per_fidelity[0], space_size) if n_per_fidelity else 0
    return [min(k, n) for k in n_per_fidelity]


def nested_random(space_size: int, n_per_fidelity: list[int], rng: np.random.Generator) -> list[list[int]]:
    """Random design indices per fidelity (cheapest first) with X_impl ⊆ X_syn ⊆ X_hls: the first
    ``n_per_fidelity[k]`` of one random permutation. ``n_per_fidelity`` must be non-increasing."""
    if any(b > a for a, b in zip(n_per_fidelity, n_per_fidelity[1:])):
        raise ValueError(f"n_init must be non-increasing from the cheapest fidelity, got {n_per_fidelity}")
    counts = nested_counts(space_size, n_per_fidelity)
    order = [int(i) for i in rng.choice(space_size, size=counts[0], replace=False)]
    return [order[:k] for k in counts]


def rted(features: np.ndarray, n: int, rng: np.random.Generator, pool: int = 500, mu: float = 0.1,
         exclude: set[int] | None = None) -> list[int]:
    """Randomized transductive experimental design: greedily pick ``n`` rows of ``features`` [N, d]
    from a random candidate ``pool`` that best represent the pool under an RBF kernel.

    TED (Yu, Bi, Tresp, ICML 2006) step: pick argmax_i ||K[:, i]||^2 / (K[i, i] + mu), then
    K <- K - K[:, i] K[i, :] / (K[i, i] + mu). The kernel bandwidth is the median pairwise distance.
    """
    candidates = np.array([i for i in range(len(features)) if not exclude or i not in exclude], dtype=np.int64)
    if len(candidates) > pool:
        candidates = rng.choice(candidates, size=pool, replace=False)
    F = features[candidates]
    d2 = ((F[:, None, :] - F[None, :, :]) ** 2).sum(-1)
    med = np.median(d2[d2 > 0]) if (d2 > 0).any() else 1.0
    K = np.exp(-d2 / med)
    chosen: list[int] = []
    for _ in range(min(n, len(candidates))):
        score = (K ** 2).sum(axis=0) / (np.diag(K) + mu)
        score[chosen] = -np.inf
        i = int(np.argmax(score))
        chosen.append(i)
        K = K - np.outer(K[:, i], K[i, :]) / (K[i, i] + mu)
    return [int(candidates[i]) for i in chosen]
