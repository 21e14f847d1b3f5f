"""Fidelity costs for multi-fidelity BO: which fidelities are worth choosing, and PEIPV's weights.

[Sun-PhD] Eq. 3.15 weights the acquisition of fidelity i by rho_i = T_top / T_i, with T_i the
cumulative tool time to a report at fidelity i (its Table 3.1: HLS minutes, synthesis and
implementation tens of minutes to an hour; T_impl / T_hls ~ 24 at most). The rule here keeps that
weighting and adds what a fidelity of negligible cost calls for:

- T_i comes from ``stage_seconds`` when set; else from the running means of the stage seconds this
  task has measured, once every fidelity has been measured (a replayed table's recorded seconds, a live
  flow's measured ones); before that from the target's declared costs (``TargetInfo.fidelity_costs``:
  the table's means, a live flow's running means or its shipped table); there is no cap on rho.
- A fidelity with T_i <= ``free_ratio`` x T_top (default 1 %) is *free*: the method evaluates every
  design of the pruned space there up front (our analytical estimate takes milliseconds, against
  ~10-60 s for synthesis and implementation) and uses it as the lowest level of the fidelity chain;
  PEIPV chooses only among the costly fidelities. Without this rule rho_estimate ~ 10^3-10^4 makes
  PEIPV pick the free fidelity almost every iteration and the top fidelity is barely sampled.
"""

from __future__ import annotations

import numpy as np


def cumulative_seconds(fidelities: list[str], declared: dict | None, stage_seconds: list | None,
                       observed: list[float | None], floor: float) -> list[float]:
    """T_i per fidelity (cheapest first): ``stage_seconds`` (per stage, summed) when given; else the
    running means of the stage seconds this task measured (``observed``, per fidelity's own stage)
    once every fidelity has been measured, summed; else the target's declared cumulative costs; else the
    observed means with ``floor`` for the unseen ones. Every T_i is at least ``floor``."""
    if stage_seconds is not None:
        cum = np.cumsum([float(s) for s in stage_seconds])
    elif observed and all(s is not None for s in observed):
        cum = np.cumsum([float(s) for s in observed])
    elif declared and all(f in declared for f in fidelities):
        cum = np.array([float(declared[f]) for f in fidelities])
    else:
        cum = np.cumsum([floor if s is None else float(s) for s in observed])
    return [max(float(t), floor) for t in cum]


def free_levels(costs: list[float] | None, ratio: float | None) -> list[int]:
    """Levels (below the top) whose cost is at most ``ratio`` x the top's: evaluated everywhere up
    front, never chosen by the acquisition. None or an empty cost list: none are free."""
    if ratio is None or not costs:
        return []
    return [k for k in range(len(costs) - 1) if costs[k] <= ratio * costs[-1]]


def rho(costs: list[float], rho_max: float | None = None) -> list[float]:
    """rho_i = T_top / T_i ([Sun-PhD] Eq. 3.15), optionally capped at ``rho_max``."""
    out = [costs[-1] / t for t in costs]
    return out if rho_max is None else [min(r, float(rho_max)) for r in out]
