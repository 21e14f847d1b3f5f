"""TVM measurement targets: ``llvm`` (this CPU) and ``cuda`` (a GPU).

A batch of configs is measured in two phases, like AutoTVM's LocalBuilder/LocalRunner:

1. **build**: up to ``builder.n_parallel`` worker processes apply the template and compile each
   config to a shared library (cuda: configs that break the GPU's limits are rejected first);
2. **run**: one runner process times each library with TVM's time evaluator, one at a time, while
   holding the device's lock, so measurements never overlap (also across concurrent jobs).

Build and run errors, crashes and timeouts become invalid :class:`Measurement` s with the error text.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import statistics
import tempfile
import time

import numpy as np

from tunebench.errors import UserError
from tunebench.space import Config, TraceConfig
from tunebench.targets.devicelock import device_lock
from tunebench.targets.workers import WorkerPool
from tunebench.task import Measurement, Task

log = logging.getLogger(__name__)

HANDLER = "tunebench.targets.tvm_worker:handle"  # default request handler of the worker processes


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class TVMTarget:
    """Real compile-and-time measurement through TVM on a local device.

    Args:
        cfg: the target config (``conf/target/llvm.yaml`` or ``cuda.yaml``) as a dict.
    """

    objectives = ["latency_s"]  # minimized
    fidelities = ["hw"]

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.kind = cfg["kind"]
        self.name = cfg.get("name", self.kind)
        self.device_id = int(cfg.get("device_id", 0))
        self.batch_size = int(cfg.get("batch_size", 8))
        self.builder_cfg = dict(cfg.get("builder", {}))
        self.runner_cfg = dict(cfg.get("runner", {}))
        self.check_cfg = dict(cfg.get("check", {}))
        self.lock_dir = cfg.get("lock_dir")
        cache = self.check_cfg.get("reference_cache", "default")
        self.ref_cache_dir = (os.path.join(tempfile.gettempdir(), "tunebench-references") if cache == "default"
                              else (os.path.expanduser(str(cache)) if cache else None))
        self.limits: dict = {}
        self.stats = {"build_phase_s": 0.0, "run_phase_s": 0.0, "check_s": 0.0}  # cumulative wall seconds
        self._probe_device()
        self._builders: WorkerPool | None = None
        self._runner: WorkerPool | None = None
        self._tmpdir: str | None = None
        self._mod_json: dict[str, str] = {}  # task id -> tvm.ir.save_json(task.mod)

    # ---- device ---------------------------------------------------------------------
    def _probe_device(self) -> None:
        import tvm

        n_cores = self.cfg.get("num_cores") or os.cpu_count() or 1
        if self.kind == "llvm":
            mcpu = self.cfg.get("mcpu") or "native"
            if mcpu == "native":
                mcpu = tvm.target.codegen.llvm_get_system_cpu()
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
            major, minor = dev.compute_version.split(".")
            self.tvm_target = {"kind": "cuda", "arch": f"sm_{major}{minor}",
                               "max_threads_per_block": dev.max_threads_per_block,
                               "max_shared_memory_per_block": dev.max_shared_memory_per_block,
                               "thread_warp_size": dev.warp_size}
            self.device_spec = ["cuda", self.device_id]
            self.limits = {"max_threads_per_block": dev.max_threads_per_block,
                           "max_shared_memory_per_block": dev.max_shared_memory_per_block,
                           "max_thread_x": dev.max_thread_dimensions[0],
                           "max_thread_y": dev.max_thread_dimensions[1],
                           "max_thread_z": dev.max_thread_dimensions[2],
                           "max_vthread": int(self.cfg.get("max_vthread", 8))}
            self.device = {"kind": "cuda", "name": dev.device_name, "compute_version": dev.compute_version,
                           "host": platform.node(), **self.limits}
            self.device_key = f"cuda{self.device_id}-{platform.node()}"
        else:
            raise UserError(f"target kind={self.kind!r} is not a TVM target; valid: llvm, cuda")

    def describe(self) -> dict:
        """Device description recorded with every run (plus the TVM target, for methods that compile)."""
        return {**self.device, "tvm_target": dict(self.tvm_target), "objectives": list(self.objectives),
                "fidelities": list(self.fidelities)}

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker processes (before any task clock starts)."""
        if self._builders is None:
            n = self.builder_cfg.get("n_parallel") or os.cpu_count() or 1
            handler = self.cfg.get("handler") or HANDLER
            self._builders = WorkerPool(handler, int(n))
            self._runner = WorkerPool(handler, 1)
            self._tmpdir = tempfile.mkdtemp(prefix="tunebench-build-")
            self._builders.start()
            self._runner.start()

    def close(self) -> None:
        for pool in (self._builders, self._runner):
            if pool is not None:
                pool.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
        self._builders = self._runner = self._tmpdir = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- measuring -------------------------------------------------------------------
    def _payload(self, task: Task) -> dict:
        import tvm

        if task.id not in self._mod_json:  # serialized once per task, sent with every request
            self._mod_json[task.id] = tvm.ir.save_json(task.mod)
        return {"task_key": task.id, "mod_json": self._mod_json[task.id], "task_kind": task.kind,
                "target_kind": self.kind, "target": self.tvm_target, "limits": self.limits}

    def measure(self, task: Task, configs: list[Config | TraceConfig], fidelity: str | None = None) -> list[Measurement]:
        """Build and time ``configs`` of ``task``; one :class:`Measurement` per config, in order.
        ``fidelity``: None or "hw" (the only one)."""
        if fidelity not in (None, "hw"):
            raise UserError(f"fidelity={fidelity!r} is unknown for target {self.name}; valid: hw")
        from tunebench.targets.templates import get_template
        from tunebench.targets.tvm_worker import arg_specs

        self.start()
        tpl = get_template(task.kind, self.kind)
        base = self._payload(task)
        results: list[Measurement | None] = [None] * len(configs)
        to_build, payloads = [], []
        for i, cfg in enumerate(configs):
            is_trace = isinstance(cfg, TraceConfig)
            err = tpl.check(task.mod, cfg, self.limits) if self.kind == "cuda" and not is_trace else None
            if err:
                results[i] = Measurement(task.id, cfg, valid=False, error=f"invalid config: {err}")
                continue
            path = os.path.join(self._tmpdir, f"{task.id}-{cfg.index}-{time.monotonic_ns()}.so")
            payloads.append({**base, "index": cfg.index, "trace": cfg.trace if is_trace else None, "path": path})
            to_build.append(i)

        t0 = time.perf_counter()
        built = self._builders.map("build", payloads, float(self.builder_cfg.get("timeout_s", 60)))
        self.stats["build_phase_s"] += time.perf_counter() - t0
        specs = [[list(s), d] for s, d in arg_specs(task.mod)]
        to_run = []
        for i, payload, (ok, res, wall) in zip(to_build, payloads, built):
            if not ok:
                results[i] = Measurement(task.id, configs[i], valid=False, error=f"build: {res}", build_s=wall)
            else:
                to_run.append((i, payload["path"], res["build_s"]))

        rc = self.runner_cfg
        timeout = float(rc.get("timeout_s", 60))
        cooldown = float(rc.get("cooldown_s", 0.0))
        with device_lock(self.device_key, self.lock_dir):
            t0 = time.perf_counter()
            for i, path, build_s in to_run:
                run_payload = {"path": path, "args": specs, "device": self.device_spec,
                               "number": int(rc.get("number", 1)), "repeat": int(rc.get("repeat", 3)),
                               "min_repeat_ms": int(rc.get("min_repeat_ms", 0))}
                ok, res, wall = self._runner.map("run", [run_payload], timeout)[0]
                if cooldown:
                    time.sleep(cooldown)
                if not ok:
                    results[i] = Measurement(task.id, configs[i], valid=False, error=f"run: {res}",
                                             build_s=build_s, run_s=wall)
                    continue
                times = res["results_s"]
                lat = statistics.median(times) if rc.get("statistic", "median") == "median" else statistics.fmean(times)
                results[i] = Measurement(task.id, configs[i], valid=True, latency_s=lat,
                                         latency_std_s=float(np.std(times)), gflops=task.flops / lat / 1e9,
                                         build_s=build_s, run_s=res["run_s"])
            self.stats["run_phase_s"] += time.perf_counter() - t0
        for _, path, _ in to_run:
            try:
                os.remove(path)
            except OSError:
                pass
        for m in results:
            m.cost_s = m.build_s + m.run_s
        return results  # type: ignore[return-value]

    def check(self, task: Task, config: Config | TraceConfig) -> tuple[bool, str]:
        """Run ``config`` once and compare its output with the unscheduled task on the host CPU.

        Returns ``(ok, detail)``; ``detail`` gives the error (relative to the reference's largest
        magnitude) or the failure text.
        """
        import tvm

        self.start()
        tol = float(self.check_cfg.get("tolerance", 1e-4))
        payload = {**self._payload(task), "index": config.index, "device": self.device_spec,
                   "trace": config.trace if isinstance(config, TraceConfig) else None,
                   "ref_cache_dir": self.ref_cache_dir,
                   "ref_target": {"kind": "llvm", "num-cores": os.cpu_count() or 1,
                                  "mcpu": tvm.target.codegen.llvm_get_system_cpu()}}
        with device_lock(self.device_key, self.lock_dir):
            ok, res, wall = self._runner.map("check", [payload], float(self.check_cfg.get("timeout_s", 600)))[0]
        self.stats["check_s"] += wall
        if not ok:
            return False, f"check failed: {res}"
        detail = f"max abs err {res['max_abs_err']:.3g} (relative {res['rel_err']:.3g}, tolerance {tol:g})"
        return res["rel_err"] <= tol, detail
