"""Parallel simulated annealing over a :class:`~tunebench.search_space.Space` (AutoTVM's model optimizer).

This is the search AutoTVM runs on its cost model (``SimulatedAnnealingOptimizer.find_maximums``
in ``tvm/autotvm/tuner/sa_model_optimizer.py``), written against a plain score function so that
any model can drive it (autotvm's XGBoost, dgp's deep GP mean, chameleon's cost model):

- ``parallel_size`` Markov chains start from distinct random configs, or, when ``persistent``,
  from where the previous call on the same space left them;
- every step moves every chain by one random walk (one knob, with more than one entity, set to
  another of its entities: the move of :meth:`Space.random_walk`), scores all the moved points
  with *one* ``score_fn`` call, and accepts each move with the Metropolis probability
  ``exp((new - old) / (t + 1e-5))`` (higher score is better);
- the temperature falls linearly from ``temp[0]`` towards ``temp[1]`` over ``n_iter`` steps;
- a min-heap keeps the best ``num`` distinct points seen that are not in ``exclusive``;
- the search stops after ``n_iter`` steps, or ``early_stop`` steps after the heap last changed.

Indices are handled as ``int64`` arrays; the moves are vectorized over the chains (digits of all
chains at once), so a step costs one ``score_fn`` call plus a few numpy operations.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable

import numpy as np

from tunebench.listed_space import ListedSpace
from tunebench.search_space import Space

log = logging.getLogger(__name__)

#: ``score_fn(indices) -> scores``: indices int64 of shape (n,), scores float of shape (n,), higher is better
ScoreFn = Callable[[np.ndarray], np.ndarray]


def place_values(space: Space) -> np.ndarray:
    """Mixed-radix place values of the knobs, shape (n_knobs,), int64 (first knob least significant)."""
    if space.size >= 2**63:
        raise ValueError(f"space of size {space.size} does not fit int64 indices")
    return np.concatenate([[1], np.cumprod(space.dims[:-1])]).astype(np.int64)


def index_digits(space: Space, indices: np.ndarray) -> np.ndarray:
    """Entity index of every knob for each config: shape (n, n_knobs), int64 (``Space.digit_rows``)."""
    return space.digit_rows(indices)


def random_walk(space: Space, indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One :meth:`Space.random_walk` move for each index, vectorized: shape (n,) int64 in, (n,) out.

    Each point gets one knob chosen uniformly among the knobs with more than one entity, set to a
    uniformly chosen *other* entity. A space without such a knob (size 1) returns the points as is.
    """
    indices = np.asarray(indices, dtype=np.int64)
    if isinstance(space, ListedSpace):  # a listed subset: move along the listed configs only
        return space.walk(indices, rng)
    movable = np.flatnonzero(space.dims > 1)
    if len(movable) == 0 or len(indices) == 0:
        return indices.copy()
    strides = place_values(space)
    knob = movable[rng.integers(len(movable), size=len(indices))]
    old = (indices // strides[knob]) % space.dims[knob]
    new = rng.integers(space.dims[knob] - 1)  # one of the other d-1 entities: skip over the old one
    new = np.where(new >= old, new + 1, new)
    return indices + (new - old) * strides[knob]


class _TopK:
    """The best ``num`` distinct points offered so far, none of them in ``exclusive`` (a min-heap)."""

    def __init__(self, num: int, exclusive: set[int]):
        self.num, self.exclusive = num, exclusive
        self.heap: list[tuple[float, int]] = []
        self.members: set[int] = set()

    def threshold(self) -> float:
        """The score a new point must beat to enter (``-inf`` while the heap is not full)."""
        return self.heap[0][0] if len(self.heap) >= self.num else -np.inf

    def offer(self, scores: np.ndarray, points: np.ndarray) -> bool:
        """Offer a batch of points; True when the heap changed."""
        changed = False
        cand = np.flatnonzero(scores > self.threshold())
        for j in cand[np.argsort(-scores[cand], kind="stable")]:  # best first: fewer replacements
            s, p = float(scores[j]), int(points[j])
            if p in self.members or p in self.exclusive or not s > self.threshold():
                continue
            if len(self.heap) < self.num:
                heapq.heappush(self.heap, (s, p))
            else:
                _, out = heapq.heapreplace(self.heap, (s, p))
                self.members.discard(out)
            self.members.add(p)
            changed = True
        return changed

    def best_first(self) -> list[tuple[float, int]]:
        return sorted(self.heap, key=lambda sp: (-sp[0], sp[1]))


class SimulatedAnnealing:
    """AutoTVM's parallel simulated annealing, for any score function over a space.

    Args:
        n_iter: maximum number of steps per call (AutoTVM: 500).
        parallel_size: number of parallel chains (AutoTVM: 128); capped at the space size.
        temp: ``(start, end)`` temperature, decreased linearly by ``(start - end) / (n_iter + 1)``
            per step, or one float for a constant temperature (AutoTVM: ``(1, 0)``).
        persistent: start each call from the chains' final points of the previous call on the
            same space (AutoTVM: True).
        early_stop: stop when the top-``num`` heap has not changed for this many steps (AutoTVM: 50).
        log_interval: log progress every this many steps at DEBUG level (0: only a summary line).

    After each call, ``last_stats`` holds ``{"steps", "last_update", "seconds", "best_score"}``.
    """

    def __init__(self, n_iter: int = 500, parallel_size: int = 128, temp=(1.0, 0.0), persistent: bool = True,
                 early_stop: int = 50, log_interval: int = 50):
        if n_iter < 0 or parallel_size < 1 or early_stop < 1:
            raise ValueError(f"bad SA settings: n_iter={n_iter}, parallel_size={parallel_size}, "
                             f"early_stop={early_stop}")
        self.n_iter, self.parallel_size = int(n_iter), int(parallel_size)
        self.temp = float(temp) if isinstance(temp, (int, float)) else tuple(float(t) for t in temp)
        if isinstance(self.temp, tuple) and len(self.temp) != 2:
            raise ValueError(f"temp={temp!r}: one float or (start, end)")
        self.persistent, self.early_stop, self.log_interval = bool(persistent), int(early_stop), int(log_interval)
        self._points: np.ndarray | None = None
        self._space: Space | None = None
        self.last_stats: dict = {}

    def _start_points(self, space: Space, rng: np.random.Generator) -> np.ndarray:
        n = min(self.parallel_size, space.size)
        if self.persistent and self._space is space and self._points is not None and len(self._points) == n:
            return self._points.copy()
        return np.array(space.sample(rng, n), dtype=np.int64)

    def find_maximums(self, space: Space, score_fn: ScoreFn, num: int, exclusive: set[int],
                      rng: np.random.Generator) -> list[int]:
        """Up to ``num`` distinct config indices with the highest scores found, best first.

        Args:
            space: the space searched.
            score_fn: ``score_fn(indices: int64 (n,)) -> float (n,)``, higher is better.
            num: how many points to return (fewer when the walk meets fewer eligible points).
            exclusive: indices never returned (e.g. configs already measured); not modified.
            rng: the generator for start points, moves and acceptance draws.
        """
        tic = time.perf_counter()
        points = self._start_points(space, rng)
        scores = np.asarray(score_fn(points), dtype=np.float64)
        top = _TopK(num, exclusive)
        top.offer(scores, points)
        if isinstance(self.temp, tuple):
            t, cool = self.temp[0], (self.temp[0] - self.temp[1]) / (self.n_iter + 1)
        else:
            t, cool = self.temp, 0.0

        step = last_update = 0
        while step < self.n_iter and step < last_update + self.early_stop:
            new_points = random_walk(space, points, rng)
            new_scores = np.asarray(score_fn(new_points), dtype=np.float64)
            # min(., 1): the probability is 1 for any improvement, and exp() cannot overflow
            accept_p = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1.0))
            accept = rng.random(len(points)) < accept_p
            points[accept], scores[accept] = new_points[accept], new_scores[accept]
            if top.offer(new_scores, new_points):
                last_update = step
            step += 1
            t -= cool
            if self.log_interval and step % self.log_interval == 0:
                log.debug("SA step %d  last update %d  heap min %.4g  temp %.3f  %.2fs", step, last_update,
                          top.threshold(), t, time.perf_counter() - tic)

        if self.persistent:
            self._points, self._space = points, space
        best = top.best_first()
        self.last_stats = {"steps": step, "last_update": last_update, "seconds": time.perf_counter() - tic,
                           "best_score": best[0][0] if best else None}
        log.debug("SA done: %s", self.last_stats)
        return [p for _, p in best]
