"""The interface every tuning method implements (the harness owns the loop; methods propose and learn).

The harness calls, per task::

    method.setup(task, target_info, history, budget, rng)
    method.tell(prior_measurements)          # only when resuming a run, may be empty
    while budget left:
        configs = method.ask(n)              # inner search (SA, evolution, acquisition) happens here
        measurements = target.measure(task, configs)
        method.tell(measurements)

A method never calls a target. Its model training happens inside ``ask``/``tell`` and is charged to
the task's search clock like everything else. Before the run exists, the harness asks
``method.check_budget(task, target_info, budget)`` for each task: a method with a fixed first phase
refuses a budget too small for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tunebench.config.experiment import Budget, MethodSettings
from tunebench.config.load import with_overrides
from tunebench.methods.seeding import library_seed, seed_libraries
from tunebench.search_space import Config
from tunebench.targets.base import TargetInfo
from tunebench.task import Measurement, Task


@dataclass(frozen=True)
class TargetNeeds:
    """What a method needs of a target; the harness checks it before any run is created.

    Attributes:
        objectives: ``"single"`` (one objective, e.g. latency), ``"multi"`` (two or more: a Pareto
            front), or ``"any"``.
        min_fidelities: fewest fidelities the target must offer (multi-fidelity methods: 2).
        compiles: the method generates TVM schedules itself (needs ``target_info.tvm_target``).
        graphs: the method orders a graph's nodes (needs a target whose tasks are graphs:
            ``target_info.graph_schedules``); a method without it needs a knob space, which such a
            target's tasks do not have.
        mapspace: the method searches a task by its loop-nest structure: the task's ``mod`` is a
            :class:`~tunebench.targets.accel.mapspace.MapSpace` (targets whose ``details`` say ``mapspace``).
    """

    objectives: str = "any"
    min_fidelities: int = 1
    compiles: bool = False
    graphs: bool = False
    mapspace: bool = False

    def problems(self, info: TargetInfo) -> list[str]:
        """What the target described by ``info`` lacks; empty when the method can run on it."""
        objectives, fidelities = list(info.objectives), list(info.fidelities)
        out = []
        if self.objectives == "single" and len(objectives) != 1:
            out.append(f"one objective (the target has {', '.join(objectives)})")
        if self.objectives == "multi" and len(objectives) < 2:
            out.append(f"several objectives (the target has {', '.join(objectives) or 'none'})")
        if len(fidelities) < self.min_fidelities:
            out.append(f"at least {self.min_fidelities} fidelities (the target has {', '.join(fidelities) or 'none'})")
        if self.compiles and not info.tvm_target:
            out.append("a TVM target that compiles schedules (llvm, cuda)")
        if self.graphs and not info.graph_schedules:
            out.append("a target whose tasks are graphs to order (memory)")
        if info.graph_schedules and not self.graphs:
            out.append("a target whose tasks have a knob space (its tasks are graphs to order)")
        if self.mapspace and not info.details.get("mapspace"):
            out.append("tasks that are loop nests on a memory hierarchy, with their mapspace (target=accel with a layer "
                       "model; model=dosa_firesim's tasks are recorded mappings, without one)")
        return out


class Method(ABC):
    """A tuning method: proposes configs (``ask``) and learns from measurements (``tell``).

    ``Settings`` is the method's settings class (a :class:`~tunebench.config.experiment.MethodSettings`
    dataclass declaring every hyperparameter once: type, default, check and its source); ``needs``
    declares what the method needs of a target (:class:`TargetNeeds`).

    A method is built from its settings, with keyword overrides for scripts and tests:
    ``AutoTVM(settings)``, ``AutoTVM(plan_size=8)``; ``self.settings`` holds the validated result (a
    bad value raises :class:`~tunebench.errors.UserError` naming ``method.<key>``).
    ``remeasures``: the method may ask for a config it already measured at the same fidelity (e.g. to
    re-time it); False (the default) promises it never does (tests/methods/test_conformance.py checks it)."""

    name: str = "method"
    Settings: ClassVar[type[MethodSettings]] = MethodSettings
    needs: TargetNeeds = TargetNeeds()
    remeasures: bool = False

    def __init__(self, settings: MethodSettings | None = None, **overrides) -> None:
        self.settings = with_overrides(self.Settings, settings, overrides, "method")

    def setup(self, task: Task, target_info: TargetInfo, history, budget: Budget, rng: np.random.Generator) -> None:
        """Prepare for a new task. ``target_info``: what the target offers (objectives, fidelities,
        capacity, TVM target, ...); ``history``: earlier records (or None); ``rng``: the run's generator.

        The process-wide generators of Python, NumPy and PyTorch are seeded from ``rng`` here
        (:mod:`tunebench.methods.seeding`): a subclass calls ``super().setup`` before building models."""
        self.seed = library_seed(rng)  # for libraries that take a seed argument
        seed_libraries(self.seed)
        self.learned: list[int] | None = None  # the method's learned set, once it has one (learned_set)
        self.task = task
        self.space = task.space
        self.target_info = target_info
        self.history = history
        self.budget = budget
        self.rng = rng
        self.visited: set[int] = set()

    def check_budget(self, task: Task, target_info: TargetInfo, budget: Budget) -> str | None:
        """Why ``budget`` cannot give this method a result on ``task`` (what is valid, in one line, naming
        the fewest ``trials_per_task`` that would), or None (the default: any budget can).

        Called by the harness for each task once its space is built, before the run exists
        (``harness/prepare.py``); the refusal is one line ``error: budget.trials_per_task=<n>: <this>``.
        A method whose first phase is fixed by the space size and its settings (a sweep of every design
        at a free fidelity, initial designs) returns :func:`first_phase_problem`'s answer. Nothing is set
        up: the method's ``setup`` comes later."""
        return None

    def check_task(self, task: Task, target_info: TargetInfo) -> str | None:
        """Why this method cannot tune ``task`` on the target ``target_info`` describes, in one line naming the
        setting at fault (e.g. a trained model that does not know the task's knobs), or None (the default).

        Called by the harness for each task once its space is built, before the run exists, after
        :meth:`check_budget`; the refusal becomes the one-line ``error: <this>``. Nothing is set up."""
        return None

    @abstractmethod
    def ask(self, n: int) -> list[Config | tuple[Config, str]]:
        """Up to ``n`` configs to measure next (fewer, or none, when the space is exhausted).

        An item is a :class:`Config` (measured at the target's highest fidelity) or a
        ``(Config, fidelity_name)`` tuple (multi-fidelity targets; names in ``target_info.fidelities``).
        Every item is one trial."""

    def tell(self, measurements: list[Measurement]) -> None:
        """Learn from measured configs (also called with the prior records of a resumed run)."""
        self.visited.update(m.config.index for m in measurements)

    def learned_set(self) -> list[int] | None:
        """The designs the method returns as its answer, when that is a distinct part of what it
        measured (config indices): e.g. the predicted Pareto designs that ann, bt and dac19 run through
        the tool flow after their random initial designs. A method sets ``self.learned`` when it has
        one; None (the default): the answer is everything the method measured. Read once, after the
        loop, by multi-objective metrics (the "learned front only" ADRS)."""
        return self.learned

    @classmethod
    def preload(cls, settings: MethodSettings, history) -> None:
        """Before the run's first task (on no task's clock): read the files ``settings`` name that hold a
        preparation (a pre-trained model) into ``history.models``. Default: nothing to read."""

    def report(self) -> dict:
        """What the method wants logged about the task it just tuned (called once, after the loop).

        Numbers become MLflow metrics ``<task_id>.<key>``; everything goes into ``tasks.json``. Keys
        the harness reads: ``role`` (``"source"``: the task was tuned only to give later tasks a
        history; its search time is left out of ``search_time_excl_source_s``) and ``pretrain_s``
        (seconds of this task's clock spent training a model shared by later tasks; also left out).
        """
        return {}


def first_phase_problem(method: Method, task: Task, budget: Budget, trials: int, what: str) -> str | None:
    """The :meth:`Method.check_budget` answer of a method whose first phase takes ``trials`` trials on
    ``task`` (``what``: of what, e.g. "8 random initial designs at impl"); None when the budget holds it."""
    if budget.trials_per_task >= trials:
        return None
    return (f"method={method.settings.name} needs at least {trials} trials per task on task {task.name}: its first "
            f"phase alone takes {trials} ({what}); the trials beyond it go to its search")
