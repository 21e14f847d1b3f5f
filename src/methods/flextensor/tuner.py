"""``method=flextensor``: FlexTensor's back-end exploration ([Zheng-ASPLOS20] §5.1; docs/METHODS.md
§flextensor) over any knob space, the template-free ``target.template=flex`` spaces above all.

One *trial* of FlexTensor:

1. **Start points** (heuristic method, simulated annealing): evaluated points ``p`` are chosen with
   probability proportional to ``exp(-gamma (T_p - T*) / T*)``, ``T`` the measured latency and ``T*`` the
   best one (the paper writes the rule with performance ``E``; its code applies it to the time, which
   is what tells a fast point from a slow one). ``n_starts`` distinct start points per trial.
2. **Directions** (machine-learning method): ``policy=q`` (the Q-method) moves each start point one
   step along the direction the Q-network (:mod:`.qnet`) values most, among the directions that reach
   a point not evaluated yet; epsilon-greedy, ``epsilon = max(eps_start exp(-eps_decay trial), eps_min)``
   (FlexTensor's code). ``policy=p`` (the P-method) evaluates every unvisited neighbour of one start
   point per trial.
3. The new points are measured; each gives the Q-network a transition ``(p, d, e, r)`` with the paper's
   reward ``r = (E_e - E_p) / E_p = T_p / T_e - 1`` (capped at 1; an invalid point: -1). The network
   trains every ``train_every`` trials and its target network is refreshed.

Before the first trial ``n_init`` random points are measured (FlexTensor's warm-up). A start point with
no unvisited neighbour is retired; when every evaluated point is retired, random points are measured.
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.errors import UserError
from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.flextensor.moves import Moves
from tunebench.methods.flextensor.qnet import DirectionPolicy
from tunebench.space import Config

POLICIES = ("q", "p")


class FlexTensor(Method):
    """FlexTensor's exploration (module docstring); hyperparameters in ``conf/method/flextensor.yaml``."""

    name = "flextensor"
    needs = TargetNeeds(objectives="single")

    def __init__(self, policy: str = "q", n_init: int = 20, n_starts: int = 8, gamma: float = 0.5,
                 alpha: float = 0.9, train_every: int = 5, eps_start: float = 0.8, eps_decay: float = 0.01,
                 eps_min: float = 0.1, lr: float = 0.02, epochs: int = 20, batch_size: int = 32,
                 memory: int = 1000, hidden: int = 64):
        if policy not in POLICIES:
            raise UserError(f"method.policy={policy!r}: valid: {', '.join(POLICIES)}")
        for key, value in {"n_init": n_init, "n_starts": n_starts, "train_every": train_every, "epochs": epochs,
                           "batch_size": batch_size, "memory": memory, "hidden": hidden}.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"method.{key}={value!r}: must be a positive integer")
        for key, value in {"gamma": gamma, "alpha": alpha, "lr": lr, "eps_decay": eps_decay}.items():
            if not isinstance(value, (int, float)) or value < 0:
                raise UserError(f"method.{key}={value!r}: must be a number >= 0")
        if not 0 <= eps_min <= eps_start <= 1:
            raise UserError(f"method.eps_min={eps_min!r}, method.eps_start={eps_start!r}: need 0 <= eps_min <= eps_start <= 1")
        self.policy_name, self.n_init, self.n_starts, self.gamma = policy, n_init, n_starts, float(gamma)
        self.train_every, self.eps = train_every, (float(eps_start), float(eps_decay), float(eps_min))
        self.q_args = {"hidden": hidden, "alpha": float(alpha), "lr": float(lr), "epochs": epochs,
                       "batch_size": batch_size, "memory": memory}

    def setup(self, task, target_info, history, budget, rng) -> None:
        super().setup(task, target_info, history, budget, rng)
        self.moves = Moves(self.space)
        self.policy = (DirectionPolicy(self.space.n_features, max(len(self.moves), 1), **self.q_args)
                       if self.policy_name == "q" else None)
        self.latency: dict[int, float] = {}  # evaluated points (H) -> latency; inf when invalid
        self.pending: list[int] = []  # proposed, not asked yet
        self.origin: dict[int, tuple[int, int]] = {}  # proposed point -> (start point, direction)
        self.retired: set[int] = set()
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
            start = self.origin.pop(e, None)
            if start is None or self.policy is None:
                continue
            p, action = start
            t_p = self.latency.get(p, math.inf)
            reward = -1.0 if not math.isfinite(t_e) else min(t_p / t_e - 1.0, 1.0)
            feats = self.space.features([p, e])
            self.policy.remember(feats[0], action, feats[1], reward)

    def report(self) -> dict:
        return {"trials": self.trial, "retired_start_points": len(self.retired),
                **({"q_loss": self.losses[-1]} if self.losses else {})}

    # ---- one trial ----------------------------------------------------------------------------
    def _plan(self) -> None:
        """Fill ``pending`` with the points of the next trial (or random points: the warm-up, or when
        every evaluated point is retired). Each pass that proposes nothing retires its start points."""
        while not self.pending:
            if len(self.latency) < self.n_init or not self._candidates():
                need = max(self.n_init - len(self.latency), self.n_starts)
                self.pending = self.space.sample(self.rng, need, exclude=self.visited)
                return
            self.trial += 1
            if self.policy is not None and self.trial % self.train_every == 0:
                self.losses.append(self.policy.train(self.rng))
            for p in self._start_points(self.n_starts if self.policy is not None else 1):
                options = [(a, e) for a, e in self.moves.neighbors(p)
                           if e not in self.visited and e not in self.origin]
                if not options:
                    self.retired.add(p)
                    continue
                for a, e in (options if self.policy is None else [self._choose(p, options)]):
                    self.pending.append(e)
                    self.origin[e] = (p, a)

    def _candidates(self) -> list[int]:
        return [i for i, t in self.latency.items() if math.isfinite(t) and i not in self.retired]

    def _start_points(self, k: int) -> list[int]:
        """``k`` distinct evaluated points, each drawn with weight ``exp(-gamma (T - T*) / T*)``."""
        cands = self._candidates()
        times = np.array([self.latency[i] for i in cands])
        best = min(t for t in self.latency.values() if math.isfinite(t))
        w = np.exp(-self.gamma * (times - best) / best)
        picked = self.rng.choice(len(cands), size=min(k, len(cands)), replace=False, p=w / w.sum())
        return [cands[int(j)] for j in picked]

    def _choose(self, p: int, options: list[tuple[int, int]]) -> tuple[int, int]:
        """Epsilon-greedy over ``options`` (direction, neighbour) by the Q-network's values at ``p``."""
        start, decay, floor = self.eps
        if self.rng.random() < max(start * math.exp(-decay * self.trial), floor):
            return options[int(self.rng.integers(len(options)))]
        q = self.policy.q_values(self.space.features([p]))[0]
        return max(options, key=lambda o: q[o[0]])
