"""Never slower than TVM's default: each task's tuned kernel against its default kernel, the faster one taken.

Before the whole model is built (:mod:`tunebench.targets.tvm.e2e.timing`), every task with a tuned schedule
has two kernels timed under the same protocol:

- ``tuned``: the task's best schedule (weights read packed when the schedule packs them, as the model
  runs it: the packing is lifted out of the kernel);
- ``default``: what ``tvm.compile`` makes of the unscheduled task without tuning
  (:func:`~tunebench.targets.tvm.scheduling.default_schedule`: dlight's default GPU schedule on a GPU target,
  TVM's default lowering of the loop nest on a CPU).

Both are compiled for the target's TVM target, every task's pair at once on the target's builders, and
timed one task at a time by the target's runner worker, holding the device lock, in ``e2e.rounds``
interleaved rounds (each round times both kernels with ``e2e.kernel_repeat`` repeats of at least
``e2e.min_sample_ms`` each, in an order rotated per round, then the calibration kernel), on the same
random inputs and with the target's threads: the request the final re-timing of each task uses
(``"retime"``). Each kernel's samples give median, minimum and CV; the
comparison is the geometric mean over the rounds of the ratio default / tuned of the rounds' medians,
with its 95 % Student-t interval over the rounds. A noisy attempt (robust CV, CPU used by other processes, calibration
drift over ``measure.noise``) is repeated up to ``measure.noise.remeasure`` times; the least noisy one
is kept.

Decision. The default kernel is taken when the ratio's point estimate is below 1 (the default is
faster); an exact tie keeps the tuned kernel. When the interval contains 1 the two kernels are equally
fast within timing noise, so either choice costs at most the interval's width; the choice is then marked
``within_noise``. A default kernel that does not compile, or a timing that fails, keeps the tuned kernel
and records why.
"""

from __future__ import annotations

import logging
import math
import shutil

import tvm

from tunebench.config.experiment import E2ESettings
from tunebench.protocol.noise import CpuMonitor, judge, until_clean
from tunebench.protocol.stats import paired_ratio_ci, summarize
from tunebench.safe_files import run_temp_dir
from tunebench.targets.tvm.e2e.build import one_line

log = logging.getLogger(__name__)

KERNELS = ("tuned", "default")  # the order of the libraries in the timing request


def _arg_specs(mod: tvm.IRModule) -> list:
    return [[[int(d) for d in p.ty.shape], str(p.ty.dtype)] for p in mod["main"].params]


def _time_pair(task, paths: list[str], target, s: E2ESettings) -> dict:
    """One interleaved attempt; per kernel its stats (ms), per-round medians (ms) and verdict."""
    from tunebench.targets.tvm.messages import RetimeInput

    request = RetimeInput(paths=paths, args=_arg_specs(task.mod), device=target.device_spec,
                          target=dict(target.tvm_target), rounds=int(s.rounds), repeat=int(s.kernel_repeat),
                          min_repeat_ms=int(s.min_sample_ms))
    target.start()  # its runner: the worker that timed the search
    monitor = CpuMonitor(target.worker_pids, min_window_s=0.1)
    with target.lock:
        mark = monitor.start()
        ok, res, _ = target.runner_call("retime", request, float(s.load_timeout_s))
        foreign = monitor.foreign(mark) if target.sees_device_load else None
    if not ok:
        raise RuntimeError(f"timing failed: {res}")
    cal = res.calibration
    drift = max(cal) / min(cal) - 1.0 if cal and min(cal) > 0 else None
    out = {}
    for name, samples in zip(KERNELS, res.samples):
        stats = summarize(samples).scaled(1e3)
        rounds = [summarize(samples[i:i + s.kernel_repeat]).median * 1e3
                  for i in range(0, len(samples), s.kernel_repeat)]
        out[name] = {"stats": stats, "round_medians": rounds,
                     "verdict": judge(target.policy, rcv=stats.rcv, foreign_cpu=foreign, drift=drift, cv=stats.cv)}
    return out


def decide(tuned_rounds: list[float], default_rounds: list[float]) -> dict:
    """The decision of the module docstring from the two kernels' per-round medians (paired by round):
    ``kernel`` ("tuned" or "default"), ``speedup`` (default / tuned, geometric mean over the rounds),
    ``ci_low``/``ci_high`` (95 %; NaN with one round) and ``within_noise`` (the interval contains 1,
    or there is none)."""
    k = min(len(tuned_rounds), len(default_rounds))
    ratio, lo, hi = paired_ratio_ci(default_rounds[:k], tuned_rounds[:k])
    within = not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 1.0 <= hi
    return {"kernel": "default" if ratio < 1.0 else "tuned", "speedup": ratio, "ci_low": lo, "ci_high": hi,
            "within_noise": within}


def _choice(timed: dict, attempts: int) -> dict:
    """The JSON-ready choice of one task from its kept attempt."""
    out = decide(timed["tuned"]["round_medians"], timed["default"]["round_medians"])
    for name in KERNELS:
        st, verdict = timed[name]["stats"], timed[name]["verdict"]
        out[f"{name}_ms"] = {"median": st.median, "min": st.min, "mean": st.mean, "std": st.std, "cv": st.cv,
                             "rcv": st.rcv, "n": st.n, "noisy": verdict.noisy, "reasons": list(verdict.reasons)}
    out["noisy"] = any(timed[n]["verdict"].noisy for n in KERNELS)
    out["rounds"] = len(timed["tuned"]["round_medians"])
    out["attempts"] = attempts
    return out


def build_pairs(tasks, configs: dict, target, workdir: str) -> dict[str, list[str] | str]:
    """Task id -> the paths of its two libraries (:data:`KERNELS` order), or the build's error text, for every
    task in ``configs`` (task id -> its tuned config). All of them are built at once, in parallel on the
    target's builders (a CUDA build is seconds of NVRTC), the tuned kernel as the search built it."""
    tuned = [task for task in tasks if task.id in configs]
    built = iter(target.build_kernels([(task, kernel) for task in tuned for kernel in (configs[task.id], None)],
                                      workdir))
    out: dict[str, list[str] | str] = {}
    for task in tuned:
        (tuned_path, tuned_err), (default_path, default_err) = next(built), next(built)
        err = tuned_err or default_err
        out[task.id] = f"build: {err}" if err else [tuned_path, default_path]
    return out


def compare_task(task, paths: list[str], target, s: E2ESettings) -> dict:
    """Time ``task``'s tuned and default kernels (built at ``paths``, :func:`build_pairs`); the choice (module
    docstring). A failure keeps the tuned kernel: ``{"kernel": "tuned", "error": ...}``."""
    def n_noisy(a: dict) -> int:
        return sum(a[n]["verdict"].noisy for n in KERNELS)

    try:
        attempts = until_clean(lambda: _time_pair(task, paths, target, s), target.policy, n_noisy)
    except Exception as exc:
        return {"kernel": "tuned", "error": one_line(exc)}
    kept = min(attempts, key=n_noisy)
    return _choice(kept, len(attempts))


def choose_kernels(tasks, configs: dict, target, s: E2ESettings, name: str = "model") -> dict[str, dict]:
    """Task id -> the choice of every task in ``configs`` (task id -> its tuned config)."""
    workdir = run_temp_dir("kernels")
    out = {}
    try:
        built = build_pairs(tasks, configs, target, workdir)
        for task in tasks:
            if task.id in built:
                paths = built[task.id]
                out[task.id] = ({"kernel": "tuned", "error": paths} if isinstance(paths, str)
                                else compare_task(task, paths, target, s))
                log.info("%s: task %s: %s", name, task.name, choice_line(out[task.id]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return out


def choice_line(c: dict) -> str:
    """One log line of a choice."""
    if "error" in c:
        return f"the tuned kernel is kept, the default kernel could not be compared ({c['error']})"
    ci = f" [{c['ci_low']:.2f}, {c['ci_high']:.2f}]" if math.isfinite(c["ci_low"]) else ""
    t, d = c["tuned_ms"], c["default_ms"]
    return (f"{c['kernel']} kernel taken: tuned {t['median']:.4g} ms (cv {t['cv']:.1%}), default {d['median']:.4g} ms "
            f"(cv {d['cv']:.1%}), tuned {c['speedup']:.2f}x{ci} faster over {c['rounds']} interleaved rounds"
            + (" (within noise)" if c["within_noise"] else "") + (" NOISY" if c["noisy"] else ""))


def choice_metrics(c: dict) -> dict[str, float]:
    """A choice's MLflow metrics (logged per task as ``<task id>.<key>``)."""
    if "error" in c:
        return {"kernel_default_taken": 0.0}
    out = {"kernel_default_taken": float(c["kernel"] == "default"), "kernel_speedup_vs_default": c["speedup"],
           "kernel_within_noise": float(c["within_noise"]), "kernel_noisy": float(c["noisy"])}
    if math.isfinite(c["ci_low"]):
        out["kernel_speedup_vs_default_ci_low"], out["kernel_speedup_vs_default_ci_high"] = c["ci_low"], c["ci_high"]
    for name in KERNELS:
        st = c[f"{name}_ms"]
        out.update({f"kernel_{name}_ms": st["median"], f"kernel_{name}_min_ms": st["min"],
                    f"kernel_{name}_std_ms": st["std"], f"kernel_{name}_cv": st["cv"],
                    f"kernel_{name}_noisy": float(st["noisy"])})
    return out
