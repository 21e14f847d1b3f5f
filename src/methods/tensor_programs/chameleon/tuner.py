"""``method=chameleon``: CHAMELEON's optimization loop ([Ahn-PhD] Ch. 2, §2.4; Ahn et al., "Chameleon:
Adaptive Code Optimization for Expedited Deep Neural Network Compilation", ICLR 2020; docs/METHODS.md
§chameleon) on AutoTVM's cost model and features.

One *iteration* (``iteration_opt`` of them, the first one AutoTVM's random plan of ``plan_size``):

1. retrain AutoTVM's XGBoost cost model (``loss_type`` reg: the thesis's xgb-reg) on every measurement;
2. *explore* the space on the model: ``explorer=rl`` runs the PPO agent (:mod:`.agent`) for ``step_rl``
   steps from ``episode_rl`` start configs (the best measured ones, topped up with the agent's last end
   states, then random configs), rewarded by the model's predicted fitness; ``explorer=sa`` runs AutoTVM's
   simulated annealing. The candidates are the ``plan_size`` configs of the exploration with the highest
   predicted fitness;
3. *sample*: ``sampling=greedy`` measures the candidates not measured yet, best first (AutoTVM's plan;
   with ``explorer=sa`` this is AutoTVM itself, ε-greedy tail included); ``sampling=adaptive`` measures
   Algorithm 1's sample of them (:mod:`.sampling`: k-means at the knee of the loss curve, centroids
   snapped to candidates, already-measured or invalid samples replaced by the per-knob mode). For
   adaptive sampling the candidates may include measured configs (sample synthesis replaces them) and
   the next iteration starts once the whole sample is measured (our reading of the loop: the thesis
   states no ε-greedy tail for it).

The task ends after ``iteration_opt`` iterations (``ask`` returns nothing; the harness logs the stop
as ``exhausted`` and the method's report says ``iteration_opt``) or when the trial budget runs out.
"""

from __future__ import annotations

import logging

from tunebench.methods.base import TargetNeeds
from tunebench.methods.tensor_programs.autotvm.tuner import AutoTVM
from tunebench.methods.tensor_programs.chameleon.agent import PPOExplorer
from tunebench.methods.tensor_programs.chameleon.sampling import adaptive_sample
from tunebench.methods.tensor_programs.chameleon.settings import ChameleonSettings
from tunebench.search_space import Config

log = logging.getLogger(__name__)


class Chameleon(AutoTVM):
    """CHAMELEON: adaptive exploration (PPO) and adaptive sampling on AutoTVM's cost model.

    Settings: :class:`~tunebench.methods.tensor_programs.chameleon.settings.ChameleonSettings` (AutoTVM's settings plus
    ``explorer``, ``sampling``, ``iteration_opt``, ``episode_rl``, ``step_rl``, ``threshold_meta``, ``k_range``
    and ``ppo``, each with its source).
    """

    name = "chameleon"
    Settings = ChameleonSettings
    needs = TargetNeeds(objectives="single")  # a latency (GFLOPS) tuner, as AutoTVM

    def __init__(self, settings: ChameleonSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.explorer, self.sampling = s.explorer, s.sampling
        self.iteration_opt, self.episode_rl, self.step_rl = s.iteration_opt, s.episode_rl, s.step_rl
        self.threshold_meta = float(s.threshold_meta)
        self.k_range = (s.k_range[0], s.k_range[1])
        self.ppo = s.ppo

    def setup(self, task, target_info, history, budget, rng) -> None:
        super().setup(task, target_info, history, budget, rng)
        self.agent = PPOExplorer(self.space, self.ppo, seed=self.seed) if self.explorer == "rl" else None
        self.round_log: list[dict] = []
        self.stopped = False

    # ---- proposing -----------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        if self.stopped:
            return []
        if self.sampling == "greedy":  # AutoTVM's plan walk, for iteration_opt blocks of plan_size
            left = self.iteration_opt * self.plan_size - len(self.visited)
            if left <= 0:
                self.stopped = True
                return []
            return super().ask(min(n, left))
        if self.train_ct == 0:  # the random first iteration (more while no measurement is valid)
            left = self.plan_size - len(self.visited)
            return super().ask(min(n, left) if left > 0 else n)
        out = [i for i in self.plan if i not in self.visited][:n]
        self.visited.update(out)
        for i in out:
            self.source[i] = "model"
        return [self.space.get(i) for i in out]

    # ---- learning ------------------------------------------------------------------------
    def _retrain_due(self) -> bool:
        if self.sampling == "greedy" or self.train_ct == 0:
            return super()._retrain_due()
        return all(i in self.xs for i in self.plan)

    def _retrain(self) -> None:
        if self.sampling == "adaptive" and self.train_ct + 1 >= self.iteration_opt:
            self.stopped = True  # the last iteration's sample is measured
            return
        super()._retrain()

    def _rounds_trained(self) -> int:
        return super()._rounds_trained() if self.sampling == "greedy" else self.train_ct + 1

    def _plan(self) -> tuple[list[int], dict]:
        exclude = self.visited if self.sampling == "greedy" else set()
        candidates, stats = self._explore(exclude)
        if self.sampling == "greedy":
            return [i for i in candidates if i not in self.visited][:self.plan_size], stats
        invalid = {i for i, v in self.xs.items() if v <= 0.0}
        sample: dict = {}
        plan = adaptive_sample(self.space, candidates, self.visited, invalid, threshold=self.threshold_meta,
                               k_range=self.k_range, seed=(self.seed + self.train_ct) % 2**32, stats=sample)
        if not plan:  # every sample measured and the mode too: the best unmeasured candidates instead
            plan = [i for i in candidates if i not in self.visited][:self.k_range[0]]
            sample["fallback"] = len(plan)
        self.round_log.append({"iteration": self.train_ct + 2, "candidates": len(candidates), "sample": len(plan),
                               **sample})
        return plan, {**stats, "sample": len(plan), **sample}

    def _explore(self, exclude: set[int]) -> tuple[list[int], dict]:
        """The ``plan_size`` configs with the highest predicted fitness the explorer found (none in
        ``exclude``), best first, and the explorer's statistics."""
        if self.explorer == "sa":
            found = self.sa.find_maximums(self.space, self.model.predict, self.plan_size, exclude, self.rng)
            return found, {"explorer": "sa", **self.sa.last_stats}
        visited = self.agent.explore(self._starts(), self.model.predict, self.step_rl)
        ranked = sorted((i for i in visited if i not in exclude), key=lambda i: -visited[i])
        return ranked[:self.plan_size], {"explorer": "rl", "steps": self.step_rl, "visited": len(visited)}

    def _starts(self) -> list[int]:
        """``episode_rl`` start configs: the best measured, then the agent's last end states, then random."""
        best = sorted((i for i, v in self.xs.items() if v > 0.0), key=lambda i: -self.xs[i])
        starts = list(dict.fromkeys(best + list(getattr(self.agent, "last_states", []))))[:self.episode_rl]
        if len(starts) < self.episode_rl:
            starts += self.space.sample(self.rng, self.episode_rl - len(starts), exclude=set(starts))
        return [starts[i % len(starts)] for i in range(self.episode_rl)]  # a tiny space: episodes share starts

    def report(self) -> dict:
        """Iterations run, the samples of the adaptive ones (size, k, redundant samples, whether the
        per-knob mode was synthesized) and why the task's search ended."""
        greedy = self.sampling == "greedy"
        iterations = -(-len(self.xs) // self.plan_size) if greedy else (self.train_ct + 1 if self.xs else 0)
        return {"iterations": iterations, "explorer": self.explorer, "sampling": self.sampling,
                "stop": "iteration_opt" if self.stopped else "budget",
                "samples": [r["sample"] for r in self.round_log], "k": [r.get("k") for r in self.round_log],
                "redundant": sum(r.get("redundant", 0) for r in self.round_log),
                "synthesized": sum(r.get("synthesized", 0) for r in self.round_log)}
