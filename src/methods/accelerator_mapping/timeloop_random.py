"""``method=timeloop_random``: Timeloop's random-pruned mapper ([Parashar-ISPASS19]; its ``random_pruned``
search algorithm), the mapper [Dinh-MLArchSys23] §IV compares with, on a task's mapspace.

Timeloop's mapspace is index factorization (IF) x loop permutation x spatial split x datatype bypass. Here the
spatial split (C on the array's rows, K on its columns) and the bypass (the scratchpad keeps weights and
inputs, the accumulator outputs, the register weights) are fixed by ``target=accel``'s hierarchy, so a
mapping is an IF (per dimension an ordered factorization over the four levels) and a loop permutation per
level. The search, one Timeloop search thread:

- draw an IF uniformly at random (with replacement, as Timeloop's generator);
- prune its permutation space: at each level only the loops whose factor is not 1 are permuted (a unit
  loop's place changes nothing); the innermost level (the register) keeps the canonical order, as
  Timeloop's innermost temporal level does;
- visit ``min(max_permutations_per_if_visit, size of the pruned space)`` permutations of that IF, each
  drawn uniformly (with replacement) from the pruned space, then draw the next IF;
- a mapping that does not fit (a capacity failure: with one bypass choice, every bypass of the IF failed)
  ends the visit of its IF at once.

Termination, as Timeloop's mapper thread: ``victory_condition`` consecutive valid mappings that do not
strictly improve the best (0: never), ``timeout`` consecutive invalid mappings since the last valid one
(0: never), ``search_size`` valid mappings in all (0: no limit); the run's trial budget caps the rest. A
mapping drawn again is not measured again (Timeloop would evaluate it again): its earlier result is
replayed through the same counters (``revisits``, reported), costing no trial. Timeloop runs one such
search per hardware thread, each on a share of the IF space; this method is one search (the paper does
not say how many threads it ran).

Reported: ``stop`` (``victory``, ``timeout``, ``search_size``, ``budget``, or ``revisits``: 100,000 draws in
a row were all revisits), ``last_improvement`` (the trial of the last strict improvement),
``iterations`` (Timeloop's count: trials plus revisits) and ``last_improvement_iteration`` (the last
improvement on that count), ``valid_mappings`` (revisits included), ``if_visits``, ``revisits``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, NONNEG_INT, POS_INT, knob
from tunebench.methods.accelerator_mapping import objective_value
from tunebench.methods.base import Method, TargetNeeds
from tunebench.search_space import Config

#: how many drawn mappings in a row may be revisits before the method gives up (a tiny, exhausted space)
MAX_REVISITS_IN_A_ROW = 100_000


@dataclass
class TimeloopRandomSettings(MethodSettings):
    """Timeloop's random-pruned mapper ([Parashar-ISPASS19]; defaults from Timeloop's mapper documentation)."""

    name: str = knob("timeloop_random", NAME, "the method")
    victory_condition: int = knob(500, NONNEG_INT, "stop after this many consecutive valid mappings that do not "
                                                   "improve the best (Timeloop's default 500; 0: never)")
    timeout: int = knob(1000, NONNEG_INT, "stop after this many consecutive invalid mappings (Timeloop's default "
                                          "1000; 0: never)")
    search_size: int = knob(0, NONNEG_INT, "stop after this many valid mappings (Timeloop's default 0: no limit)")
    max_permutations_per_if_visit: int = knob(16, POS_INT, "loop permutations visited per random index "
                                                           "factorization (Timeloop's default 16)")


class TimeloopRandom(Method):
    """One Timeloop random-pruned search thread over the task's mapspace (module docstring)."""

    name = "timeloop_random"
    Settings = TimeloopRandomSettings
    needs = TargetNeeds(objectives="single", mapspace=True)

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.ms = task.mod
        self.splits = {d: k.entities for d, k in zip(self.ms.dims, self.ms.space.knobs)}
        self.known: dict[int, float] = {}  # config index -> value (nan: invalid)
        self.best = math.inf
        self.since_best = self.invalid_run = self.valid_mappings = 0
        self.trials = self.iterations = self.last_improvement = self.last_improvement_iteration = 0
        self.if_visits = self.revisits = 0
        self.stop: str | None = None
        self.pending: Config | None = None
        self._new_if()

    # ---- the mapspace walk ------------------------------------------------------------------------
    def _new_if(self) -> None:
        """Draw an index factorization and prune its permutation space."""
        self.if_visits += 1
        n_lv = len(self.ms.LEVELS)
        split = {d: ents[int(self.rng.integers(len(ents)))] for d, ents in self.splits.items()}
        self.factors = [{d: split[d][n_lv - 1 - lv] for d in self.ms.dims} for lv in range(n_lv)]
        self.free = [[] if lv == 0 else [d for d in self.ms.dims if self.factors[lv][d] > 1] for lv in range(n_lv)]
        size = math.prod(math.factorial(len(f)) for f in self.free)
        self.to_visit, self.visited_perms = min(self.settings.max_permutations_per_if_visit, size), 0

    def _draw(self) -> Config:
        """A random permutation of this IF's pruned space: per level its non-unit loops in random order
        (innermost first), the unit loops after them in the canonical order."""
        orders = []
        for free in self.free:
            perm = [free[i] for i in self.rng.permutation(len(free))]
            orders.append(tuple(perm + [d for d in self.ms.dims if d not in perm]))
        return self.ms.config_of(self.factors, orders)

    def _report(self, value: float) -> None:
        """Timeloop's bookkeeping of one evaluated mapping (``nan``: invalid), then the next position."""
        self.iterations += 1
        if math.isnan(value):
            self.invalid_run += 1
            self.visited_perms = self.to_visit  # a capacity failure: this IF is bad, skip the rest of it
        else:
            self.invalid_run = 0
            self.valid_mappings += 1
            if value < self.best:
                self.best, self.since_best = value, 0
                self.last_improvement, self.last_improvement_iteration = self.trials, self.iterations
            else:
                self.since_best += 1
            self.visited_perms += 1
        s = self.settings
        if s.victory_condition and self.since_best >= s.victory_condition:
            self.stop = "victory"
        elif s.timeout and self.invalid_run >= s.timeout:
            self.stop = "timeout"
        elif s.search_size and self.valid_mappings >= s.search_size:
            self.stop = "search_size"
        elif self.visited_perms >= self.to_visit:
            self._new_if()

    # ---- the method's interface ------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        """One mapping (the next depends on whether this one fits), or none once a condition stopped it."""
        if self.stop is not None:
            return []
        for _ in range(MAX_REVISITS_IN_A_ROW):
            config = self._draw()
            if config.index not in self.known:
                self.pending = config
                return [config]
            self.revisits += 1
            self._report(self.known[config.index])
            if self.stop is not None:
                return []
        self.stop = "revisits"
        return []

    def tell(self, measurements):
        super().tell(measurements)
        for m in measurements:
            value = objective_value(m) if m.valid else math.nan
            self.known[m.config.index] = value
            self.trials += 1
            if self.pending is not None and m.config.index == self.pending.index:
                self.pending = None
                self._report(value)

    def report(self) -> dict:
        return {"stop": self.stop or "budget", "last_improvement": self.last_improvement,
                "last_improvement_iteration": self.last_improvement_iteration, "iterations": self.iterations,
                "valid_mappings": self.valid_mappings, "if_visits": self.if_visits, "revisits": self.revisits}
