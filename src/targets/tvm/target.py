"""TVM measurement targets: ``llvm`` (this CPU) and ``cuda`` (a GPU).

A batch of configs is measured in two phases, like AutoTVM's LocalBuilder/LocalRunner
(:mod:`tunebench.targets.tvm.batch`):

1. **build**: up to ``builder.n_parallel`` worker processes apply the template and compile each
   config to a shared library (cuda: configs that break the GPU's limits are rejected first);
2. **run**: one runner process times each library with TVM's time evaluator, one at a time, while
   holding the device's lock, so measurements never overlap (also across concurrent jobs); a noisy
   timing is timed again and, if it stays noisy, marked (:mod:`tunebench.targets.tvm.timing`).
   With ``builder.overlap`` (a GPU's default) a config is timed as soon as it is built, while the
   batch's others still compile.

Build and run errors, crashes and timeouts become invalid :class:`Measurement` s with the error text.
Every worker's TVM thread pool has ``threads`` threads (``num_cores``; TVM's own default would be
half the logical CPUs on x86), the number the PyTorch baselines use too.

With ``target.rpc`` (a TVM RPC tracker and a device key) the run phase, the output checks and the
protocol's timings happen on a remote device instead (:mod:`tunebench.targets.tvm.rpc`).
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import time

from tunebench.config.experiment import MeasureSettings
from tunebench.errors import DeviceUnavailable, UserError
from tunebench.protocol.machine import MachineCache
from tunebench.protocol.noise import CpuMonitor, NoisePolicy
from tunebench.protocol.reference import CalibrationReference
from tunebench.safe_files import run_temp_dir
from tunebench.targets.base import Target
from tunebench.targets.devicelock import DeviceLock
from tunebench.targets.tvm.batch import BatchMeasure
from tunebench.targets.tvm.checking import OutputCheck, reference_cache_dir
from tunebench.targets.tvm.libraries import LibraryCache
from tunebench.targets.tvm.messages import BuildInput, TaskSpec
from tunebench.targets.tvm.remote import DeviceResult
from tunebench.targets.tvm.rpc import REMOTE_RETRIES, SessionHold, rpc_settings
from tunebench.targets.tvm.scheduling import trace_of
from tunebench.targets.tvm.settings import TVMTargetSettings
from tunebench.targets.tvm.timing import KernelTiming
from tunebench.targets.workers import WorkerPool
from tunebench.task import Task

log = logging.getLogger(__name__)

HANDLER = "tunebench.targets.tvm.worker:handle"  # default request handler of the worker processes
PREPARE = "tunebench.targets.tvm.worker:prepare"  # imports TVM in a worker before it reports ready


def tvm_version() -> str:
    import tvm

    return str(tvm.__version__)


class TVMTarget(BatchMeasure, KernelTiming, OutputCheck, Target):
    """Real compile-and-time measurement through TVM on a device: the part :class:`LLVMTarget` and
    :class:`CUDATarget` share. A subclass probes its device (:meth:`_probe_local`,
    :meth:`_remote_device`) and states its facts. Its capabilities
    (:mod:`tunebench.targets.capabilities`): it times kernels (:class:`KernelTiming`), checks outputs
    (:class:`OutputCheck`), measures spaces for the replay (:meth:`space_facts`) and adds the end-to-end
    step (:meth:`run_steps`); ``target=cuda`` also screens configs (``static_check``).

    Args:
        settings: the target's settings (:class:`~tunebench.targets.tvm.settings.LLVMSettings`, ...).
        measure: the experiment's measurement settings (noise thresholds, machine cache folder).
    """

    Settings = TVMTargetSettings
    workloads = ("tensor_program",)
    compiles = True  # methods that make their own schedules (metaschedule, gat) can run here
    templates: tuple[str, ...] = ()  # the schedule template variants (targets/tvm/variants.py), default first
    device_type = "cpu"  # TVM's device type of the timed kernels (tvm.device(device_type, device_id))
    gpu = False  # a GPU: limits checked before building, no CPU thread pool to set on a remote device
    torch_device = "cpu"  # where the PyTorch baselines of the end-to-end step run
    tf32_baseline = False  # the end-to-end step also times PyTorch with TF32 (its default on a GPU)
    objectives = ("latency_s",)  # minimized
    fidelities = ("hw",)
    precision = "float32"  # of the timed kernels
    tvm_target: dict | None = None  # set when the device is probed

    def __init__(self, settings: TVMTargetSettings, measure: MeasureSettings | None = None):
        super().__init__()
        measure = measure if measure is not None else MeasureSettings()
        self.settings = settings
        self.name = settings.name
        self.device_id = settings.device_id
        self.batch_size = settings.batch_size
        self._retime_k = measure.retime.top_k  # the most configs built at once: a batch, or the re-timed ones
        self.lock_dir = settings.lock_dir
        self.policy = NoisePolicy.from_settings(measure.noise)
        self.threads = self._threads()
        self.ref_cache_dir = reference_cache_dir(settings.check.reference_cache)
        self.limits: dict = {}
        self.rpc = rpc_settings(settings.rpc)
        self._probe_remote() if self.rpc else self._probe_local()
        self.template = str(settings.template or self.templates[0])
        notice_s = float(measure.lock_notice_s)
        self.lock = SessionHold(self, notice_s) if self.rpc else DeviceLock(self.device_key, self.lock_dir, notice_s)
        self.monitor = CpuMonitor(self.worker_pids, min_window_s=0.1)
        host = f"rpc:{self.rpc['tracker']}/{self.rpc['key']}" if self.rpc else platform.node()
        # the TVM target is part of the key: the calibration kernel compiled for another LLVM CPU model (mcpu) is
        # other code, and compared with another's reference it reads as a slowdown
        self.machine = MachineCache({"host": host, "device": self.device["name"], "kind": self.kind,
                                     "threads": self.threads, "tvm": tvm_version(),
                                     "tvm_target": dict(self.tvm_target or {})}, measure.cache_dir)
        self.reference = CalibrationReference(measure.noise.reference, self.machine, measure.noise.reference_max_age_s)
        self._builders: WorkerPool | None = None
        self._runner: WorkerPool | None = None
        self._tmpdir: str | None = None
        self._mod_json: dict[str, str] = {}  # task id -> tvm.ir.save_json(task.mod)
        self.libraries = LibraryCache(self._retime_k, self._remove)

    @property
    def stats(self) -> dict:
        """Cumulative seconds: build/run phases (and their overlap, uploads, noisy timings timed again), output
        checks, protocol work, waiting for the lock."""
        return {**self._stats, "lock_wait_s": self.lock.wait_s}

    def worker_pids(self) -> list[int]:
        return [pid for pool in (self._builders, self._runner) if pool is not None for pid in pool.pids()]

    # ---- facts -------------------------------------------------------------------------
    def _threads(self) -> int:
        """Threads of the timed kernels (and of the PyTorch baselines): this machine's CPU count."""
        return int(os.cpu_count() or 1)

    @classmethod
    def check_model(cls, settings, model, own_schedules: bool) -> None:
        """``model=ops`` with a method that searches a template's space: every chosen operator has a
        template in ``target.template`` (metaschedule and gat make their own schedules: no check). A user's
        model (``model=torch``, ``model=onnx``) is imported here, every stage of it
        (:mod:`tunebench.datasets.import_stages`), so that a model that fails only when imported is one
        line before any run; the run reuses the import (cached in-process)."""
        from tunebench.datasets.models import OnnxModel, OpsModel, TorchModel

        if isinstance(model, (TorchModel, OnnxModel)):  # a user's model: its whole import (cached for the run)
            from tunebench.targets.tvm.workloads.tasks import model_tasks

            model_tasks(model, cls.kind)
            return
        if not isinstance(model, OpsModel) or own_schedules:
            return
        from tunebench.datasets.operators import kind_of, select_cases
        from tunebench.targets.tvm.templates import missing_template

        template = settings.template or cls.templates[0]
        for abbr, number, shape in select_cases(model.operators, model.cases):
            if problem := missing_template(kind_of(abbr, shape), cls.kind, template):
                raise UserError(f"task {abbr}_{number}: {problem}")

    def load_tasks(self, model, own_schedules: bool = False):
        """The model's conv2d / depthwise / dense tasks (or its single operators), each with the space
        of its kind's template in ``target.template``. A task kind without a template is an error,
        unless the method makes its own schedules (``own_schedules``): then its task gets the
        template-free ``flex`` space, whose checks (GPU limits) its candidates go through."""
        from tunebench.targets.tvm.templates import get_template, missing_template
        from tunebench.targets.tvm.workloads.tasks import model_tasks

        tasks, imported = model_tasks(model, self.kind)
        if not tasks:
            raise UserError(f"model={model.name}: no conv2d/depthwise/dense tasks found")
        for t in tasks:
            problem = missing_template(t.kind, self.kind, self.template)
            if problem and not own_schedules:
                raise UserError(f"task {t.name}: {problem}")
            t.template = "flex" if problem else self.template
            t.space = get_template(t.kind, self.kind, t.template).make_space(t.mod)
        return tasks, imported

    def run_steps(self, cfg, imported) -> list:
        """The end-to-end step (``e2e.enabled``): the whole model with each task's best schedule against TVM's
        default build and PyTorch (:mod:`tunebench.targets.tvm.e2e`)."""
        from tunebench.targets.tvm.e2e import EndToEndStep

        return [EndToEndStep(imported)] if cfg.e2e.enabled else []

    def run_tags(self) -> dict[str, str]:
        return {"precision": self.precision, "threads": str(self.threads)}

    def space_facts(self, task: Task) -> dict:
        from tunebench.targets.tvm.template_files import template_code_digest, template_file, template_source_digest
        from tunebench.targets.tvm.templates import get_template

        rel = template_file(get_template(task.kind, self.kind, task.template).source_class(task.mod))
        return {"template": task.template, "template_file": rel, "template_sha256": template_source_digest(rel),
                "template_code_sha256": template_code_digest(rel),
                "tvm_target": dict(self.info.tvm_target or {}), "threads": self.threads, "precision": self.precision,
                "device": self.device_facts()}

    def device_facts(self) -> dict:
        """The device a space is measured on, as space files record it: its name (a GPU's, or the CPU model)
        and, for a GPU, its driver version; measurements from two devices that differ here are not merged."""
        return {"name": self.device["name"], **({"driver": self.device.get("driver")} if self.gpu else {})}

    def space_tools(self) -> dict:
        return {"tvm": tvm_version()}

    def threads_label(self) -> str:
        """How the timed kernels run, for log lines: ``<n> threads`` (a GPU says ``GPU``)."""
        return f"{self.threads} threads"

    # ---- device ---------------------------------------------------------------------
    def _probe_local(self) -> None:
        """TVM target, device spec, description and lock key of this machine's device."""
        raise NotImplementedError

    def _remote_device(self, info: dict, where: dict) -> None:
        """TVM target and description of the device behind ``target.rpc`` (``info``: what it reported)."""
        raise NotImplementedError

    def _probe_remote(self) -> None:
        """Target, device and spec of the device behind ``target.rpc`` (asked of one short session)."""
        from tunebench.targets.tvm.remote import remote_spec
        from tunebench.targets.tvm.rpc import probe_remote

        info = probe_remote(self.rpc, self.device_type, self.device_id, gpu=self.gpu)
        self._remote_device(info, {"rpc_tracker": self.rpc["tracker"], "rpc_key": self.rpc["key"]})
        self.device_key = f"rpc-{self.rpc['key']}"
        self.device_spec = remote_spec(self.rpc, self.device_type, self.device_id, self.threads,
                                       set_threads=not self.gpu)

    def info_fields(self, task: Task | None = None) -> dict:
        """The device (its name and description), the TVM target for methods that compile, the
        threads and precision of the timed kernels, the template variant the tasks' spaces come from."""
        details = {**{k: v for k, v in self.device.items() if k not in ("kind", "name")}, "template": self.template}
        return {**super().info_fields(task), "device_name": self.device["name"], "tvm_target": dict(self.tvm_target),
                "threads": self.threads, "precision": self.precision, "details": details}

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker processes (before any task clock starts)."""
        if self._builders is None:
            # no more workers than configs built at once (each worker imports TVM when it starts)
            n = min(self.settings.builder.n_parallel or os.cpu_count() or 1, max(self.batch_size, self._retime_k))
            handler = self.settings.handler or HANDLER
            env = {"TVM_NUM_THREADS": self.threads}
            self._builders = WorkerPool(handler, int(n), env=env, prepare=PREPARE)
            self._runner = WorkerPool(handler, 1, env=env, prepare=PREPARE)
            self._tmpdir = run_temp_dir("build")
            self._builders.start()
            self._runner.start()

    def runner_call(self, name: str, request, timeout_s: float) -> tuple[bool, object, float]:
        """One request to the runner worker: ``(ok, result or error text, wall s)``.

        On a remote device: the seconds the request waited for a session count as lock wait; a
        request that found no device free within ``target.rpc.wait_s`` raises
        :class:`DeviceUnavailable`; a protocol step (calibration, re-timing, check, peak) whose
        device was lost is repeated on the next device (a candidate's ``run`` is not: it becomes an
        invalid measurement naming the lost device)."""
        for _ in range(1 + (REMOTE_RETRIES if self.rpc and name != "run" else 0)):
            ok, res, wall = self._runner.map(name, [request], timeout_s)[0]
            if not ok and isinstance(res, str) and res.startswith("NoDevice:"):
                raise DeviceUnavailable(f"target.rpc: {res.removeprefix('NoDevice:').strip()}")
            if ok and isinstance(res, DeviceResult) and res.session_wait_s:
                self.lock.wait_s += res.session_wait_s
            if ok or not str(res).startswith("DeviceLost:"):
                break
            log.warning("%s: %s; repeated on another %s device", name, res, self.rpc["key"])
        return ok, res, wall

    def runner_alive(self) -> bool:
        return self._runner is not None and all(w.alive for w in self._runner.workers)

    @property
    def sees_device_load(self) -> bool:
        """Whether the CPU other processes use on the device can be seen (a local CPU; not a GPU's
        load, nor a remote machine's). None here; :class:`LLVMTarget` sees its own CPU."""
        return False

    def device_worker(self):
        """The worker that runs the whole-model rows of the end-to-end step on a remote device (the
        runner, which holds the device's session), or None: on a local device each row gets its own."""
        if not self.rpc:
            return None
        self.start()
        return self._runner.workers[0]

    def close(self) -> None:
        self.libraries.drop()
        for pool in (self._builders, self._runner):
            if pool is not None:
                pool.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
        self._builders = self._runner = self._tmpdir = None

    # ---- measuring -------------------------------------------------------------------
    def _task_spec(self, task: Task) -> TaskSpec:
        import tvm

        if task.id not in self._mod_json:  # serialized once per task, sent with every request
            self._mod_json[task.id] = tvm.ir.save_json(task.mod)
        return TaskSpec(key=f"{task.id}:{task.template}", mod_json=self._mod_json[task.id], kind=task.kind,
                        target_kind=self.kind, template=task.template)

    def _arg_specs(self, task: Task) -> list:
        from tunebench.targets.tvm.worker import arg_specs

        return [[list(shape), dtype] for shape, dtype in arg_specs(task.mod)]

    def _build_all(self, task: Task, configs: list, phase: str = "build_phase_s") -> list:
        """Build ``configs`` in parallel (without the device lock); the wall time counts in ``phase``.
        Returns the library paths (None where the build failed) and the builders' ``(ok, result or
        error, wall s)`` per config."""
        requests = [self._build_input(task, c, self._library_path(task, c)) for c in configs]
        t0 = time.perf_counter()
        built = self._builders.map("build", requests, float(self.settings.builder.timeout_s))
        self._stats[phase] += time.perf_counter() - t0
        return [r.path if ok else None for r, (ok, _, _) in zip(requests, built)], built

    def _library_path(self, task: Task, config) -> str:
        """A fresh path in the run's build folder for the library of ``config`` of ``task``."""
        return os.path.join(self._tmpdir, f"{task.id}-{config.index}-{time.monotonic_ns()}.so")

    def build_kernels(self, jobs: list, folder: str) -> list[tuple[str | None, str | None]]:
        """Build each ``(task, config)`` of ``jobs`` (config None: the task's default kernel) into ``folder``, in
        parallel on the builders; per job ``(library path, None)`` or ``(None, the build's error)``."""
        self.start()
        requests = [self._build_input(t, c, os.path.join(folder, f"{t.id}-{i}.so")) for i, (t, c) in enumerate(jobs)]
        built = self._builders.map("build", requests, float(self.settings.builder.timeout_s))
        return [(r.path, None) if ok else (None, str(res)) for r, (ok, res, _) in zip(requests, built)]

    def _build_input(self, task: Task, config, path: str) -> BuildInput:
        """The builders' request for ``config`` of ``task`` (None: the task's default kernel) into ``path``."""
        return BuildInput(task=self._task_spec(task), index=-1 if config is None else config.index,
                          trace=None if config is None else trace_of(config), target=self.tvm_target,
                          limits=self.limits, default=config is None, path=path)

    @staticmethod
    def _remove(paths) -> None:
        from tunebench.targets.tvm.worker import args_file

        for path in paths:
            for name in (path, args_file(path)):
                try:
                    os.remove(name)
                except OSError:
                    pass
