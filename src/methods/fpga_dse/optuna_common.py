"""Optuna samplers driven through our ask/tell loop (``nsga2``, ``motpe``).

Each Optuna trial proposes one value per knob (categorical over the values that occur in the pruned
space). A proposal outside the pruned space (or already measured) is repaired to the nearest
unmeasured config of the space in the min-max feature encoding (L1 distance, ties by index); the
trial is told the objectives measured for that config (a decoder from genotype to a feasible
design, standard in constrained evolutionary search). Invalid designs are told as FAIL. Measured
at the target's highest fidelity only. The study lives in memory, or in a storage that workers
share (``method.storage``, :mod:`tunebench.methods.fpga_dse.optuna_storage`).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

import numpy as np

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import bad, join, knob
from tunebench.listed_space import ListedSpace
from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.fpga_dse.optuna_storage import (
    journal_problem,
    open_storage,
    shared_study,
    storage_problem,
    study_problem,
)

log = logging.getLogger(__name__)


@dataclass
class OptunaSettings(MethodSettings):
    """Where the study of ``nsga2`` and ``motpe`` lives (:mod:`tunebench.methods.fpga_dse.optuna_storage`)."""

    storage: str | None = knob(None, storage_problem,
                               "our addition: null = the study in memory; journal:<file> or an Optuna RDB URL "
                               "(postgresql://..., sqlite:///<file>) = a study workers share (docs/USAGE.md §Shared "
                               "Optuna studies)")
    study: str | None = knob(None, study_problem,
                             "our addition: with storage, the shared study's name prefix (null: tunebench-<method>); "
                             "the study of a task is <study>-<task id>; runs with the same study share it")

    def check(self, prefix: str) -> None:
        problem = journal_problem(self.storage)
        if problem:
            raise bad(join(prefix, "storage"), self.storage, problem)


def _choice(entity):
    """A knob value as an Optuna categorical choice: a tuple (split factors) as its text, since Optuna's
    NSGA-II crossover fails on tuple choices and a storage holds plain values only; any other value as
    it is. The choices' order, and so what the samplers draw, stays the same."""
    return repr(entity) if isinstance(entity, tuple) else entity


class OptunaMethod(Method):
    """Base of the Optuna methods: a subclass's settings extend :class:`OptunaSettings`; it makes the sampler."""

    name = "optuna"
    needs = TargetNeeds(objectives="multi")  # multi-objective samplers (a Pareto front), as docs/USAGE.md says

    def __init__(self, settings: OptunaSettings | None = None, **overrides):
        """Also opens ``method.storage`` (its schema is created now, while the harness checks the config:
        before any worker starts)."""
        super().__init__(settings, **overrides)
        self.storage_url, self.study_prefix = self.settings.storage, self.settings.study
        if self.storage_url:
            open_storage(self.storage_url)

    def make_sampler(self, seed: int):
        raise NotImplementedError

    def _study(self, task, sampler):
        import optuna

        directions = ["minimize"] * len(self.objectives)
        if not self.storage_url:
            return optuna.create_study(directions=directions, sampler=sampler)
        name = f"{self.study_prefix or 'tunebench-' + self.name}-{task.id}"
        return shared_study(open_storage(self.storage_url), name, len(self.objectives), sampler)

    def setup(self, task, target_info, history, budget, rng):
        import optuna
        from optuna.distributions import CategoricalDistribution

        super().setup(task, target_info, history, budget, rng)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.objectives = list(target_info.objectives)
        sampler = self.make_sampler(int(rng.integers(2**31)))
        self.study = self._study(task, sampler)
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.pending: dict[int, object] = {}  # config index -> optuna trial
        self.product = not isinstance(self.space, ListedSpace)
        if self.product:  # every combination of knob values is a config: no table of the space
            self.dists, self._digit_of = {}, {}
            for kn in self.space.knobs:
                if len(kn.entities) > 1:
                    self._digit_of[kn.name] = {_choice(e): d for d, e in enumerate(kn.entities)}
                    self.dists[kn.name] = CategoricalDistribution(list(self._digit_of[kn.name]))
            return
        digits = np.array([self.space.digits(i) for i in range(self.space.size)],
                          dtype=np.int64).reshape(self.space.size, len(self.space.knobs))  # 2-D when empty too
        self._digits = digits
        self._feat = self.space.features(range(self.space.size))
        self.dists, self._digit_of = {}, {}
        for k, kn in enumerate(self.space.knobs):
            present = sorted(set(digits[:, k].tolist()))
            if len(present) > 1:
                self._digit_of[kn.name] = {_choice(kn.entities[d]): d for d in present}
                self.dists[kn.name] = CategoricalDistribution(list(self._digit_of[kn.name]))

    def _repair(self, params: dict) -> int:
        if self.product:  # the config the trial names; once measured, an unmeasured one at random
            i = self.space.index_of_digits([self._digit_of[kn.name][params[kn.name]] if kn.name in params else 0
                                            for kn in self.space.knobs])
            if i not in self.visited:
                return i
            left = self.space.sample(self.rng, 1, exclude=self.visited)
            return left[0] if left else -1
        row = []
        for k, kn in enumerate(self.space.knobs):
            v = params.get(kn.name)
            row.append(self._digit_of[kn.name][v] if v is not None else int(self._digits[0, k]))
        want = np.concatenate([np.asarray(kn.encode(d), dtype=np.float32) for kn, d in zip(self.space.knobs, row)])
        dist = np.abs(self._feat - want).sum(axis=1)
        for i in np.argsort(dist, kind="stable"):
            if int(i) not in self.visited:
                return int(i)
        return -1

    def ask(self, n):
        out = []
        for _ in range(n):
            if len(self.visited) >= self.space.size:
                break
            trial = self.study.ask(self.dists)
            trial.set_user_attr("worker", self.worker)  # who measured it (a shared study has several)
            i = self._repair(trial.params)
            if i < 0:
                break
            self.visited.add(i)
            self.pending[i] = trial
            out.append(self.space.get(i))
        return out

    def tell(self, measurements):
        import optuna

        super().tell(measurements)
        for m in measurements:
            trial = self.pending.pop(m.config.index, None)
            if trial is None:  # resumed records: nothing to tell the sampler
                continue
            if m.valid:
                self.study.tell(trial, [float(m.objectives[o]) for o in self.objectives])
            else:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
