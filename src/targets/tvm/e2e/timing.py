"""The end-to-end comparison, measured fairly: every row in its own worker, interleaved, checked for noise.

Rows (:mod:`tunebench.targets.tvm.e2e`): ``tuned``, ``tvm_default``, ``torch`` (eager FP32),
``torch_compile`` (FP32, when it compiles within ``torch_compile_timeout_s``) and, on cuda,
``torch_tf32``; for an ONNX model ``onnxruntime`` (CPU execution provider) instead of the PyTorch rows. Protocol (:func:`model_latencies`):

1. compile the TVM rows here and export them; start one worker process per row, all with the
   target's thread count (``TVM_NUM_THREADS``, ``OMP_NUM_THREADS``, ``torch.set_num_threads``);
2. holding the device lock: load every row (one inference each; TVM outputs are checked against
   PyTorch), then ``timings`` timings (``e2e.timings``), one after another. A timing: the calibration
   kernel, then ``rounds`` rounds; each round times every row once -- a block of ``warmup`` untimed and
   ``ceil(n_runs / rounds)`` timed samples -- in an order rotated by one per round (A B C, B C A, ...);
   then the calibration kernel again. A sample is the mean of as many back-to-back inferences as fill
   ``min_sample_ms``; before every block the previous block's thread pool is let go idle
   (:func:`~tunebench.protocol.noise.settle`);
3. a row of a timing is noisy when its CV, the CPU other processes used during the rounds, the
   calibration slowdown or its drift exceed ``measure.noise``; then that timing is taken again (up to
   ``measure.noise.remeasure`` times) and its least noisy try kept;
4. the kept timings as one result (:mod:`tunebench.targets.tvm.e2e.pooled`): each row's samples of all
   timings give median (the reported latency), minimum, mean, std and CV, the row noisy when it is in
   any timing; each speedup is the geometric mean of the per-timing ratios (each the geometric mean of
   its rounds' ratios of medians) with a 95 % Student-t interval over the timings
   (:func:`~tunebench.protocol.stats.timings_ratio_ci`; one timing: over its rounds). Consecutive
   timings on a shared machine sit at different levels, which the rounds of one timing cannot see
   (docs/MEASUREMENT.md §How wide a speedup's interval is).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tunebench.config.experiment import E2ESettings
from tunebench.protocol.noise import (
    CpuMonitor,
    fired,
    loadavg,
    settle,
    signals_text,
    until_clean,
)
from tunebench.safe_files import run_temp_dir
from tunebench.targets.tvm.e2e.build import (
    E2EError,
    check_output,
    compile_model,
    default_build_module,
    flat_numpy,
    output_errors,
    tuned_module,
)
from tunebench.targets.tvm.e2e.model_messages import LoadOrtInput, LoadTorchInput, LoadTvmInput, TimeInput
from tunebench.targets.tvm.e2e.pooled import judge_timing, pooled
from tunebench.targets.tvm.rpc import REMOTE_RETRIES
from tunebench.targets.workers import Worker

log = logging.getLogger(__name__)

WORKER = "tunebench.targets.tvm.e2e.model_worker:handle"
ROW_PREFIX = {"tuned": "e2e", "tvm_default": "tvm_default", "torch": "torch", "torch_compile": "torch_compile",
              "torch_tf32": "torch_tf32", "onnxruntime": "onnxruntime"}  # row -> MLflow metric prefix


@dataclass
class Row:
    """One model build or baseline, loaded in its own worker."""

    name: str
    worker: Worker
    n_runs: int  # timed inferences in all, spread over the rounds
    load: tuple[str, LoadTvmInput | LoadTorchInput]  # the load request (name, input)
    timeout_s: float
    info: dict = field(default_factory=dict)  # rel_err, compile_s, load_s
    own_worker: bool = True  # False: the target's runner (a remote device's session), neither started nor closed here

    def per_round(self, rounds: int) -> int:
        return max(1, math.ceil(self.n_runs / rounds))


def _env(target, s: E2ESettings) -> dict:
    """Worker environment: the target's threads; ``keep_freed_memory`` see
    :func:`tunebench.targets.tvm.e2e.model_worker.keep_freed_memory`."""
    env = {"TVM_NUM_THREADS": target.threads, "OMP_NUM_THREADS": target.threads}
    return {**env, "TUNEBENCH_KEEP_FREED_MEMORY": "1"} if s.keep_freed_memory else env


def _tvm_row(name: str, lib_path: str, imported, target, n_runs: int, s: E2ESettings) -> Row:
    request = LoadTvmInput(lib_path=lib_path, device=target.device_spec, params=imported.params,
                           inputs=[flat_numpy(x)[0] for x in imported.inputs], row=name)
    shared = target.device_worker()  # a remote device: every TVM row runs in the session the runner holds
    worker = shared or Worker(WORKER, env=_env(target, s), prepare="tunebench.targets.tvm.e2e.model_worker:prepare_tvm")
    return Row(name, worker, n_runs, ("load_tvm", request), s.load_timeout_s, own_worker=shared is None)


def _torch_row(name: str, imported, target, s: E2ESettings, compiled: bool = False, tf32: bool = False) -> Row:
    env = _env(target, s)
    request = LoadTorchInput(module=imported.torch_module, inputs=list(imported.inputs), threads=target.threads,
                             device=target.torch_device, tf32=tf32, compile=compiled, row=name)
    timeout = s.torch_compile_timeout_s if compiled else s.load_timeout_s
    return Row(name, Worker(WORKER, env=env, prepare="tunebench.targets.tvm.e2e.model_worker:prepare_torch"), s.n_runs,
               ("load_torch", request), timeout)


def _ort_row(imported, target, s: E2ESettings) -> Row:
    request = LoadOrtInput(path=imported.onnx_path, names=list(imported.input_names),
                           inputs=[flat_numpy(x)[0] for x in imported.inputs], threads=target.threads, row="onnxruntime")
    return Row("onnxruntime", Worker(WORKER, env=_env(target, s)), s.n_runs, ("load_ort", request), s.load_timeout_s)


def _build_rows(imported, tasks, schedules, target, s: E2ESettings, workdir: str, name: str) -> list[Row]:
    """Compile the TVM rows (here) and describe every row; nothing runs on the device yet.
    ``default_n_runs=0`` leaves TVM's default build out (neither compiled nor timed)."""
    rows, builds = [], [("tuned", tuned_module(imported, schedules, target.kind), s.n_runs)]
    if s.default_n_runs:
        builds.append(("tvm_default", default_build_module(imported, target.tvm_target), s.default_n_runs))
    for row, mod, n_runs in builds:
        path = os.path.join(workdir, f"{row}.so")
        compile_s = compile_model(mod, target.tvm_target, path, name=f"{name} ({row.replace('_', ' ')})")
        rows.append(_tvm_row(row, path, imported, target, n_runs, s))
        rows[-1].info["compile_s"] = compile_s
    if target.device_worker() is not None:
        log.warning("%s: the PyTorch baselines are left out: the model runs on a remote device (target.rpc), "
                    "where PyTorch cannot be run through TVM RPC; %s", name,
                    "tuned is compared with TVM's default build" if s.default_n_runs
                    else "with e2e.default_n_runs=0 the tuned model is timed alone")
        return rows
    if imported.onnx_path:  # an ONNX model: ONNX Runtime (CPU) is its baseline; there is no PyTorch module
        if target.torch_device != "cpu":
            log.warning("%s: the ONNX Runtime baseline is left out: it runs on the CPU, the model on %s", name,
                        target.torch_device)
            return rows
        return [*rows, _ort_row(imported, target, s)]
    rows.append(_torch_row("torch", imported, target, s))
    if s.torch_compile:
        rows.append(_torch_row("torch_compile", imported, target, s, compiled=True))
    if target.tf32_baseline:
        rows.append(_torch_row("torch_tf32", imported, target, s, tf32=True))
    return rows


def _load_rows(rows: list[Row], want, tolerance: float, name: str) -> list[Row]:
    """Load every row (one inference). TVM rows must match PyTorch (E2EMismatch otherwise); a torch
    row that fails (torch.compile past its time limit, say) is dropped with a warning."""
    kept = []
    for row in rows:
        ok, res = row.worker.call(row.load[0], row.load[1], row.timeout_s)
        if not ok:
            if row.name in ("tuned", "tvm_default"):
                raise E2EError(f"{name} ({row.name}): whole-model run failed: {res}")
            log.warning("%s: the %s baseline is left out: %s", name, row.name, res)
            if row.own_worker:
                row.worker.close()
            continue
        row.info["load_s"] = res.load_s
        if row.name in ("tuned", "tvm_default"):
            row.info["max_abs_err"], row.info["rel_err"] = check_output(
                res.outputs, want, tolerance, f"{name} ({row.name.replace('_', ' ')})")
        else:
            row.info["rel_err"] = output_errors(res.outputs, want, f"{name} ({row.name})")[1]
        kept.append(row)
    return kept


def _time_rounds(rows: list[Row], s: E2ESettings, target, monitor: CpuMonitor) -> dict:
    """One attempt: calibration, the interleaved rounds, calibration. Per row: per-round samples.
    Before every block, all of this run's processes are let settle (:func:`settle`): the thread
    pool of the block before keeps spinning for a while and would slow this one down."""
    ours = lambda: [r.worker.pid for r in rows] + target.worker_pids()  # noqa: E731
    settle(ours())
    pre = target.calibrate()
    mark = monitor.start()
    samples = {row.name: [] for row in rows}
    for r in range(s.rounds):
        for k in range(len(rows)):
            row = rows[(k + r) % len(rows)]
            done = sum(len(x) for x in samples[row.name])
            n = min(row.per_round(s.rounds), row.n_runs - done)
            if n <= 0:
                continue
            settle(ours())
            request = TimeInput(n=n, warmup=s.warmup, min_sample_ms=s.min_sample_ms, row=row.name,
                                device=row.load[1].device)
            ok, res = row.worker.call("time", request, row.timeout_s)
            if not ok:
                raise E2EError(f"timing {row.name} failed: {res}")
            samples[row.name].append(res.samples)
    foreign = monitor.foreign(mark) if target.sees_device_load else None
    settle(ours())
    post = target.calibrate()
    return {"samples": samples, "calibration": (pre, post), "foreign_cpu": foreign, "loadavg": loadavg()}


def take_timings(rows: list[Row], s: E2ESettings, target, monitor: CpuMonitor) -> tuple[list[dict], int]:
    """``e2e.timings`` timings of the loaded ``rows``, one after another; each is taken again while it has a
    noisy row (at most ``1 + remeasure`` tries) and its least noisy try kept. ``(the kept timings, each a
    :func:`_time_rounds` with its :func:`~tunebench.targets.tvm.e2e.pooled.judge_timing`; tries in all)``."""
    def attempt() -> dict:
        timed = _time_rounds(rows, s, target, monitor)
        return {**timed, **judge_timing(timed, target.policy)}

    kept, taken = [], 0
    for _ in range(s.timings):
        tries = until_clean(attempt, target.policy, lambda a: a["n_noisy"])
        kept.append(min(tries, key=lambda a: (a["n_noisy"], a["slowdown"] or 0.0)))
        taken += len(tries)
    return kept, taken


def _load_and_time(rows: list[Row], want, s: E2ESettings, target, monitor: CpuMonitor,
                   name: str) -> tuple[list[Row], list[dict], int]:
    """Load the rows, then :func:`take_timings`. ``(rows, the kept timings, tries in all)``."""
    rows = _load_rows(rows, want, s.tolerance, name)
    return rows, *take_timings(rows, s, target, monitor)


def model_latencies(imported, tasks, schedules: dict, target, settings: E2ESettings, name: str = "model",
                    default_tasks=()) -> dict:
    """Time the tuned model against TVM's default build and the PyTorch baselines (module docstring).

    Args:
        imported: the imported model; tasks: its tasks (for the untuned list).
        schedules: task id -> scheduled IRModule (the best config of each tuned task).
        default_tasks: ids of tasks left out of ``schedules`` on purpose (their default kernel was
            faster, :mod:`tunebench.targets.tvm.e2e.kernels`): not counted as untuned.
        target: the :class:`~tunebench.targets.tvm.target.TVMTarget` (kind, TVM target, device,
            threads, lock, calibration).
        settings: the ``e2e`` config. The noise thresholds are the target's (``measure.noise``).

    Returns:
        ``{"rows": {row: {"stats": SampleStats (ms), "verdict": Verdict, "round_medians": [...],
        "timing_round_medians": [[...] per timing], "rel_err", "compile_s", "load_s"}},
        "speedups": {baseline: (geomean, lo, hi)}, "timing_speedups": {baseline: [ratio per timing]},
        "speedup_verdicts": {baseline: Verdict (:func:`~tunebench.protocol.noise.judge_ratio`)},
        "untuned_tasks": [...], "calibration": (pre, post of every timing), "slowdown", "drift",
        "foreign_cpu", "loadavg" (each at its worst over the timings), "timings" (kept), "attempts"
        (timings taken, retakes included)}`` (:func:`~tunebench.targets.tvm.e2e.pooled.pooled`).

    Raises:
        E2EMismatch: a TVM build's output differs from PyTorch's; E2EError: a build or run failed.
    """
    untuned = [t.name for t in tasks if t.id not in schedules and t.id not in default_tasks]
    if untuned:
        log.warning("%s: %d task(s) without a schedule keep the default: %s", name, len(untuned), ", ".join(untuned))
    workdir = run_temp_dir("e2e")
    rows: list[Row] = []
    try:
        rows = _build_rows(imported, tasks, schedules, target, settings, workdir, name)
        with ThreadPoolExecutor(len(rows)) as pool:  # each imports TVM or PyTorch: start them together
            list(pool.map(lambda r: r.worker.start(), [r for r in rows if r.own_worker]))
        monitor = CpuMonitor(lambda: [r.worker.pid for r in rows if r.worker.pid] + target.worker_pids())
        want = flat_numpy(imported.reference_output())
        with target.lock:
            for retry in range(1 + (REMOTE_RETRIES if target.device_worker() is not None else 0)):
                try:
                    rows, kept, taken = _load_and_time(rows, want, settings, target, monitor, name)
                    break
                except E2EError as exc:  # a remote device lost mid-step: the whole step again on the next one
                    if "DeviceLost:" not in str(exc) or retry == REMOTE_RETRIES:
                        raise
                    log.warning("%s: %s; the end-to-end step is repeated on another device", name, exc)
        res = pooled(kept, target.policy)
        for row in rows:
            res["rows"][row.name].update(row.info)
        return {**res, "untuned_tasks": untuned, "attempts": taken}
    finally:
        for row in rows:
            if row.own_worker:
                row.worker.close()
        shutil.rmtree(workdir, ignore_errors=True)


def e2e_metrics(lat: dict) -> dict:
    """The run metrics of :func:`model_latencies`' result: per row ``<prefix>_latency_ms`` (median),
    ``_latency_min_ms``, ``_latency_mean_ms``, ``_latency_std_ms``, ``_latency_cv``, ``_n_runs``,
    ``_latency_rcv``, ``_noisy``, ``_rel_err``, ``_compile_s`` (prefixes in :data:`ROW_PREFIX`); ``speedup_vs_<row>``
    with ``_ci_low``/``_ci_high``, ``_noisy`` (the ratio's own verdict) and, over more than one timing, each
    timing's ratio ``_t1``, ``_t2``, ...; the timings kept (``e2e_timings``); and the protocol's ``e2e_calib_slowdown``, ``e2e_calib_drift``,
    ``e2e_calib_host_slowdown`` (against the machine's fastest calibration: reported, never a mark), ``e2e_foreign_cpu``, ``e2e_loadavg``, ``e2e_attempts``."""
    out = {}
    for row, res in lat["rows"].items():
        p, st = ROW_PREFIX[row], res["stats"]
        out.update({f"{p}_latency_ms": st.median, f"{p}_latency_min_ms": st.min, f"{p}_latency_mean_ms": st.mean,
                    f"{p}_latency_std_ms": st.std, f"{p}_latency_cv": st.cv, f"{p}_latency_rcv": st.rcv, f"{p}_n_runs": st.n,
                    f"{p}_noisy": float(res["verdict"].noisy)})
        out.update({f"{p}_{k}": res[k] for k in ("rel_err", "compile_s") if res.get(k) is not None})
    for base, (ratio, lo, hi) in lat["speedups"].items():
        out[f"speedup_vs_{base}"] = ratio
        each = lat.get("timing_speedups", {}).get(base, ())
        if len(each) > 1:
            out.update({f"speedup_vs_{base}_t{i + 1}": r for i, r in enumerate(each)})
        if base in lat.get("speedup_verdicts", {}):
            out[f"speedup_vs_{base}_noisy"] = float(lat["speedup_verdicts"][base].noisy)
        if math.isfinite(lo):
            out[f"speedup_vs_{base}_ci_low"], out[f"speedup_vs_{base}_ci_high"] = lo, hi
    hosts = [c.get("host_slowdown") for c in lat["calibration"] if c.get("host_slowdown") is not None]
    extra = {"e2e_calib_slowdown": lat["slowdown"], "e2e_calib_drift": lat["drift"],
             "e2e_calib_host_slowdown": max(hosts) if hosts else None,
             "e2e_foreign_cpu": lat["foreign_cpu"], "e2e_loadavg": lat["loadavg"], "e2e_attempts": lat["attempts"],
             "e2e_timings": lat.get("timings")}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def summary_line(lat: dict, target) -> list[str]:
    """Log lines: every row's median, min and CV, the speedups with their intervals, noisy rows."""
    rows = lat["rows"]
    cells = [f"{row} {r['stats'].median:.4g} ms (min {r['stats'].min:.4g}, cv {r['stats'].cv:.1%})"
             + (f" NOISY ({', '.join(fired(r['verdict'].reasons))})" if r["verdict"].noisy else "")
             for row, r in rows.items()]
    threads = target.threads_label()
    lines = [f"end-to-end (median of {rows['tuned']['stats'].n} runs, FP32, {threads}): " + "; ".join(cells)]
    for base, (ratio, lo, hi) in lat["speedups"].items():
        ci = f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) else ""
        verdict = lat["speedup_verdicts"][base]
        per_timing = rows[base].get("timing_round_medians") or [rows[base]["round_medians"]]
        over = (f"{len(per_timing)} timings of {len(per_timing[0])} interleaved rounds: "
                + ", ".join(f"{r:.2f}" for r in lat["timing_speedups"][base]) if len(per_timing) > 1
                else f"{len(per_timing[0])} interleaved rounds")
        lines.append(f"speedup vs {base}: {ratio:.2f}x{ci} (95 % CI over {over})"
                     + (" NOISY: " + "; ".join(verdict.reasons) if verdict.noisy else ""))
    return lines


def noise_signals(lat: dict) -> str:
    """What fired on the noisy rows and speedups of :func:`model_latencies`' result, as the run tag
    :data:`~tunebench.protocol.noise.NOISE_E2E_TAG` has it: ``<source>: <signal>, ...; ...`` with the sources of
    :data:`ROW_PREFIX` (``e2e`` for the tuned row) and ``speedup_vs_<baseline>``; "" when nothing is noisy."""
    parts = [(ROW_PREFIX[row], r["verdict"]) for row, r in lat["rows"].items()]
    parts += [(f"speedup_vs_{base}", v) for base, v in lat.get("speedup_verdicts", {}).items()]
    return signals_text((source, fired(v.reasons)) for source, v in parts if v.noisy)
