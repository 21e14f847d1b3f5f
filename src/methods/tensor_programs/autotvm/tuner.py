"""``method=autotvm``: AutoTVM's ``XGBTuner`` ([AutoTVM]; docs/METHODS.md §autotvm).

AutoTVM's model-based tuning loop (``ModelBasedTuner`` in ``tvm/autotvm/tuner/model_based_tuner.py``)
on tunebench's ask/tell interface:

- until the cost model is first trained, ``ask`` returns uniformly random unvisited configs;
- ``tell`` records every measurement (invalid ones with throughput 0); whenever the number of
  measured configs reaches ``plan_size × (train_ct + 1)`` and at least one is valid, it retrains
  the XGBoost model (:class:`~tunebench.methods.tensor_programs.autotvm.xgb_model.XGBCostModel`) on all of them and runs
  simulated annealing (:class:`~tunebench.methods.annealing.SimulatedAnnealing`) on the model to
  plan the next ``plan_size`` configs (best predicted first, none already visited);
- ``ask`` walks through the plan, skipping configs visited meanwhile; the last
  ``int(eps_greedy × plan_size)`` entries of each plan are replaced by random configs, and so is
  everything after the plan is used up, until the next retraining (AutoTVM's ``next_batch``);
- a config is never returned twice; when the space is exhausted ``ask`` returns fewer (or none).

Model training and the SA search run inside ``tell``, so the harness's search clock covers them.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from tunebench.errors import UserError
from tunebench.methods.annealing import SimulatedAnnealing
from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.tensor_programs.autotvm.settings import AutoTVMSettings
from tunebench.methods.tensor_programs.autotvm.xgb_model import XGBCostModel
from tunebench.search_space import Config
from tunebench.task import Measurement

log = logging.getLogger(__name__)


def throughput(m: Measurement, flops: int) -> float:
    """GFLOPS of a measurement, 0 when invalid (from the latency when the target left ``gflops`` at 0). On a
    target whose one objective is not the latency (``target=accel``: energy per MAC), the throughput of that
    objective instead: ``flops / score / 1e9``, higher for a lower value, as the model ranks."""
    if len(m.objectives) == 1 and "latency_s" not in m.objectives:
        score = m.score
        return (flops or 1e9) / score / 1e9 if m.valid and math.isfinite(score) and score > 0 else 0.0
    if not m.valid or not math.isfinite(m.latency_s) or m.latency_s <= 0:
        return 0.0
    if m.gflops > 0:
        return float(m.gflops)
    return (flops or 1e9) / m.latency_s / 1e9


class AutoTVM(Method):
    """AutoTVM's XGBTuner: XGBoost cost model + simulated annealing planning + ε-greedy.

    Settings: :class:`~tunebench.methods.tensor_programs.autotvm.settings.AutoTVMSettings` (every hyperparameter with
    its source).

    Attributes after tuning: ``train_log`` (one dict per (re)training: measurements, model fit and SA
    statistics, seconds) and ``source`` (config index -> ``"random"``, ``"model"`` or ``"eps"``: why it
    was proposed; ``"eps"`` = a random config in place of a plan's ε-greedy tail or after its end).
    """

    name = "autotvm"
    Settings = AutoTVMSettings
    # one objective: a latency tuner; its simulated annealing walks a product knob space (TVM templates),
    # not the pruned directive spaces of the multi-objective FPGA targets (it proposed configs outside them)
    needs = TargetNeeds(objectives="single")

    def __init__(self, settings: AutoTVMSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.plan_size, self.eps_greedy = int(s.plan_size), float(s.eps_greedy)
        self.model_kw = dict(loss_type=s.loss_type, feature=s.feature, num_boost_round=s.num_boost_round,
                             early_stopping_rounds=s.early_stopping_rounds, recall_n=self.plan_size,
                             params=dict(s.xgb_params or {}))
        self.sa_kw = dict(n_iter=s.sa_n_iter, parallel_size=s.sa_parallel_size, temp=tuple(s.sa_temp),
                          persistent=s.sa_persistent, early_stop=s.sa_early_stop)
        try:  # fail at construction (the harness validates the config before a run), not mid-run
            SimulatedAnnealing(**self.sa_kw)
        except (TypeError, ValueError) as exc:
            raise UserError(f"method: bad simulated annealing setting: {exc}") from None

    def setup(self, task, target_info, history, budget, rng) -> None:
        super().setup(task, target_info, history, budget, rng)
        self.model = XGBCostModel(self.space, seed=int(rng.integers(2**31)), **self.model_kw)
        self.sa = SimulatedAnnealing(**self.sa_kw)
        self.xs: dict[int, float] = {}  # measured config index -> throughput (GFLOPS; 0 = invalid)
        self.plan: list[int] = []
        self.plan_pt = 0
        self.train_ct = 0
        self.train_log: list[dict] = []
        self.source: dict[int, str] = {}

    # ---- proposing -----------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        out: list[int] = []
        n_eps = int(self.eps_greedy * self.plan_size)
        while len(out) < n and len(self.visited) < self.space.size:
            while self.plan_pt < len(self.plan) and self.plan[self.plan_pt] in self.visited:
                self.plan_pt += 1
            if self.plan_pt >= len(self.plan) - n_eps:
                break  # no plan yet, or in its ε-greedy tail, or past its end: random from here on
            index = self.plan[self.plan_pt]
            self.visited.add(index)
            self.source[index] = "model"
            out.append(index)
        if len(out) < n:
            kind = "eps" if self.plan else "random"
            for index in self.space.sample(self.rng, n - len(out), exclude=self.visited):
                self.visited.add(index)
                self.source[index] = kind
                out.append(index)
        return [self.space.get(i) for i in out]

    # ---- learning ------------------------------------------------------------------------
    def tell(self, measurements: list[Measurement]) -> None:
        super().tell(measurements)
        for m in measurements:
            self.xs[m.config.index] = throughput(m, self.task.flops)
        if self._retrain_due() and max(self.xs.values(), default=0.0) > 1e-6:
            self._retrain()

    def _retrain_due(self) -> bool:
        """AutoTVM retrains whenever another ``plan_size`` configs have been measured."""
        return len(self.xs) >= self.plan_size * (self.train_ct + 1)

    def _plan(self) -> tuple[list[int], dict]:
        """The next plan (config indices, best first) from the freshly trained model, and the
        explorer's statistics: AutoTVM's SA, the ``plan_size`` best predicted unvisited configs."""
        plan = self.sa.find_maximums(self.space, self.model.predict, self.plan_size, self.visited, self.rng)
        return plan, {"explorer": "sa", **self.sa.last_stats}

    def _retrain(self) -> None:
        """Fit the model on every measurement and plan the next configs (:meth:`_plan`)."""
        tic = time.perf_counter()
        indices = np.fromiter(self.xs.keys(), dtype=np.int64, count=len(self.xs))
        self.model.fit(indices, np.fromiter(self.xs.values(), dtype=np.float64, count=len(self.xs)))
        fit_s = time.perf_counter() - tic
        self.plan, stats = self._plan()
        self.plan_pt = 0
        self.train_ct = self._rounds_trained()
        entry = {"n_measured": len(self.xs), "fit": dict(self.model.last_fit), "fit_s": fit_s,
                 "search": stats, "plan": len(self.plan), "seconds": time.perf_counter() - tic}
        self.train_log.append(entry)
        log.info("%s %s: model %d trained on %d measurements (%d rounds, a-recall %.3f), %s %d steps, "
                 "plan of %d, %.2fs", self.name, self.task.name, len(self.train_log), len(self.xs),
                 entry["fit"]["rounds"], entry["fit"]["a_recall"], stats["explorer"].upper(),
                 stats.get("steps", 0), len(self.plan), entry["seconds"])

    def _rounds_trained(self) -> int:
        """``train_ct`` after a retraining: AutoTVM counts blocks of ``plan_size`` measurements."""
        return len(self.xs) // self.plan_size
