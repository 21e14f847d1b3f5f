"""The contract between the harness and a measurement target.

:class:`Target` is the core every target derives from: its facts, ``load_tasks`` and ``measure``, its
description and lifecycle; what only some targets do is a capability
(:mod:`tunebench.targets.capabilities`). :class:`TargetInfo` is the typed description a method receives
in ``Method.setup``; its :meth:`TargetInfo.to_dict` is the ``device_info`` run tag.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from tunebench.config.experiment import ModelSettings, TargetSettings
from tunebench.task import STATIC_INVALID, Measurement, Outcome, Task

# cumulative wall seconds a target reports in ``Target.stats`` (every target has every key): ``upload_s`` and
# ``retiming_s`` are parts of ``run_phase_s``; ``overlap_s`` is how much of the build and run phases ran at once
STAT_KEYS = ("build_phase_s", "run_phase_s", "check_s", "tool_s", "protocol_s", "lock_wait_s", "upload_s",
             "retiming_s", "overlap_s")


def static_invalid(task: Task, config, reason: str, fidelity: str | None = None) -> Measurement:
    """The invalid measurement of a config that :meth:`Target.static_check` rejected for ``reason``: never
    built nor run; outcome :attr:`Outcome.STATIC_INVALID`, error :data:`STATIC_INVALID` + ``reason``."""
    return Measurement(task.id, config, Outcome.STATIC_INVALID, error=STATIC_INVALID + reason,
                       **({"fidelity": fidelity} if fidelity is not None else {}))


def is_static_invalid(m: Measurement) -> bool:
    """``m`` is a config the target's static check rejected (:func:`static_invalid`)."""
    return m.outcome is Outcome.STATIC_INVALID


def new_stats() -> dict[str, float]:
    """A zeroed ``stats`` dict with the fixed keys :data:`STAT_KEYS`."""
    return dict.fromkeys(STAT_KEYS, 0.0)


def _frozen(value: Mapping | None) -> Mapping | None:
    """A read-only copy of ``value`` (None stays None)."""
    return None if value is None else MappingProxyType(dict(value))


def _plain(value: Any) -> Any:
    """A JSON-ready deep copy (read-only mappings become dicts, tuples lists)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return copy.deepcopy(value)


@dataclass(frozen=True)
class TargetInfo:
    """What a target is, as methods and the run's tags see it (what the harness asks of the target itself,
    such as its capabilities, is not here).

    Attributes:
        kind: ``llvm``, ``cuda``, ``fpga_open``, ``table``, ``vivado`` (or a test's own).
        name: the target's name (``target.name`` of the config; its kind when unnamed).
        device_name: the device's own name (CPU or GPU model; the target's name for FPGA targets):
            the ``device`` run tag and the ``name`` key of :meth:`to_dict`.
        objectives: the objectives a measurement reports, all minimized.
        fidelities: measurement fidelities, cheapest first; the last is the reported one.
        batch_size: configs the loop measures per call.
        tvm_target: the TVM target dict for methods that compile schedules; None for FPGA targets.
        threads: threads of the timed kernels (TVM targets); None where it does not apply.
        precision: arithmetic precision of the timed kernels (TVM targets); None elsewhere.
        capacity: the device's resources by name (``luts``, ``ffs``, ``dsps``, ``brams``; FPGA
            targets); None elsewhere.
        scale: normalization per objective (hypervolume, predictive methods); None elsewhere.
        reference_point: hypervolume reference point in scaled units, one per objective; None elsewhere.
        details: the rest of the device description (TVM: mcpu, cores, host, GPU limits; FPGA:
            device, tools, part, clock, table), recorded as is.
        graph_schedules: a task is a graph (``task.mod``) and a config its execution order
            (:class:`~tunebench.search_space.ScheduleConfig`), not a point of a knob space (``target=memory``).
        fidelity_costs: seconds to a report at each fidelity from scratch (T_i of [Sun-PhD] Eq. 3.15:
            the cumulative tool time of the stages it needs), from the target's measured stage seconds
            (``Target.task_info``: per task); None where unknown or not applicable.
        lends: what the target lends a method that needs it, by name, so that the method imports none of
            the target's modules (FPGA targets: ``write_table``, the design-space table's writer,
            :func:`tunebench.targets.fpga.table.write_table`); not part of the recorded description.
    """

    kind: str
    name: str
    device_name: str
    objectives: tuple[str, ...] = ("latency_s",)
    fidelities: tuple[str, ...] = ("hw",)
    batch_size: int = 1
    tvm_target: Mapping | None = None
    threads: int | None = None
    precision: str | None = None
    capacity: Mapping[str, float] | None = None
    scale: Mapping[str, float] | None = None
    reference_point: tuple[float, ...] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    fidelity_costs: Mapping[str, float] | None = None
    lends: Mapping[str, Callable] = field(default_factory=dict)
    graph_schedules: bool = False

    def __post_init__(self):
        object.__setattr__(self, "objectives", tuple(self.objectives))
        object.__setattr__(self, "fidelities", tuple(self.fidelities))
        if self.reference_point is not None:
            object.__setattr__(self, "reference_point", tuple(float(v) for v in self.reference_point))
        for name in ("tvm_target", "capacity", "scale", "details", "fidelity_costs", "lends"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def top_fidelity(self) -> str:
        """The highest fidelity (the one results are reported at)."""
        return self.fidelities[-1]

    @property
    def multi_objective(self) -> bool:
        """Two or more objectives: results are Pareto fronts."""
        return len(self.objectives) > 1

    def to_dict(self) -> dict:
        """The device description recorded with a run (the ``device_info`` tag): ``kind``, ``name``
        (the device's), the details, then the typed entries that apply to this target."""
        out: dict = {"kind": self.kind, "name": self.device_name, **_plain(self.details)}
        if self.tvm_target is not None:
            out["tvm_target"] = _plain(self.tvm_target)
        out.update(objectives=list(self.objectives), fidelities=list(self.fidelities))
        for key in ("reference_point", "scale", "capacity", "threads", "precision"):
            if getattr(self, key) is not None:
                out[key] = _plain(getattr(self, key))
        return out


class RunStep:
    """One thing a run does around its tasks (``tunebench.harness.steps``; a target adds its own with
    :meth:`~tunebench.targets.capabilities.HasRunSteps.run_steps`); every hook is optional."""

    artifacts: list[str] = []  # run-folder files logged as MLflow artifacts at the end

    def task_observers(self, task, method, tracker, run_dir: str) -> list:
        """Observers (``tunebench.harness.observers.Observer``) of ``task``'s loop, after the record
        writer and the history feed."""
        return []

    def task_summary(self) -> dict:
        """Entries added to the task's ``tasks.json`` entry once it is tuned."""
        return {}

    def finish(self, run) -> str | None:
        """After every task (``run``: the harness's ``RunContext``); returns the text of an error that
        fails the run once its files are written, or None."""
        return None


class Target(ABC):
    """A measurement backend: the core every target has (what the harness calls), with the defaults of a
    target that measures latency on nothing special (one objective ``latency_s``, one fidelity ``hw``).
    What some targets do besides (time kernels, check outputs, screen configs, replay tables, report
    their own metrics, measure spaces for the replay, add run steps) are capabilities a target implements
    when it has them (:mod:`tunebench.targets.capabilities`).

    A target class owns its facts, declared once as class attributes: ``kind`` (its key in
    :data:`tunebench.targets.TARGETS`), ``Settings`` (its settings class: ``target=<name>``'s knobs),
    ``workloads`` (the kinds of model it measures, matched with ``ModelSettings.workload``),
    ``objectives`` and ``fidelities``, ``compiles`` (it builds TVM schedules: methods that make their
    own need it), ``graph_schedules`` (its tasks are graphs, configs execution orders),
    ``simulated_clock`` (the loop adds each measurement's ``cost_s`` to the search clock) and ``lends``
    (functions of its modules a method may need, so that the method imports none of them); ``name``
    and ``batch_size`` come from its settings.

    The contract's members a target overrides (8): :meth:`measure` (abstract), :meth:`load_tasks`,
    :meth:`check_model`, :meth:`nominal_info`, :meth:`info_fields`, :meth:`start`, :meth:`close` and
    :attr:`stats`. A target is built from its settings alone (``cls(settings)``; one that times kernels
    also gets the measurement settings: :class:`~tunebench.targets.capabilities.TimesKernels`); its
    ``__init__`` calls ``super().__init__()`` (the ``stats`` counters).
    """

    kind: str = "target"
    name: str = "target"
    Settings: ClassVar[type[TargetSettings]] = TargetSettings
    workloads: ClassVar[tuple[str, ...]] = ()
    compiles: ClassVar[bool] = False  # methods that make their own TVM schedules can run here
    graph_schedules: ClassVar[bool] = False  # tasks are graphs, configs execution orders (TargetInfo)
    simulated_clock: bool = False  # the loop adds each measurement's cost_s to the search clock
    objectives: tuple[str, ...] | list[str] = ("latency_s",)
    fidelities: tuple[str, ...] | list[str] = ("hw",)
    batch_size: int = 1
    lends: ClassVar[Mapping[str, Callable]] = {}  # functions a method may need, by name (TargetInfo.lends)

    def __init__(self) -> None:
        self._stats = new_stats()

    # ---- facts known before the target is built (config checks) -----------------------------
    @classmethod
    def nominal_info(cls, settings: TargetSettings | None = None, model: ModelSettings | None = None) -> TargetInfo:
        """What the target offers, from its class and settings alone (no device probed): what method
        compatibility is checked against before anything is built. ``model``: the model it will measure,
        where that changes what it offers (``target=accel`` with ``model=dosa_firesim``); None: any."""
        settings = settings if settings is not None else cls.Settings()
        return TargetInfo(kind=cls.kind, name=settings.name, device_name=settings.name,
                          objectives=tuple(getattr(settings, "objectives", cls.objectives)),
                          fidelities=tuple(getattr(settings, "fidelities", cls.fidelities)),
                          tvm_target={"kind": cls.kind} if cls.compiles else None,
                          graph_schedules=cls.graph_schedules, lends=dict(cls.lends))

    @classmethod
    def check_model(cls, settings: TargetSettings, model: ModelSettings, own_schedules: bool) -> None:
        """Raise :class:`~tunebench.errors.UserError` when a task of ``model`` cannot be searched on this
        target as configured (e.g. a task kind without a template), before anything is built.
        ``own_schedules``: the method makes its own schedules. Nothing by default."""

    # ---- description -----------------------------------------------------------------------
    def info_fields(self, task: Task | None = None) -> dict:
        """Keyword arguments of :class:`TargetInfo` (of ``task`` where given: what a method tuning it is
        told, e.g. an FPGA target's fidelity costs); subclasses add theirs to the base's."""
        return {"kind": self.kind, "name": self.name, "device_name": self.name, "objectives": tuple(self.objectives),
                "fidelities": tuple(self.fidelities), "batch_size": int(self.batch_size),
                "graph_schedules": bool(self.graph_schedules), "lends": dict(self.lends)}

    @property
    def info(self) -> TargetInfo:
        """The typed description (built from :meth:`info_fields`)."""
        return TargetInfo(**self.info_fields())

    def task_info(self, task: Task) -> TargetInfo:
        """The description a method tuning ``task`` is given (:meth:`info_fields` of the task)."""
        return TargetInfo(**self.info_fields(task))

    def describe(self) -> dict:
        """The device description recorded with a run (``info.to_dict()``)."""
        return self.info.to_dict()

    # ---- tasks -----------------------------------------------------------------------------
    def load_tasks(self, model: ModelSettings, own_schedules: bool = False) -> tuple[list[Task], object]:
        """The tasks of ``model`` on this target, each with its search space, and the imported model
        a run step uses (None where there is none). ``own_schedules``: the method makes its own schedules
        (the tasks still get a space, for the target's checks). Every target that runs implements it (a
        stand-in given its tasks need not).

        Raises:
            UserError: a task that cannot be measured (a bad graph, a table that does not match its
                space), before any run is created.
        """
        raise NotImplementedError(f"target {self.name} does not load model={model.name}")

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start worker processes or work folders (before any task clock starts); idempotent."""

    def close(self) -> None:
        """Release what :meth:`start` took; the target may be started again."""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- measuring -------------------------------------------------------------------------
    @abstractmethod
    def measure(self, task: Task, configs: list, fidelity: str | None = None) -> list[Measurement]:
        """One :class:`Measurement` per config, in order, at ``fidelity`` (None: :attr:`top_fidelity`)."""

    @property
    def stats(self) -> dict[str, float]:
        """Cumulative seconds per phase (keys :data:`STAT_KEYS`): builds and tool runs, timed runs,
        output checks, tool time (FPGA), protocol work, waiting for another process's device lock."""
        return dict(self._stats)
