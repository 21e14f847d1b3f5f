"""``method=flextensor``: FlexTensor's back-end exploration ([Zheng-ASPLOS20] §5.1; docs/METHODS.md
§flextensor) over any knob space, the template-free ``target.template=flex`` spaces above all.

One *trial* of FlexTensor:

1. **Start points** (heuristic method, simulated annealing): the paper chooses a measured point ``p``
   with probability ``exp(-gamma (E* - E_p) / E*)``. As FlexTensor's code does, the rule is applied
   when a point is measured, on its latency ``T`` (``exp(-gamma (T_p - T*) / T*)``, ``T*`` the best so
   far: with the performance ``E`` every point would keep a chance of at least ``exp(-gamma)``): the
   point enters the *pool* of start points with that probability, so the best one always does and a
   much slower one almost never. The Q-method starts each trial from the ``n_starts`` fastest points of
   the pool, the P-method from one: a random point of the pool accepted with the same probability,
   else the fastest (the code's rule). A point leaves the pool when it is used and comes back every
   ``train_every`` trials (the code re-inserts its best and retired points).
2. **Directions** (machine-learning method): ``policy=q`` (the Q-method) moves each start point one
   step along the direction the Q-network (:mod:`.qnet`) values most, among the directions that reach
   a point not evaluated yet; epsilon-greedy, ``epsilon = max(eps_start exp(-eps_decay trial), eps_min)``
   (FlexTensor's code). ``policy=p`` (the P-method) evaluates every unvisited neighbour of one start
   point per trial.
3. The new points are measured; each gives the Q-network a transition ``(p, d, e, r)`` with the paper's
   reward ``r = (E_e - E_p) / E_p = T_p / T_e - 1`` (capped at 1; an invalid point: -1). The network
   trains every ``train_every`` trials and its target network is refreshed.

Before the first trial ``n_init`` random points are measured (FlexTensor's warm-up); when the pool is
empty, ``n_starts`` random points are measured (the code measures fresh random points every trial).
"""

from __future__ import annotations

import math

from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.tensor_programs.flextensor.moves import Moves
from tunebench.methods.tensor_programs.flextensor.qnet import DirectionPolicy
from tunebench.methods.tensor_programs.flextensor.settings import FlexTensorSettings
from tunebench.search_space import Config


class FlexTensor(Method):
    """FlexTensor's exploration (module docstring). Settings:
    :class:`~tunebench.methods.tensor_programs.flextensor.settings.FlexTensorSettings` (every hyperparameter with its source)."""

    name = "flextensor"
    Settings = FlexTensorSettings
    needs = TargetNeeds(objectives="single")

    def __init__(self, settings: FlexTensorSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.policy_name, self.n_init, self.n_starts, self.gamma = s.policy, s.n_init, s.n_starts, float(s.gamma)
        self.train_every, self.eps = s.train_every, (float(s.eps_start), float(s.eps_decay), float(s.eps_min))
        self.q_args = {"hidden": s.hidden, "alpha": float(s.alpha), "lr": float(s.lr), "epochs": s.epochs,
                       "batch_size": s.batch_size, "memory": s.memory}

    def setup(self, task, target_info, history, budget, rng) -> None:
        super().setup(task, target_info, history, budget, rng)
        self.moves = Moves(self.space)
        self.policy = (DirectionPolicy(self.space.n_features, max(len(self.moves), 1), **self.q_args)
                       if self.policy_name == "q" else None)
        self.latency: dict[int, float] = {}  # evaluated points (H) -> latency; inf when invalid
        self.pending: list[int] = []  # proposed, not asked yet
        self.origin: dict[int, tuple[int, int]] = {}  # proposed point -> (start point, direction)
        self.pool: dict[int, float] = {}  # start-point candidates -> latency
        self.used: dict[int, float] = {}  # start points taken out of the pool since the last refill
        self.best = math.inf
        self.trial = 0
        self.losses: list[float] = []

    # ---- ask / tell ---------------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        out: list[Config] = []
        while len(out) < n:
            if not self.pending:
                self._plan()
                if not self.pending:
                    break  # the space is exhausted
            i = self.pending.pop(0)
            if i not in self.visited:
                self.visited.add(i)
                out.append(self.space.get(i))
        return out

    def tell(self, measurements) -> None:
        super().tell(measurements)
        for m in measurements:
            e = m.config.index
            t_e = m.latency_s if m.valid else math.inf
            self.latency[e] = t_e
            if math.isfinite(t_e):
                self.best = min(self.best, t_e)
                if self.rng.random() < self._weight(t_e):
                    self.pool[e] = t_e
            start = self.origin.pop(e, None)
            if start is None or self.policy is None:
                continue
            p, action = start
            t_p = self.latency.get(p, math.inf)
            reward = -1.0 if not math.isfinite(t_e) else min(t_p / t_e - 1.0, 1.0)
            feats = self.space.features([p, e])
            self.policy.remember(feats[0], action, feats[1], reward)

    def report(self) -> dict:
        return {"trials": self.trial, "pool": len(self.pool),
                **({"q_loss": self.losses[-1]} if self.losses else {})}

    # ---- one trial ----------------------------------------------------------------------------
    def _plan(self) -> None:
        """Fill ``pending`` with the points of the next trial, or random points (the warm-up, or an empty
        pool). A start point without an unvisited neighbour gives nothing and the next is taken; when no
        trial can give anything any more (:meth:`_stuck`), random points, or none once all are measured."""
        seen: set = set()
        stuck = False
        while not self.pending:
            if len(self.latency) < self.n_init or not self.pool or stuck:
                need = max(self.n_init - len(self.latency), self.n_starts)
                self.pending = self.space.sample(self.rng, need, exclude=self.visited)
                return
            self.trial += 1
            if self.trial % self.train_every == 0:
                self._refill()
            for p in self._start_points():
                options = list({e: (a, e) for a, e in reversed(self.moves.neighbors(p))
                                if e not in self.visited and e not in self.origin}.values())[::-1]
                for a, e in (options if self.policy is None or not options else [self._choose(p, options)]):
                    self.pending.append(e)
                    self.origin[e] = (p, a)
            stuck = not self.pending and self._stuck(seen)

    def _stuck(self, seen: set) -> bool:
        """After a trial that proposed nothing: no later trial of this plan can either (without this the
        plan looped for ever). True when no start point, in the pool or used, has a neighbour left, or
        when the Q-method's start points (the pool's fastest: no randomness) come round to a state
        (``seen``, this plan's) they were in."""
        if not any(e not in self.visited and e not in self.origin
                   for p in [*self.pool, *self.used] for _, e in self.moves.neighbors(p)):
            return True
        if self.policy is None:
            return False
        state = (tuple(self.pool), tuple(self.used), self.trial % self.train_every)  # order: ties in latency
        if state in seen:
            return True
        seen.add(state)
        return False

    def _weight(self, latency: float) -> float:
        return math.exp(-self.gamma * (latency - self.best) / self.best)

    def _start_points(self) -> list[int]:
        """Taken out of the pool: its ``n_starts`` fastest (Q-method), or one (P-method: a random one
        accepted with probability ``exp(-gamma (T - T*) / T*)``, else the fastest)."""
        if self.policy is not None:
            starts = sorted(self.pool, key=self.pool.get)[:self.n_starts]
        else:
            cand = list(self.pool)[int(self.rng.integers(len(self.pool)))]
            starts = [cand if self.rng.random() < self._weight(self.pool[cand]) else min(self.pool, key=self.pool.get)]
        for p in starts:
            self.used[p] = self.pool.pop(p)
        return starts

    def _refill(self) -> None:
        """Every ``train_every`` trials: the Q-network trains, and the start points used since the last
        refill go back into the pool (FlexTensor's code re-inserts its best and retired points), so a good
        point is tried along other directions too."""
        if self.policy is not None:
            self.losses.append(self.policy.train(self.rng))
        self.pool.update(self.used)
        self.used = {}

    def _choose(self, p: int, options: list[tuple[int, int]]) -> tuple[int, int]:
        """Epsilon-greedy over ``options`` (direction, neighbour) by the Q-network's values at ``p``."""
        start, decay, floor = self.eps
        if self.rng.random() < max(start * math.exp(-decay * self.trial), floor):
            return options[int(self.rng.integers(len(options)))]
        q = self.policy.q_values(self.space.features([p]))[0]
        return max(options, key=lambda o: q[o[0]])
