"""The final step of multi-fidelity BO: the model's predicted Pareto set evaluated at the top fidelity.

ADRS and hypervolume are measured on designs evaluated at the top fidelity, and [Sun-PhD]'s learned set
is the predicted Pareto designs run through the tool flow (§3.6.3). When the BO loop stops, the top
fidelity's posterior gives every design an optimistic bound, mean - beta x std in normalized units
(minimization; beta = 0: the posterior mean); measured designs keep their measured values (invalid ones
never count). The Pareto designs of these bounds not yet measured at the top fidelity are evaluated
there, as many as the remaining trial budget allows, the most promising first (smallest sum of bounds).
"""

from __future__ import annotations

import numpy as np

from tunebench.pareto import pareto_front


def optimistic_front(mean: np.ndarray, std: np.ndarray, beta: float, measured: dict[int, np.ndarray | None]
                     ) -> list[int]:
    """Indices of the Pareto designs of the optimistic bounds (module docstring).

    Args:
        mean, std: [N, M] posterior mean and standard deviation of every design (normalized units).
        measured: index -> normalized measured objectives (None: invalid) at the top fidelity.
    """
    bound = np.asarray(mean, dtype=float) - float(beta) * np.asarray(std, dtype=float)
    for i, y in measured.items():
        bound[i] = np.inf if y is None else y
    return [int(i) for i in pareto_front(bound)]


def final_designs(front: list[int], bound_sum: np.ndarray, measured, remaining: int) -> list[int]:
    """The designs of ``front`` not yet measured, smallest ``bound_sum`` first, at most ``remaining``."""
    new = sorted((i for i in front if i not in measured), key=lambda i: float(bound_sum[i]))
    return new[:max(0, int(remaining))]
