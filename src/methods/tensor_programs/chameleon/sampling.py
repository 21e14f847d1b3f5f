"""Adaptive sampling and sample synthesis of CHAMELEON ([Ahn-PhD] Ch. 2, §2.4.3 and Algorithm 1; published
as Ahn et al., "Chameleon: Adaptive Code Optimization for Expedited Deep Neural Network Compilation",
ICLR 2020; docs/REFERENCES.md).

Instead of measuring the cost model's top candidates (AutoTVM's greedy sampling), the candidates the
explorer found are clustered with k-means and the configs nearest to the centroids are measured:

- *Threshold-based swift meta-search*: k runs over ``k_range`` (the paper's ``range(8, 64)``); the loop
  exits at the first k whose L2 loss (k-means inertia) satisfies ``threshold x loss >= previous loss``,
  the knee of the loss curve (``threshold_meta`` = 2.5 in the paper's Table 2.2). As in Algorithm 1, the
  centroids of that k are returned (they were computed before the test).
- Centroids are snapped to the nearest candidate (in the space's feature encoding), each candidate once.
- *Sample synthesis*: a snapped candidate already measured (or known invalid) is replaced by the per-knob
  mode of the candidates that are not known invalid (the most frequent value of each knob); duplicates are
  kept once, and a synthesized config that was measured already is dropped.
"""

from __future__ import annotations

import numpy as np


def at_knee(loss: float, previous: float, threshold: float) -> bool:
    """Algorithm 1, line 5: the loss no longer fell by the factor ``threshold`` (exit the meta-search)."""
    return threshold * loss >= previous


def knee_k(losses: dict[int, float], threshold: float) -> int:
    """The k at which the meta-search exits, given the loss of every k: the first k (ascending) at the
    knee (:func:`at_knee`); the largest k when the loss keeps falling fast enough."""
    ks = sorted(losses)
    for previous, k in zip([np.inf] + [losses[j] for j in ks], ks):
        if at_knee(losses[k], previous, threshold):
            return k
    return ks[-1]


_THREADS: list = []  # scikit-learn's thread pools, found once (finding them takes ~10 ms; limiting them ~0.02)


def cluster(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, float]:
    """(centroids [k, d], L2 loss = sum of squared distances to the nearest centroid) of k-means on X, on
    one OpenMP thread: for a few dozen candidates 1.2 ms, against 4-30 ms on two threads when other work
    shares the 2-core project machine (the same centroids; the loss summed in one order)."""
    from sklearn.cluster import KMeans
    from threadpoolctl import ThreadpoolController

    if not _THREADS:
        _THREADS.append(ThreadpoolController())
    with _THREADS[0].limit(limits=1, user_api="openmp"):
        km = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X)
    return km.cluster_centers_, float(km.inertia_)


def meta_search(X: np.ndarray, threshold: float, k_range: tuple[int, int], seed: int) -> np.ndarray:
    """Centroids of the k chosen by the threshold-based meta-search (module docstring)."""
    lo, hi = k_range
    hi = min(hi, len(X) + 1)
    if len(X) <= lo:  # fewer candidates than the smallest k: every candidate is its own cluster
        return X.copy()
    previous, centroids = np.inf, None
    for k in range(lo, hi):  # the losses are computed only up to the knee (knee_k given every loss)
        centroids, loss = cluster(X, k, seed)
        if at_knee(loss, previous, threshold):
            break
        previous = loss
    return centroids


def snap(centroids: np.ndarray, X: np.ndarray) -> list[int]:
    """Row indices of X nearest to each centroid, each row at most once (nearest free row otherwise)."""
    taken: set[int] = set()
    out = []
    for c in centroids:
        order = np.argsort(((X - c) ** 2).sum(axis=1), kind="stable")
        row = next((int(r) for r in order if int(r) not in taken), None)
        if row is not None:
            taken.add(row)
            out.append(row)
    return out


def mode_config(space, candidates: list[int], invalid: set[int]) -> int | None:
    """The config index whose knobs take each knob's most frequent value among ``candidates`` not in
    ``invalid`` (ties: the smaller entity index); None when every candidate is invalid. In a space that
    lists its configs (a measured or pruned space) that combination may not be one of them: then the
    candidate sharing the most knob values with it (ties: the first in ``candidates``), ours; Algorithm 1
    synthesizes in a product space."""
    pool = [i for i in candidates if i not in invalid]
    if not pool:
        return None
    digits = np.array([space.digits(int(i)) for i in pool])
    modes = [int(np.bincount(col).argmax()) for col in digits.T]
    if hasattr(space, "contains_digits") and not space.contains_digits(modes):
        return int(pool[int(np.argmax((digits == np.array(modes)).sum(axis=1)))])
    return space.index_of_digits(modes)


def adaptive_sample(space, candidates: list[int], visited: set[int], invalid: set[int], *, threshold: float = 2.5,
                    k_range: tuple[int, int] = (8, 64), seed: int = 0, stats: dict | None = None) -> list[int]:
    """Algorithm 1: the configs to measure from ``candidates`` (config indices, e.g. the explorer's
    best), none of them in ``visited``; ``invalid``: configs known to fail (left out of the mode).
    ``stats`` (optional) receives ``k`` (the clusters), ``redundant`` (snapped samples already
    measured) and ``synthesized`` (1 when the per-knob mode was measured in their place)."""
    candidates = list(dict.fromkeys(int(i) for i in candidates))
    if not candidates:
        return []
    X = space.features(candidates).astype(np.float64)
    rows = snap(meta_search(X, threshold, k_range, seed), X)
    chosen = [candidates[r] for r in rows]
    mode = None
    out = []
    redundant = 0
    for i in chosen:
        if i in visited:  # sample synthesis: the per-knob mode instead of a redundant sample
            redundant += 1
            mode = mode_config(space, candidates, invalid) if mode is None else mode
            i = mode
            if i is None or i in visited:
                continue
        if i not in out:
            out.append(i)
    if stats is not None:
        stats.update(k=len(rows), redundant=redundant, synthesized=int(mode is not None and mode in out))
    return out
