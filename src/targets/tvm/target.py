"""TVM measurement targets: ``llvm`` (this CPU) and ``cuda`` (a GPU).

A batch of configs is measured in two phases, like AutoTVM's LocalBuilder/LocalRunner:

1. **build**: up to ``builder.n_parallel`` worker processes apply the template and compile each
   config to a shared library (cuda: configs that break the GPU's limits are rejected first);
2. **run**: one runner process times each library with TVM's time evaluator, one at a time, while
   holding the device's lock, so measurements never overlap (also across concurrent jobs); a noisy
   timing is timed again and, if it stays noisy, marked (:mod:`tunebench.targets.tvm.timing`).

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
import tempfile
import time

from tunebench.errors import DeviceUnavailable, UserError
from tunebench.protocol.machine import MachineCache
from tunebench.protocol.noise import CpuMonitor, NoisePolicy
from tunebench.protocol.remote import DeviceResult
from tunebench.safe_files import private_dir, user_dir
from tunebench.space import Config, TraceConfig
from tunebench.targets.base import Target
from tunebench.targets.devicelock import DeviceLock
from tunebench.targets.tvm.messages import BuildInput, CheckInput, RunInput, TaskSpec
from tunebench.targets.tvm.rpc import SessionHold, rpc_settings
from tunebench.targets.tvm.timing import TimingProtocol
from tunebench.targets.workers import WorkerPool
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)

HANDLER = "tunebench.targets.tvm.worker:handle"  # default request handler of the worker processes
PREPARE = "tunebench.targets.tvm.worker:prepare"  # imports TVM in a worker before it reports ready
REMOTE_RETRIES = 2  # a protocol step whose remote device was lost is repeated on up to this many others


def tvm_version() -> str:
    import tvm

    return str(tvm.__version__)


def llvm_cpu(mcpu: str) -> str:
    """The LLVM CPU name for ``target.mcpu`` (``native``: this machine's); an unknown name is a
    :class:`UserError` listing the valid ones (LLVM would print an error per function and fall back
    to a generic CPU)."""
    from tvm.target import codegen

    if mcpu == "native":
        return codegen.llvm_get_system_cpu()
    triple = codegen.llvm_get_system_triple()
    if not codegen.llvm_is_valid_cpu(str(mcpu), triple):
        import tvm

        valid = sorted(set(codegen.llvm_get_cpu_archlist(tvm.target.Target("llvm"))))
        raise UserError(f"target.mcpu={mcpu!r} is not an LLVM CPU for {triple}; valid: native, {', '.join(valid)}")
    return str(mcpu)


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def reference_cache_dir(setting) -> str | None:
    """The folder of cached reference outputs for ``target.check.reference_cache``: ``default`` =
    this user's ``user_dir("references")``, a path (must be private to this user), null = none."""
    if setting == "default":
        return user_dir("references")
    return private_dir(str(setting)) if setting else None


class TVMTarget(TimingProtocol, Target):
    """Real compile-and-time measurement through TVM on a local device.

    Args:
        cfg: the target config (``conf/target/llvm.yaml`` or ``cuda.yaml``) as a dict.
        measure: the experiment's ``measure`` config (noise thresholds, machine cache folder).
    """

    objectives = ("latency_s",)  # minimized
    fidelities = ("hw",)
    times_kernels = True  # the harness calibrates, re-times and reports the peak for this target
    precision = "float32"

    def __init__(self, cfg: dict, measure: dict | None = None):
        super().__init__()
        self.cfg = cfg
        self.kind = cfg["kind"]
        self.name = cfg.get("name", self.kind)
        self.device_id = int(cfg.get("device_id", 0))
        self.batch_size = int(cfg.get("batch_size", 8))
        self.builder_cfg = dict(cfg.get("builder", {}))
        self.runner_cfg = dict(cfg.get("runner", {}))
        self.check_cfg = dict(cfg.get("check", {}))
        self.lock_dir = cfg.get("lock_dir")
        measure = dict(measure or {})
        self.policy = NoisePolicy.from_cfg(measure.get("noise"))
        self.threads = int(cfg.get("num_cores") or os.cpu_count() or 1)
        self.ref_cache_dir = reference_cache_dir(self.check_cfg.get("reference_cache", "default"))
        self.limits: dict = {}
        self.rpc = rpc_settings(cfg)
        self._probe_device()
        self.template = self._template(cfg.get("template"))
        notice_s = float(measure.get("lock_notice_s", 3.0))
        self.lock = SessionHold(self, notice_s) if self.rpc else DeviceLock(self.device_key, self.lock_dir, notice_s)
        self.monitor = CpuMonitor(self.worker_pids, min_window_s=0.1)
        host = f"rpc:{self.rpc['tracker']}/{self.rpc['key']}" if self.rpc else platform.node()
        self.machine = MachineCache({"host": host, "device": self.device["name"], "kind": self.kind,
                                     "threads": self.threads, "tvm": tvm_version()}, measure.get("cache_dir"))
        self._builders: WorkerPool | None = None
        self._runner: WorkerPool | None = None
        self._tmpdir: str | None = None
        self._mod_json: dict[str, str] = {}  # task id -> tvm.ir.save_json(task.mod)

    @property
    def stats(self) -> dict:
        """Cumulative seconds: build/run phases, output checks, protocol work, waiting for the lock."""
        return {**self._stats, "lock_wait_s": self.lock.wait_s}

    def worker_pids(self) -> list[int]:
        return [pid for pool in (self._builders, self._runner) if pool is not None for pid in pool.pids()]

    # ---- device ---------------------------------------------------------------------
    def _probe_device(self) -> None:
        import tvm

        if self.kind not in ("llvm", "cuda"):
            raise UserError(f"target kind={self.kind!r} is not a TVM target; valid: llvm, cuda")
        if self.rpc:
            return self._probe_remote()
        n_cores = self.threads
        if self.kind == "llvm":
            mcpu = llvm_cpu(self.cfg.get("mcpu") or "native")
            self.tvm_target = {"kind": "llvm", "num-cores": int(n_cores), "mcpu": mcpu}
            self.device_spec = ["cpu", 0]
            self.device = {"kind": "llvm", "name": cpu_model_name(), "mcpu": mcpu,
                           "num_cores": int(n_cores), "host": platform.node()}
            self.device_key = f"cpu-{platform.node()}"
        elif self.kind == "cuda":
            dev = tvm.cuda(self.device_id)
            if not dev.exist:
                raise UserError(f"target=cuda: no CUDA GPU found (tvm.cuda({self.device_id}).exist is False); "
                                "use target=llvm on this machine")
            self._set_gpu({"name": dev.device_name, "compute_version": dev.compute_version,
                           "max_threads_per_block": dev.max_threads_per_block,
                           "max_shared_memory_per_block": dev.max_shared_memory_per_block,
                           "warp_size": dev.warp_size, "max_thread_dimensions": list(dev.max_thread_dimensions)},
                          platform.node())
            self.device_spec = ["cuda", self.device_id]
            self.device_key = f"cuda{self.device_id}-{platform.node()}"

    def _set_gpu(self, gpu: dict, host: str) -> None:
        """TVM target, schedule limits and description of a CUDA GPU (``gpu``: its properties)."""
        major, minor = str(gpu["compute_version"]).split(".")
        self.tvm_target = {"kind": "cuda", "arch": f"sm_{major}{minor}",
                           "max_threads_per_block": gpu["max_threads_per_block"],
                           "max_shared_memory_per_block": gpu["max_shared_memory_per_block"],
                           "thread_warp_size": gpu["warp_size"]}
        dims = gpu["max_thread_dimensions"]
        self.limits = {"max_threads_per_block": gpu["max_threads_per_block"],
                       "max_shared_memory_per_block": gpu["max_shared_memory_per_block"],
                       "max_thread_x": dims[0], "max_thread_y": dims[1], "max_thread_z": dims[2],
                       "max_vthread": int(self.cfg.get("max_vthread", 8))}
        self.device = {"kind": "cuda", "name": gpu["name"], "compute_version": gpu["compute_version"],
                       "host": host, **self.limits}

    def _probe_remote(self) -> None:
        """Target, device and spec of the device behind ``target.rpc`` (asked of one short session)."""
        from tunebench.protocol.remote import remote_spec
        from tunebench.targets.tvm.rpc import probe_remote, remote_cpu

        info = probe_remote(self.rpc, self.kind, self.device_id)
        where = {"rpc_tracker": self.rpc["tracker"], "rpc_key": self.rpc["key"]}
        if self.kind == "llvm":
            mcpu, self.threads = remote_cpu(self.cfg, info, self.rpc)
            self.tvm_target = {"kind": "llvm", "num-cores": self.threads, "mcpu": mcpu}
            self.device = {"kind": "llvm", "name": f"{mcpu} via RPC ({self.rpc['key']})", "mcpu": mcpu,
                           "num_cores": self.threads, "host": info["server"], **where}
        else:
            self._set_gpu(info, info["server"])
            self.device.update(where)
        self.device_key = f"rpc-{self.rpc['key']}"
        self.device_spec = remote_spec(self.rpc, self.kind, self.device_id, self.threads)

    def _template(self, name) -> str:
        """``target.template``: a template variant of this kind (null: the kind's default)."""
        from tunebench.targets.tvm.variants import VARIANTS, template_problem

        problem = template_problem(self.kind, name)
        if problem:
            raise UserError(f"target.template={name!r} {problem}")
        return str(name or VARIANTS[self.kind][0])

    def info_fields(self) -> dict:
        """The device (its name and description), the TVM target for methods that compile, the
        threads and precision of the timed kernels, the template variant the tasks' spaces come from."""
        details = {**{k: v for k, v in self.device.items() if k not in ("kind", "name")}, "template": self.template}
        return {**super().info_fields(), "device_name": self.device["name"], "tvm_target": dict(self.tvm_target),
                "details": details}

    # ---- lifecycle -------------------------------------------------------------------
    def validate_tasks(self, tasks) -> None:
        """Nothing to check before the run: every task is compiled when measured."""

    def start(self) -> None:
        """Start the worker processes (before any task clock starts)."""
        if self._builders is None:
            n = self.builder_cfg.get("n_parallel") or os.cpu_count() or 1
            handler = self.cfg.get("handler") or HANDLER
            env = {"TVM_NUM_THREADS": self.threads}
            self._builders = WorkerPool(handler, int(n), env=env, prepare=PREPARE)
            self._runner = WorkerPool(handler, 1, env=env, prepare=PREPARE)
            self._tmpdir = tempfile.mkdtemp(prefix="tunebench-build-")
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
        load, nor a remote machine's)."""
        return self.kind == "llvm" and not self.rpc

    def device_worker(self):
        """The worker that runs the whole-model rows of the end-to-end step on a remote device (the
        runner, which holds the device's session), or None: on a local device each row gets its own."""
        if not self.rpc:
            return None
        self.start()
        return self._runner.workers[0]

    def close(self) -> None:
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
        spec = self._task_spec(task)
        requests = [BuildInput(task=spec, index=c.index, trace=_trace(c), target=self.tvm_target, limits=self.limits,
                               path=os.path.join(self._tmpdir, f"{task.id}-{c.index}-{time.monotonic_ns()}.so"))
                    for c in configs]
        t0 = time.perf_counter()
        built = self._builders.map("build", requests, float(self.builder_cfg.get("timeout_s", 60)))
        self._stats[phase] += time.perf_counter() - t0
        return [r.path if ok else None for r, (ok, _, _) in zip(requests, built)], built

    @staticmethod
    def _remove(paths) -> None:
        from tunebench.targets.tvm.worker import args_file

        for path in paths:
            for name in (path, args_file(path)):
                try:
                    os.remove(name)
                except OSError:
                    pass

    def measure(self, task: Task, configs: list[Config | TraceConfig], fidelity: str | None = None) -> list[Measurement]:
        """Build and time ``configs`` of ``task``; one :class:`Measurement` per config, in order.
        ``fidelity``: None or "hw" (the only one)."""
        if fidelity not in (None, "hw"):
            raise UserError(f"fidelity={fidelity!r} is unknown for target {self.name}; valid: hw")
        from tunebench.targets.tvm.templates import get_template

        self.start()
        tpl = get_template(task.kind, self.kind, task.template)
        results: list[Measurement | None] = [None] * len(configs)
        to_build = []
        for i, cfg in enumerate(configs):
            err = tpl.check(task.mod, cfg, self.limits) if self.kind == "cuda" and not isinstance(cfg, TraceConfig) else None
            if err:
                results[i] = Measurement(task.id, cfg, valid=False, error=f"invalid config: {err}")
            else:
                to_build.append(i)
        paths, built = self._build_all(task, [configs[i] for i in to_build])
        to_run = []
        for i, path, (ok, res, wall) in zip(to_build, paths, built):
            if not ok:
                results[i] = Measurement(task.id, configs[i], valid=False, error=f"build: {res}", build_s=wall)
            else:
                to_run.append((i, path, res.build_s))
        with self.lock:
            t0 = time.perf_counter()
            for i, path, build_s in to_run:
                results[i] = self._run_one(task, configs[i], path, build_s)
            self._stats["run_phase_s"] += time.perf_counter() - t0
        self._remove(path for _, path, _ in to_run)
        for m in results:
            m.cost_s = m.build_s + m.run_s
        return results  # type: ignore[return-value]

    def _run_one(self, task: Task, config, path: str, build_s: float) -> Measurement:
        rc = self.runner_cfg
        request = RunInput(path=path, args=self._arg_specs(task), device=self.device_spec,
                           number=int(rc.get("number", 1)), repeat=int(rc.get("repeat", 3)),
                           min_repeat_ms=int(rc.get("min_repeat_ms", 0)))
        ok, res, run_s = self.time_built(request, float(rc.get("timeout_s", 60)))
        if cooldown := float(rc.get("cooldown_s", 0.0)):
            time.sleep(cooldown)
        if not ok:
            return Measurement(task.id, config, valid=False, error=f"run: {res}", build_s=build_s, run_s=run_s,
                               device=self.lock.server if self.rpc else "")
        stats, verdict, attempts, server = res
        lat = stats.median if rc.get("statistic", "median") == "median" else stats.mean
        return Measurement(task.id, config, valid=True, latency_s=lat, latency_std_s=stats.std,
                           gflops=task.flops / lat / 1e9, build_s=build_s, run_s=run_s,
                           latency_min_s=stats.min, noisy=verdict.noisy,
                           noise={**verdict.to_dict(), "attempts": attempts}, device=server)

    def check(self, task: Task, config: Config | TraceConfig) -> tuple[bool | None, str]:
        """Run ``config`` once and compare its output with the unscheduled task on the host CPU.

        Returns ``(ok, detail)``: ``ok`` True (output matches), False (wrong output) or None (the
        check could not be performed: a worker error, crash or timeout, a reference that could not be
        computed); ``detail`` gives the error (relative to the reference's largest magnitude) or the
        reason. A cached reference that was discarded (failed its hash) is logged as a warning.
        """
        import tvm

        self.start()
        tol = float(self.check_cfg.get("tolerance", 1e-4))
        request = CheckInput(task=self._task_spec(task), index=config.index, trace=_trace(config),
                             target=self.tvm_target, device=self.device_spec, ref_cache_dir=self.ref_cache_dir,
                             op_reference=_op_reference(task),
                             ref_target={"kind": "llvm", "num-cores": os.cpu_count() or 1,
                                         "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
        with self.lock:
            ok, res, wall = self.runner_call("check", request, float(self.check_cfg.get("timeout_s", 600)))
        self._stats["check_s"] += wall
        if not ok:
            return None, f"check not performed: {res}"
        if res.reference_note:
            log.warning("task %s: %s", task.name, res.reference_note)
        detail = f"max abs err {res.max_abs_err:.3g} (relative {res.rel_err:.3g}, tolerance {tol:g})"
        return res.rel_err <= tol, detail


def _trace(config: Config | TraceConfig) -> str | None:
    """The schedule trace of a candidate given as one, else None (a knob config: its ``index``)."""
    return config.trace if isinstance(config, TraceConfig) else None


def _op_reference(task: Task) -> dict | None:
    """A single operator of ``model=ops`` is checked against PyTorch: ``{"op", "shape"}``; else None
    (the unscheduled task, compiled for the host CPU, is the reference)."""
    from tunebench.datasets.operators import task_operator

    op = task_operator(task.shape)
    return {"op": op[0], "shape": op[1]} if op else None
