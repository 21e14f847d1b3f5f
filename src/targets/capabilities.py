"""What a target offers beyond the core contract (:class:`~tunebench.targets.base.Target`), one protocol per
capability. A target has a capability by defining its methods; the harness asks ``isinstance(target,
TimesKernels)`` (or ``issubclass`` of the class, before one is built), never a flag or the target's name.

- :class:`TimesKernels`: ``calibrate``, ``retime``, ``peak``, ``worker_pids``, ``run_tags`` (TVM targets);
- :class:`ChecksOutputs`: ``check`` (TVM, FPGA, memory, accel);
- :class:`StaticChecks`: ``static_check`` (cuda);
- :class:`HasTables`: ``table_for`` (table);
- :class:`ReportsMetrics`: ``best_metrics``, ``run_metrics`` (memory, accel);
- :class:`MeasuresSpaces`: ``space_facts``, ``space_tools`` (TVM targets);
- :class:`HasRunSteps`: ``run_steps`` (TVM targets: the end-to-end step).

What a method needs of a target besides measurements is a capability too, so that no method imports a
target's modules. These are asked of the target's class (``issubclass(target_class(kind), DescribesCPUs)``),
since the methods' offline commands (training sets, model training) build no target:

- :class:`DescribesCPUs`: ``cpu_model``, ``cpu_isa`` (llvm);
- :class:`DescribesGPUs`: ``gpu_tag_attrs``, ``gpu_tag_limits``, ``compute_capability`` (cuda);
- :class:`ExtractsTasks`: ``model_tasks``, ``task_template`` (TVM targets).

A target without a capability gets what the harness does without it: no calibration, re-timing or peak (the
reported best is the best measured); the output check "not performed"; every proposed config measured; no
true front from a table; no metrics of its own; no space files; no steps of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tunebench.targets.base import RunStep
    from tunebench.task import Measurement, Task


@runtime_checkable
class TimesKernels(Protocol):
    """The target times kernels: the harness calibrates around each task, re-times the fastest configs,
    measures the device's peak (:mod:`tunebench.harness.measurement`) and tags the run with how it times.
    Such a target is built with the experiment's measurement settings as well: ``cls(settings, measure)``
    (:class:`~tunebench.config.experiment.MeasureSettings`; every other target gets its settings alone)."""

    def calibrate(self) -> dict:
        """Time the calibration kernel."""

    def retime(self, task: Task, configs: list, rounds: int, repeat: int) -> list[dict | None]:
        """Re-time ``configs`` in interleaved rounds; None for a config that could not be re-timed."""

    def peak(self) -> dict:
        """The device's measured peak (``fma_gflops``, ``mem_gbps``, ``threads``)."""

    def worker_pids(self) -> list[int]:
        """Process ids of the target's own workers (not counted as foreign CPU load)."""

    def run_tags(self) -> dict[str, str]:
        """Run tags every table must state about how this target times (``precision``, ``threads``)."""


@runtime_checkable
class ChecksOutputs(Protocol):
    """The target compares a config's output with a reference (the reported best's check)."""

    def check(self, task: Task, config) -> tuple[bool | None, str]:
        """``(ok, detail)``; ``ok`` None when the check cannot be performed (never counted as passed)."""


@runtime_checkable
class StaticChecks(Protocol):
    """The target knows, before building or measuring, that some configs cannot run (``target=cuda``: the
    GPU's limits). The tuning loop asks it of every config a method proposes: a rejected config is not
    measured and, up to ``budget.max_static_rejects`` in a row, takes no trial (:mod:`tunebench.harness.loop`)."""

    def static_check(self, task: Task, config) -> str | None:
        """Why ``config`` cannot run on the device, or None; cheap (milliseconds), free of side effects."""


@runtime_checkable
class HasTables(Protocol):
    """The target replays a design-space table per task (``target=table``): its true Pareto front for ADRS."""

    def table_for(self, task: Task):
        """The design-space table replayed for ``task``."""


@runtime_checkable
class ReportsMetrics(Protocol):
    """The target has its own numbers about a task's reported best and about the run (``target=memory``'s
    peaks and traffic, ``target=accel``'s energy)."""

    def best_metrics(self, task: Task, best: Measurement) -> dict[str, float]:
        """Logged as ``<task_id>.<key>`` metrics and kept in the task's ``tasks.json`` entry."""

    def run_metrics(self, rows: list[tuple[Task, dict[str, float]]], summaries: list[dict]) -> dict[str, float]:
        """The run's numbers from its tasks' :meth:`best_metrics` (``rows``: each tuned task with its numbers;
        ``summaries``: the tasks' ``tasks.json`` entries), logged once every task is tuned."""


@runtime_checkable
class MeasuresSpaces(Protocol):
    """The target's measurements of a task's space can be written as a space file and replayed
    (``python -m tunebench space measure``, ``target=replay``)."""

    def space_facts(self, task: Task) -> dict:
        """How a config of ``task`` becomes a kernel (template, its source file, that file's sha256 and the
        sha256 of its code, :mod:`tunebench.targets.tvm.template_files`; the TVM target,
        threads, precision): recorded in the space file and checked by the replay."""

    def space_tools(self) -> dict:
        """The versions of the tools the space was compiled with (``tvm``), for every space file's header."""


@runtime_checkable
class HasRunSteps(Protocol):
    """The target does something in a run besides tuning (TVM: the end-to-end step), after the harness's steps."""

    def run_steps(self, cfg, imported) -> list[RunStep]:
        """The target's steps (``cfg``: the :class:`~tunebench.config.experiment.ExperimentConfig`;
        ``imported``: what ``load_tasks`` returned beside the tasks)."""


@runtime_checkable
class DescribesCPUs(Protocol):
    """The target compiles for the CPU models LLVM knows (``target=llvm``): what a method that describes a CPU
    by its specification asks of a model's name (Glimpse's Blueprint, ``tunebench.methods`` ``glimpse``)."""

    @staticmethod
    def cpu_model(name: str) -> str:
        """The CPU model ``name`` stands for (``native``: this machine's); UserError for one LLVM does not know."""

    @staticmethod
    def cpu_isa(mcpu: str) -> frozenset[str]:
        """The ISA features LLVM enables for the CPU model ``mcpu`` (``avx2``, ``fma``, ...)."""


@runtime_checkable
class DescribesGPUs(Protocol):
    """The target compiles for the GPUs TVM knows by a target tag (``target=cuda``): their attributes and
    per-block limits, without a GPU (Glimpse's datasheets and validity labels)."""

    @staticmethod
    def gpu_tag_attrs(tag: str) -> dict:
        """The attributes of ``tag`` (``arch``, ``max_threads_per_block``, ...); UserError for an unknown tag."""

    @staticmethod
    def gpu_tag_limits(tag: str, max_vthread: int = 8, static_shared: bool = True) -> dict:
        """The per-block limits a config of ``tag``'s GPU must stay within (the keys the target checks):
        ``max_vthread`` virtual threads per axis; ``static_shared``: shared memory capped at what a block
        allocates statically."""

    @staticmethod
    def compute_capability(arch: str) -> float:
        """``"sm_86"`` -> 8.6."""


@runtime_checkable
class ExtractsTasks(Protocol):
    """The target's tasks of a model without a target built (no device probed) and the template that makes a
    task's knob space (TVM targets): for methods that build training sets offline from recorded runs."""

    @classmethod
    def model_tasks(cls, model) -> list[Task]:
        """The tasks of ``model`` (a model's settings or its config mapping) for this target kind, in model order."""

    @classmethod
    def task_template(cls, task: Task, variant: str | None = None):
        """The template of ``task``'s kind in ``variant`` (None: the default): its ``make_space``, ``check``, ..."""
