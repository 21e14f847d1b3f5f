"""The parts of ``benchmarks/gpu_suite.py``: each runs in its own process (the suite's time cap kills it) and
returns a JSON-ready dict. ``p`` is the part's plan (:data:`gpu_suite.PLANS`): the target, the sizes, the
work folder, the shared machine cache (the peak is measured once, by the ``peak`` part, and reused)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from _gpu_rate import part_trial_rate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = ("e2e", "tvm_default", "torch", "torch_compile", "torch_tf32")  # e2e metric prefixes (tuned first)
BASELINES = ("tvm_default", "torch", "torch_compile", "torch_tf32")


# ---- the GPU tests ---------------------------------------------------------------------------

def gpu_test_files() -> list[str]:
    """The test files with ``gpu``-marked tests (relative to the checkout)."""
    out = []
    for base, _, files in os.walk(os.path.join(ROOT, "tests")):
        for name in sorted(files):
            path = os.path.join(base, name)
            if name.startswith("test_") and name.endswith(".py"):
                with open(path) as fh:
                    if "mark.gpu" in fh.read():
                        out.append(os.path.relpath(path, ROOT))
    return sorted(out)


def pytest_counts(text: str) -> dict[str, int]:
    """``passed``/``failed``/``skipped``/``errors``/... of pytest's summary line (the last one naming any)."""
    lines = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed|skipped|deselected|errors?)\b", ln)]
    if not lines:
        return {}
    counts = {}
    for n, what in re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)\b", lines[-1]):
        counts["errors" if what.startswith("error") else what] = int(n)
    return counts


def part_gpu_tests(p: dict) -> dict:
    files = gpu_test_files()
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-v", "--durations=10", "-p", "no:cacheprovider", *files]
    lines = []
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:  # echoed into the part's log as it comes: a part killed at its cap shows how far
            print(line, end="", flush=True)  # the tests got and how long each took
            lines.append(line)
    out = "".join(lines)
    counts = pytest_counts(out)
    return {"command": "python -m pytest -m gpu -v --durations=10 " + " ".join(files), "returncode": proc.returncode,
            "counts": counts, "ok": proc.returncode in (0, 5) and not counts.get("failed") and not counts.get("errors"),
            "tail": out.strip().splitlines()[-15:]}


# ---- the measured peak -----------------------------------------------------------------------

def _cfg(p: dict, overrides: list[str], work: str):
    from tunebench.harness.setup.compose import compose_config

    os.makedirs(work, exist_ok=True)
    return compose_config([f"workdir={work}", "experiment=gpu-suite", "progress=false", f"target={p['target']}",
                           f"measure.cache_dir={p['cache_dir']}", *p.get("target_overrides", []), *overrides])


def part_peak(p: dict) -> dict:
    from tunebench.targets import make_target

    cfg = _cfg(p, [], os.path.join(p["work"], "peak"))
    with make_target(cfg.target, cfg.measure) as target:
        peak = target.peak()
        desc = target.describe()
    return {"device": desc.get("device_name") or desc.get("name"), "threads": desc.get("threads"),
            "fma_gflops": peak["fma_gflops"], "mem_gbps": peak["mem_gbps"], "noisy": bool(peak.get("noisy")),
            "detail": {k: v for k, v in peak.items() if k not in ("fma_gflops", "mem_gbps")}}


# ---- runs through the harness ----------------------------------------------------------------

def run(cfg) -> tuple[str | None, str | None]:
    """``run_experiment(cfg)``: ``(run id, error text)``; a failed end-to-end step is an error text, the
    run (its tasks) is still read."""
    from tunebench.harness.experiment import run_experiment

    ids: list[str] = []
    try:
        run_experiment(cfg, on_start=[lambda rid, _: ids.append(rid)])
    except Exception as exc:  # the E2EError of a wrong or failed whole-model build, say
        return (ids[0] if ids else None), f"{type(exc).__name__}: {str(exc)[:500]}"
    return ids[0], None


def run_data(cfg, run_id: str) -> tuple[dict, dict, list[dict]]:
    """``(metrics, tags, tasks.json entries)`` of a finished run."""
    from mlflow.tracking import MlflowClient

    from tunebench.harness.run_folder import read_tasks_json

    data = MlflowClient(f"sqlite:///{cfg.workdir}/mlflow.db").get_run(run_id).data
    entries = list(read_tasks_json(os.path.join(cfg.workdir, cfg.records_dir, run_id)).values())
    return dict(data.metrics), dict(data.tags), entries


def _interval(m: dict, key: str) -> dict | None:
    if key not in m:
        return None
    return {"geomean": m[key], "ci_low": m.get(f"{key}_ci_low"), "ci_high": m.get(f"{key}_ci_high")}


def _static_invalid(entry: dict) -> dict:
    if "static_invalid_fraction" not in entry:
        return {"static_invalid_fraction": "not reported"}
    return {"static_invalid_fraction": entry["static_invalid_fraction"], "static_invalid": entry.get("static_invalid")}


def task_rows(m: dict, entries: list[dict]) -> list[dict]:
    """Per task: which kernel the end-to-end build took and both kernels' latencies with their spread
    (the ``<task id>.kernel_*`` metrics), its best latency and static-invalid fraction."""
    out = []
    for e in entries:
        tid = e["id"]
        row = {"task": e.get("name"), "id": tid, "best_latency_ms": e.get("best_latency_ms"),
               "trials": e.get("trials"), "invalid": e.get("invalid"), **_static_invalid(e)}
        if f"{tid}.kernel_default_taken" in m:
            row["kernel"] = "default" if m[f"{tid}.kernel_default_taken"] else "tuned"
            for k in ("tuned", "default"):
                row[f"{k}_ms"] = {s: m.get(f"{tid}.kernel_{k}_{suffix}") for s, suffix in
                                  (("median", "ms"), ("min", "min_ms"), ("std", "std_ms"), ("cv", "cv"))}
                row[f"{k}_ms"]["noisy"] = bool(m.get(f"{tid}.kernel_{k}_noisy", 0.0))
            row["speedup_vs_default"] = _interval(m, f"{tid}.kernel_speedup_vs_default")
            row["within_noise"] = bool(m.get(f"{tid}.kernel_within_noise", 0.0))
        else:
            row["kernel"] = "not compared"
        out.append(row)
    return out


def part_e2e(p: dict, method: str, overrides: tuple = (), name: str | None = None) -> dict:
    """The model end to end with ``method`` (and the target ``overrides``, e.g. another template): tuned (each
    task the faster of its tuned and default kernel) vs TVM's default build vs PyTorch vs torch.compile,
    interleaved rounds, 95 % intervals. Its files go to the work folder's ``name`` (default: the method)."""
    cfg = _cfg(p, [f"method={method}", *p["model"], f"budget.trials_per_task={p['trials']}", *overrides,
                   *p.get("method_overrides", {}).get(method, []), *p["e2e"]], os.path.join(p["work"], name or method))
    run_id, error = run(cfg)
    if run_id is None:
        return {"method": method, "error": error}
    m, tags, entries = run_data(cfg, run_id)
    rows = {r: {"median": m[f"{r}_latency_ms"], "min": m.get(f"{r}_latency_min_ms"), "cv": m.get(f"{r}_latency_cv"),
                "n": m.get(f"{r}_n_runs"), "noisy": bool(m.get(f"{r}_noisy", 0.0))}
            for r in ROWS if f"{r}_latency_ms" in m}
    return {"method": method, "model": " ".join(p["model"]), "overrides": list(overrides), "run_id": run_id,
            "error": error or tags.get("tunebench.e2e_error"),
            "trials_per_task": p["trials"], "rows": rows,
            "speedups": {b: _interval(m, f"speedup_vs_{b}") for b in BASELINES if f"speedup_vs_{b}" in m},
            "n_default_kernels": m.get("e2e_default_kernels"), "search_time_s": m.get("search_time_s"),
            "peak_gflops": m.get("peak_gflops"), "tasks": task_rows(m, entries)}


# ---- layer sets ------------------------------------------------------------------------------

def dense_bytes(layer: dict) -> int:
    """Bytes a batch-``b`` dense + bias layer must move at least once (FP32): weights, bias, input, output."""
    b, i, o = layer.get("batch", 1), layer["in_features"], layer["out_features"]
    return 4 * (i * o + o + b * i + b * o)


def part_dense(p: dict) -> dict:
    """Memory-bound batch-1 dense layers: each tuned layer against PyTorch as a one-layer model, interleaved;
    achieved bandwidth (bytes / median) against the measured bandwidth."""
    import dataclasses

    from _layers import best_config, compose, label, layer_task, model_timing

    from tunebench.targets import make_target

    work = os.path.join(p["work"], "dense")
    os.makedirs(work, exist_ok=True)
    extra = [f"target={p['target']}", f"measure.cache_dir={p['cache_dir']}", *p.get("target_overrides", [])]
    cfg = compose("autotvm", work, p["dense_trials"], 0, p["dense_layers"], extra)
    run_id, error = run(cfg)
    if run_id is None or error:
        return {"error": error}
    m, _, entries = run_data(cfg, run_id)
    by_id = {e["id"]: e for e in entries}
    bw = m.get("peak_mem_gbps")
    settings = dataclasses.replace(cfg.e2e, torch_compile=False, default_n_runs=0, rounds=p["dense_rounds"],
                                   n_runs=2 * p["dense_rounds"])
    rows = []
    with make_target(cfg.target, cfg.measure) as target:
        for layer in p["dense_layers"]:
            task, tasks, imported = layer_task(layer, target.kind, target.template)
            entry = by_id.get(task.id) or {}
            row = {"layer": label(layer), "bytes": dense_bytes(layer), "best_latency_ms": entry.get("best_latency_ms")}
            config = best_config(entry, task) if entry else None
            t = model_timing(target, task, tasks, imported, config, settings, row["layer"]) if config else \
                {"error": "no output-checked best config"}
            if "error" not in t:
                for name, key in (("tuned", "tuned"), ("torch", "torch")):
                    st = t["rows"][key]["stats_ms"]
                    gbps = row["bytes"] / (st["median"] * 1e-3) / 1e9
                    row[name] = {"median_ms": st["median"], "min_ms": st["min"], "cv": st["cv"], "gbps": gbps,
                                 "pct_of_measured_bw": 100.0 * gbps / bw if bw else None,
                                 "noisy": t["rows"][key]["verdict"]["noisy"]}
                row["speedup_vs_torch"] = t["speedups"].get("torch")
            else:
                row["error"] = t["error"]
            rows.append(row)
    return {"run_id": run_id, "trials_per_layer": p["dense_trials"], "measured_mem_gbps": bw, "layers": rows}


def part_dgp(p: dict) -> dict:
    """A short dgp vs autotvm comparison on VGG-16 conv layers (one group: dgp tunes the first with AutoTVM
    and transfers to the others): per layer each method's best latency and search time."""
    from _layers import compose, label

    out = {"trials_per_layer": p["dgp_trials"], "layers": [label(L) for L in p["dgp_layers"]], "methods": {}}
    extra = [f"target={p['target']}", f"measure.cache_dir={p['cache_dir']}", *p.get("target_overrides", [])]
    for method in ("autotvm", "dgp"):
        work = os.path.join(p["work"], f"dgp-{method}")
        os.makedirs(work, exist_ok=True)
        cfg = compose(method, work, p["dgp_trials"], 0, p["dgp_layers"], [*extra, *p["dgp_overrides"][method]])
        run_id, error = run(cfg)
        if run_id is None or error:
            out["methods"][method] = {"error": error}
            continue
        m, _, entries = run_data(cfg, run_id)
        out["methods"][method] = {
            "run_id": run_id, "search_time_s": m.get("search_time_s"),
            "search_time_excl_source_s": m.get("search_time_excl_source_s"),
            "tasks": [{"task": e["name"], "best_latency_ms": e.get("best_latency_ms"),
                       "best_latency_min_ms": e.get("best_latency_min_ms"), "best_noisy": e.get("best_noisy"),
                       "search_s": e.get("search_s"), "trials": e.get("trials"), **_static_invalid(e)}
                      for e in entries]}
    return out


PARTS = {"gpu_tests": part_gpu_tests, "peak": part_peak, "trial_rate": part_trial_rate,
         "resnet18_autotvm": lambda p: part_e2e(p, "autotvm"),
         "resnet18_metaschedule": lambda p: part_e2e(p, "metaschedule"),
         "resnet18_winograd": lambda p: part_e2e(p, "autotvm", p["winograd_overrides"], "winograd"),
         "vgg16_dense": part_dense, "dgp_vs_autotvm": part_dgp}
