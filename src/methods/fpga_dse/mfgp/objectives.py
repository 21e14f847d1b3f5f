"""Objective normalization and invalid-design scoring ([Sun-PhD] §3.6.3 and §3.4.3).

Resources are divided by the device capacity (``target_info.capacity``); every other objective
(delay) by ``delay_factor`` (2) times its largest valid value among the initial designs. An invalid
design (no report) is scored ``invalid_factor`` (10) times the current worst normalized value of each
objective at that fidelity.
"""

from __future__ import annotations

import math

import numpy as np


def capacity_key(objective: str, capacity: dict) -> str | None:
    """The capacity entry that normalizes ``objective`` (same name, case-insensitive, ignoring a plural
    ``s`` or a unit suffix such as ``_count``), or None (then it is a delay-like objective)."""
    keys = {k.lower(): k for k in capacity}
    name = objective.lower()
    for cand in (name, name.rstrip("s"), name.split("_")[0], name.split("_")[0].rstrip("s")):
        if cand in keys:
            return keys[cand]
    return None


class ObjectiveScaler:
    """Maps raw objective dicts to normalized vectors [M] (all minimized).

    Args:
        objectives: objective names in order.
        capacity: device totals, e.g. {"lut": 24288, "ff": 24288, "dsp": 28}; may be empty.
        initial: raw objective dicts of the valid initial measurements (any fidelity).
        delay_factor: the scale of a non-resource objective is this times its largest initial value.
        overrides: explicit {objective: scale} that win over both rules.
    """

    def __init__(self, objectives: list[str], capacity: dict | None, initial: list[dict],
                 delay_factor: float = 2.0, overrides: dict | None = None):
        self.objectives = list(objectives)
        capacity = capacity or {}
        overrides = overrides or {}
        self.scale = np.ones(len(objectives))
        self.rule = []
        for j, name in enumerate(objectives):
            key = capacity_key(name, capacity)
            if name in overrides:
                self.scale[j], rule = float(overrides[name]), "override"
            elif key is not None and capacity[key]:
                self.scale[j], rule = float(capacity[key]), f"capacity:{key}"
            else:
                values = [abs(d[name]) for d in initial if name in d and math.isfinite(d[name])]
                top = max(values) if values else 0.0
                self.scale[j], rule = (delay_factor * top if top > 0 else 1.0), f"{delay_factor}x initial max"
            self.rule.append(rule)

    def __call__(self, raw: dict) -> np.ndarray:
        """Normalized [M] vector of one valid measurement's objectives."""
        return np.array([raw[n] for n in self.objectives], dtype=float) / self.scale


def penalize_invalid(Y: np.ndarray, valid: np.ndarray, factor: float = 10.0) -> np.ndarray:
    """Y [n, M] with invalid rows replaced by ``factor`` x the worst valid value per objective.

    With no valid row the invalid ones get ``factor`` (as if the worst normalized value were 1).
    """
    Y = np.array(Y, dtype=float, copy=True)
    valid = np.asarray(valid, dtype=bool)
    if valid.all():
        return Y
    worst = Y[valid].max(axis=0) if valid.any() else np.ones(Y.shape[1])
    worst = np.where(worst > 0, worst, np.abs(worst) + 1.0)
    Y[~valid] = factor * worst
    return Y
