"""The requests the TVM targets send to their worker processes, and what the workers answer.

:class:`~tunebench.targets.tvm.target.TVMTarget` and its kernel timing send them;
:func:`tunebench.targets.tvm.worker.handle` answers them in the builder and runner processes
(:mod:`tunebench.targets.workers`), like MetaSchedule's ``BuilderInput`` / ``RunnerInput``. Every
message is a frozen dataclass of plain values, pickled across the process border.

Types of the values:

- a device spec is ``["cpu", i]``, ``["cuda", i]`` or ``["rpc", {...}]`` for a device reached through a
  TVM RPC tracker (:func:`tunebench.targets.tvm.remote.remote_spec`);
- a TVM target is its dict (``{"kind": "llvm", "num-cores": 8, "mcpu": ...}``);
- argument specs are ``[[shape], dtype]`` per parameter of the kernel, the output last.

Results of requests that run on a device are :class:`~tunebench.targets.tvm.remote.DeviceResult` s: on a
remote device they say which one ran the request and how long it waited for its session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tunebench.targets.tvm.remote import DeviceResult


@dataclass(frozen=True)
class TaskSpec:
    """The task a build or check schedules (the worker keeps it, parsed, under ``key``)."""

    key: str  # the worker's cache key: task id and template variant
    mod_json: str  # the task's IRModule (``tvm.ir.save_json``)
    kind: str  # the task's kind (which template schedules it)
    target_kind: str  # "llvm" or "cuda"
    template: str | None = None  # the template variant (None: the kind's default)


@dataclass(frozen=True)
class BuildInput:
    """``"build"``: schedule a candidate, compile it and export the library."""

    task: TaskSpec  # the task
    index: int  # the knob config's index in the template's space (unused with ``trace``)
    target: dict  # the TVM target to compile for
    path: str  # where to export the library
    trace: str | None = None  # a schedule trace (JSON text) replayed instead of config ``index``
    limits: dict = field(default_factory=dict)  # the GPU's limits a schedule must keep (cuda; else empty)
    default: bool = False  # build the task's default kernel (TVM's schedule without tuning) instead of a candidate


@dataclass(frozen=True)
class BuildResult:
    """What ``"build"`` answers."""

    build_s: float  # seconds to schedule, compile and export


@dataclass(frozen=True)
class RunInput:
    """``"run"``: time a built library with TVM's time evaluator on random inputs."""

    path: str  # the library
    args: list  # argument specs of the task's kernel (a build that packs weights notes its own)
    device: list  # device spec
    number: int  # runs per repeat
    repeat: int  # repeats (samples)
    min_repeat_ms: int  # minimum milliseconds of one repeat


@dataclass(frozen=True, kw_only=True)
class RunResult(DeviceResult):
    """What ``"run"`` answers."""

    results_s: list[float]  # seconds per run, one per repeat
    run_s: float  # seconds the request took (loading, inputs, timing)
    upload_s: float = 0.0  # of which sending the library to a remote device and loading it there (0 locally)


@dataclass(frozen=True)
class CheckInput:
    """``"check"``: build a candidate, run it once on fixed inputs and compare with the reference."""

    task: TaskSpec  # the task
    index: int  # the knob config's index in the template's space (unused with ``trace``)
    target: dict  # the TVM target to compile for
    device: list  # device spec
    ref_target: dict  # the TVM target (host CPU) the unscheduled reference is compiled for
    trace: str | None = None  # a schedule trace (JSON text) replayed instead of config ``index``
    ref_cache_dir: str | None = None  # private folder of cached reference outputs (None: none)
    op_reference: dict | None = None  # ``{"op", "shape"}``: a single operator, PyTorch's output is the reference


@dataclass(frozen=True, kw_only=True)
class CheckResult(DeviceResult):
    """What ``"check"`` answers."""

    max_abs_err: float  # largest absolute difference from the reference
    ref_max_abs: float  # largest magnitude of the reference
    rel_err: float  # ``max_abs_err`` relative to ``ref_max_abs``
    reference_note: str | None = None  # why a cached reference was discarded or not stored (for the log)


@dataclass(frozen=True)
class CalibrateInput:
    """``"calibrate"``: time the calibration kernel (:func:`tunebench.targets.tvm.fixed_kernels.calibration_kernel`)."""

    target: dict  # the TVM target to compile it for
    device: list  # device spec
    repeat: int  # repeats (samples)
    min_repeat_ms: int  # minimum milliseconds of one repeat


@dataclass(frozen=True, kw_only=True)
class CalibrateResult(DeviceResult):
    """What ``"calibrate"`` answers."""

    samples: list[float]  # seconds per repeat


@dataclass(frozen=True)
class RetimeInput:
    """``"retime"``: time built libraries in interleaved rounds (each round times every library once,
    in an order rotated by one per round, then the calibration kernel)."""

    paths: list[str]  # the libraries
    args: list  # argument specs of the task's kernel (a build that packs weights notes its own)
    device: list  # device spec
    target: dict  # the TVM target of the calibration kernel
    rounds: int  # rounds
    repeat: int  # repeats of every library per round
    min_repeat_ms: int  # minimum milliseconds of one repeat


@dataclass(frozen=True, kw_only=True)
class RetimeResult(DeviceResult):
    """What ``"retime"`` answers."""

    samples: list[list[float]]  # seconds, per library in the order of ``paths``
    calibration: list[float]  # the calibration kernel's median seconds, per round


@dataclass(frozen=True)
class PeakInput:
    """``"peak"``: the device's FMA throughput and memory bandwidth
    (:func:`tunebench.targets.tvm.fixed_kernels.measure_peak`)."""

    target: dict  # the TVM target to compile the microbenchmarks for
    device: list  # device spec
    threads: int  # threads of the worker's TVM thread pool


@dataclass(frozen=True, kw_only=True)
class PeakResult(DeviceResult):
    """What ``"peak"`` answers."""

    peak: dict  # :func:`~tunebench.targets.tvm.fixed_kernels.measure_peak`'s result (fma_gflops, mem_gbps, threads, ...)

    def measured(self) -> dict:
        """The peak as the machine cache keeps it: ``peak``, with ``server`` and ``session_wait_s`` on a
        remote device."""
        if self.server is None:
            return dict(self.peak)
        return {**self.peak, "server": self.server, "session_wait_s": self.session_wait_s}


@dataclass(frozen=True)
class AcquireInput:
    """``"acquire"``: hold a session on the remote device of ``device`` until ``"release"``."""

    device: list  # device spec of a remote device (``["rpc", {...}]``)


@dataclass(frozen=True)
class AcquireResult:
    """What ``"acquire"`` answers."""

    waited_s: float  # seconds waited for a free device (0 when the session was held already)
    server: str  # the device that was handed out


@dataclass(frozen=True)
class ReleaseInput:
    """``"release"``: end the worker's session on a remote device (answered with None)."""
