"""Multi-objective metrics (docs/METHODS.md §Metrics): Pareto front, ADRS, normalized hypervolume.

All objectives are minimized. ``Y`` arrays have shape ``(n_designs, n_objectives)`` in the
objectives' raw units (e.g. delay in seconds, LUT count, FF count).
"""

from __future__ import annotations

import numpy as np


def pareto_front(Y) -> np.ndarray:
    """Indices (ascending) of the non-dominated rows of ``Y`` (shape [n, m]; minimized).

    A row is dominated when another row is <= in every objective and < in at least one. Exact
    duplicates of a non-dominated row are all kept. Rows with a non-finite value are ignored.
    """
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or len(Y) == 0:
        return np.zeros(0, dtype=np.int64)
    finite = np.all(np.isfinite(Y), axis=1)
    keep = []
    for i in np.flatnonzero(finite):
        others = Y[finite]
        dom = np.all(others <= Y[i], axis=1) & np.any(others < Y[i], axis=1)
        if not dom.any():
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def adrs(true_front, front) -> float:
    """Average distance to reference set ([Sun-PhD] Eq. 3.20 with the distance of docs/METHODS.md §Metrics):
    ``(1/|G|) sum_{g in G} min_{w in W} max_j max(0, (w_j - g_j) / |g_j|)``.

    Args:
        true_front: G, the true Pareto front, shape [|G|, m] (no zero entries).
        front: W, the method's front (or any set of its designs), shape [|W|, m].
    Returns:
        ADRS >= 0 (0 when every true Pareto point is matched or dominated); ``inf`` when W is empty.
    """
    G = np.asarray(true_front, dtype=float)
    W = np.asarray(front, dtype=float)
    if len(G) == 0:
        raise ValueError("adrs: the true front is empty")
    if W.size == 0:
        return float("inf")
    W = W.reshape(-1, G.shape[1])
    rel = np.maximum(0.0, (W[None, :, :] - G[:, None, :]) / np.abs(G[:, None, :]))  # [|G|, |W|, m]
    return float(np.mean(np.min(np.max(rel, axis=2), axis=1)))


def normalize(Y, scale) -> np.ndarray:
    """``Y / scale`` column-wise (scale shape [m])."""
    return np.asarray(Y, dtype=float).reshape(-1, len(scale)) / np.asarray(scale, dtype=float)


def normalized_hypervolume(Y, ref, scale) -> float:
    """Hypervolume of ``Y / scale`` dominated up to the reference point ``ref`` (normalized units),
    divided by the volume of the box ``[0, ref]``, so the value lies in [0, 1].

    Points not strictly better than ``ref`` in every objective contribute nothing. Uses pymoo's
    exact hypervolume (``pymoo.indicators.hv.HV``).
    """
    from pymoo.indicators.hv import HV

    ref = np.asarray(ref, dtype=float)
    Yn = normalize(Y, scale)
    Yn = Yn[np.all(np.isfinite(Yn), axis=1)]
    Yn = Yn[np.all(Yn < ref, axis=1)]
    if len(Yn) == 0:
        return 0.0
    return float(HV(ref_point=ref)(Yn)) / float(np.prod(ref))
