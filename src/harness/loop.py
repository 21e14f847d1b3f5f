"""The ask/tell loop that tunes one task: identical budgets, clocks and logging for every method.

Every config a method proposes first goes through the static check of a target that has one
(:class:`~tunebench.targets.capabilities.StaticChecks`: e.g. a GPU kernel that breaks the GPU's per-block limits). A rejected config is not measured and takes no
trial: the method is told it as an invalid measurement whose error starts with
:data:`~tunebench.targets.base.STATIC_INVALID`, and the loop asks again. Past ``budget.max_static_rejects``
rejections in a row (no config passing the check in between), each rejected config is a failed trial, so a
method that proposes nothing else still ends within its budget.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from tunebench.harness.observers import notify
from tunebench.methods.base import Budget, Method
from tunebench.targets.base import Target, is_static_invalid, static_invalid
from tunebench.targets.capabilities import StaticChecks
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)


@dataclass
class TaskResult:
    """What tuning one task produced.

    Attributes:
        measurements: every measurement of the task, prior (resumed) ones first, in trial order.
        search_s: the task's search clock in seconds (prior attempts included).
        stop_reason: why the loop ended: ``trials``, ``seconds``, ``early_stopping`` or ``exhausted``.
        lock_wait_s: seconds spent waiting for another process's device lock (not in ``search_s``).
        report: what ``method.report()`` returned (called once, when the loop ended).
        static_rejected: the configs the target's static check rejected that took no trial (told to the
            method, never measured nor recorded), in the order proposed.
    """

    task: Task
    measurements: list[Measurement] = field(default_factory=list)
    search_s: float = 0.0
    stop_reason: str = ""
    lock_wait_s: float = 0.0
    best_so_far: list[float] = field(default_factory=list)  # best valid score (Measurement.score) so far
    report: dict = field(default_factory=dict)
    static_rejected: list[Measurement] = field(default_factory=list)

    def __post_init__(self) -> None:
        prior, self.measurements, self.best_so_far = self.measurements, [], []
        for m in prior:
            self.append(m)

    def append(self, m: Measurement) -> None:
        """Add a measurement; the best-so-far curve is kept here, and only here."""
        best = self.best_latency_s
        self.measurements.append(m)
        self.best_so_far.append(min(best, m.score) if m.valid else best)

    @property
    def best_latency_s(self) -> float:
        """The best valid score so far (``Measurement.score``: the latency, or the target's one
        objective; inf before the first valid measurement)."""
        return self.best_so_far[-1] if self.best_so_far else math.inf

    @property
    def valid(self) -> list[Measurement]:
        return [m for m in self.measurements if m.valid]

    def ranked(self, fidelity: str | None = None) -> list[Measurement]:
        """Valid measurements (at ``fidelity`` when given), best score (fastest) first."""
        return sorted((m for m in self.valid if fidelity is None or m.fidelity == fidelity), key=lambda m: m.score)

    @property
    def n_invalid(self) -> int:
        return sum(not m.valid for m in self.measurements)

    @property
    def n_static_invalid(self) -> int:
        """Configs the target's static check rejected: those that took no trial and those that did (past
        ``budget.max_static_rejects`` in a row)."""
        return len(self.static_rejected) + sum(is_static_invalid(m) for m in self.measurements)

    @property
    def static_invalid_fraction(self) -> float:
        """:attr:`n_static_invalid` over every config the method proposed (0 before the first)."""
        proposed = len(self.static_rejected) + len(self.measurements)
        return self.n_static_invalid / proposed if proposed else 0.0


def _dominates(a: dict, b: dict, names) -> bool:
    return all(a[k] <= b[k] for k in names) and any(a[k] < b[k] for k in names)


def _trials_since_best(measurements: list[Measurement], top_fidelity: str | None = None) -> int:
    """Trials since the last improvement. One objective: a lower score (``Measurement.score``). Several objectives
    (``top_fidelity`` given): a valid design at ``top_fidelity`` that no earlier one dominates."""
    best, best_trial = math.inf, -1
    front: list[dict] = []
    for i, m in enumerate(measurements):
        if not m.valid:
            continue
        if top_fidelity is None:
            if m.score < best:
                best, best_trial = m.score, i
        elif m.fidelity == top_fidelity:
            names = list(m.objectives)
            if not any(_dominates(f, m.objectives, names) or f == m.objectives for f in front):
                best_trial = i
                front = [f for f in front if not _dominates(m.objectives, f, names)] + [m.objectives]
    return len(measurements) - 1 - best_trial


def _stop_reason(result: TaskResult, budget: Budget, clock, top: str | None) -> str:
    """Why the loop stops before its next batch: ``trials``, ``seconds``, ``early_stopping``; "" to go on."""
    done = len(result.measurements)
    if done >= budget.trials_per_task:
        return "trials"
    if budget.seconds_per_task is not None and clock() >= budget.seconds_per_task:
        return "seconds"
    if budget.early_stopping is not None and done and _trials_since_best(result.measurements, top) >= budget.early_stopping:
        return "early_stopping"
    return ""


def split_asked(items: list) -> list[tuple[object, str | None]]:
    """``Method.ask`` items as ``(config, fidelity)``; a bare config means the highest fidelity (None)."""
    return [(it[0], it[1]) if isinstance(it, tuple) else (it, None) for it in items]


def measure_asked(target: Target, task: Task, items: list) -> list[Measurement]:
    """Measure a batch of ``ask`` items, grouped by fidelity (first-seen order kept within a group);
    returns the measurements in the order asked. A bare config is measured with
    ``target.measure(task, configs)`` (the target's highest fidelity)."""
    pairs = split_asked(items)
    groups: dict[str | None, list[int]] = {}
    for i, (_, fid) in enumerate(pairs):
        groups.setdefault(fid, []).append(i)
    out: list[Measurement | None] = [None] * len(pairs)
    for fid, idx in groups.items():
        cfgs = [pairs[i][0] for i in idx]
        ms = target.measure(task, cfgs) if fid is None else target.measure(task, cfgs, fid)
        for i, m in zip(idx, ms):
            out[i] = m
    return out  # type: ignore[return-value]


def screen_asked(target: Target, task: Task, items: list, streak: int, bound: int,
                 fidelity: str) -> tuple[list[tuple[Measurement, bool] | None], int]:
    """The target's static check of a batch of ``ask`` items, in order: per item None (it passed: to be
    measured) or ``(its invalid measurement, free)``, ``free`` when it takes no trial (fewer than ``bound``
    rejections in a row before it; ``streak``: those before this batch). Returns the verdicts and the
    rejections in a row after the batch. ``fidelity``: that of a bare config (the target's highest)."""
    out: list[tuple[Measurement, bool] | None] = []
    screens = isinstance(target, StaticChecks)
    for config, fid in split_asked(items):
        reason = target.static_check(task, config) if screens else None
        if reason is None:
            out.append(None)
            streak = 0
            continue
        if streak == bound > 0:
            log.warning("task %s: %d proposed configs in a row failed the target's static check "
                        "(budget.max_static_rejects); from now on each one is a failed trial", task.name, bound)
        out.append((static_invalid(task, config, reason, fid or fidelity), streak < bound))
        streak += 1
    return out, streak


def measure_screened(target: Target, task: Task, items: list,
                     screened: list[tuple[Measurement, bool] | None]) -> tuple[list[Measurement], list[bool]]:
    """Measure the items that passed the static check (:func:`screen_asked`); returns what the method is
    told (every item, in the order asked) and, per item, whether it is a trial (all but the free rejections)."""
    keep = [item for item, verdict in zip(items, screened) if verdict is None]
    measured = iter(measure_asked(target, task, keep) if keep else [])
    told, trial = [], []
    for verdict in screened:
        m, free = (next(measured), False) if verdict is None else verdict
        told.append(m)
        trial.append(not free)
    return told, trial


def stamp_batch(result: TaskResult, told: list[Measurement], trial: list[bool], clock: _SearchClock,
                simulated: bool) -> tuple[list[Measurement], list[Measurement]]:
    """Each of a batch's measurements with its trial number (trials only) and the search clock when it
    arrived (copies: :func:`dataclasses.replace`), added to ``result``; returns the batch as the method is
    told it and its trials. A simulated clock is charged each trial's ``cost_s`` first."""
    out = list(told)
    for i in (i for i, t in enumerate(trial) if t):
        if simulated:
            clock.charged += told[i].cost_s
        out[i] = replace(told[i], trial=len(result.measurements), search_s=clock())
        result.append(out[i])
    for i in (i for i, t in enumerate(trial) if not t):
        out[i] = replace(told[i], search_s=clock())
        result.static_rejected.append(out[i])
    return out, [m for m, t in zip(out, trial) if t]


class _SearchClock:
    """The search clock: wall time since the task started (plus an earlier attempt's, on resume), minus
    waiting for another process's device lock and minus the target's output checks (``check_s``: not
    search; a target that checks while it measures, as ``target=memory`` runs each schedule, counts them
    there), plus the tool seconds charged by simulated targets (table replay: ``charged``)."""

    def __init__(self, target: Target, offset: float):
        self.target, self.offset, self.charged = target, offset, 0.0
        self.t0 = time.perf_counter()
        self.waited0, self.checked0 = target.stats["lock_wait_s"], target.stats["check_s"]

    def __call__(self) -> float:
        stats = self.target.stats
        waited = stats["lock_wait_s"] - self.waited0 + stats["check_s"] - self.checked0
        return self.offset + time.perf_counter() - self.t0 - waited + self.charged

    def lock_wait_s(self) -> float:
        return self.target.stats["lock_wait_s"] - self.waited0


def tune_task(task: Task, method: Method, target: Target, budget: Budget, rng: np.random.Generator,
              prior: list[Measurement] | None = None, history=None, observers=()) -> TaskResult:
    """Tune ``task`` with ``method`` on ``target`` within ``budget``.

    Args:
        prior: measurements of an earlier attempt of this run (resume): told to the method, counted
            against the budget, never measured again.
        observers: :class:`~tunebench.harness.observers.Observer` s, called in order: ``task_started``,
            ``batch_measured`` after every batch (before the method is told it) and ``task_finished``.
    """
    prior = sorted(prior or [], key=lambda m: m.trial)
    result = TaskResult(task, measurements=list(prior))
    clock = _SearchClock(target, prior[-1].search_s if prior else 0.0)
    info = target.task_info(task)
    simulated = target.simulated_clock
    top = info.top_fidelity if info.multi_objective else None
    method.setup(task, target_info=info, history=history, budget=budget, rng=rng)
    if prior:
        method.tell(prior)
    notify(observers, "task_started", result)
    streak = 0  # configs in a row the target's static check rejected

    while True:
        result.stop_reason = _stop_reason(result, budget, clock, top)
        if result.stop_reason:
            break
        n = min(target.batch_size, budget.trials_per_task - len(result.measurements))
        if budget.early_stopping is not None:  # never measure past the K-th trial without improvement
            n = min(n, budget.early_stopping - _trials_since_best(result.measurements, top))
        asked = method.ask(n)[:n]  # Config, or (Config, fidelity); every evaluation is one trial
        if not asked:
            result.stop_reason = "exhausted"
            break
        screened, streak = screen_asked(target, task, asked, streak, budget.max_static_rejects, info.top_fidelity)
        told, batch = stamp_batch(result, *measure_screened(target, task, asked, screened), clock, simulated)
        if batch:
            notify(observers, "batch_measured", batch, result)
        method.tell(told)
    result.search_s = clock()
    result.lock_wait_s = clock.lock_wait_s()
    result.report = dict(method.report() or {})  # the one call of report(), after the loop
    notify(observers, "task_finished", result)
    return result
