"""Pieces shared by the benchmarks that tune ``model=layers`` and compare the best kernels: a layer's
label, the config of a tuning run and the run itself, a layer's task, a rebuilt best config, the single-layer model
timed against PyTorch (``model_latencies``), an interval formatted for a table."""

from __future__ import annotations

import json
import math


def label(layer: dict) -> str:
    if "in_features" in layer:
        return f"dense {layer['in_features']}->{layer['out_features']} batch {layer.get('batch', 1)}"
    groups = f" g{layer['groups']}" if layer.get("groups", 1) != 1 else ""
    return (f"{layer['in_channels']}->{layer['out_channels']} {layer['height']}x{layer['width']} "
            f"k{layer['kernel']} s{layer['stride']} p{layer['padding']}{groups}")


def compose(method: str, work: str, trials: int, seed: int, layers: list[dict], extra: list[str] = ()) -> dict:
    """The config of one tuning run of ``layers`` (e2e step off) with ``extra`` overrides."""
    from tunebench.harness.setup.compose import compose_config, layers_override

    return compose_config([f"workdir={work}", "experiment=bench", "progress=false", "e2e.enabled=false",
                           f"seed={seed}", f"method={method}", f"budget.trials_per_task={trials}",
                           layers_override(layers), *extra])


def tune_layers(method: str, work: str, trials: int, seed: int, layers: list[dict],
                extra: list[str] = ()) -> tuple[dict, dict, float | None]:
    """One tracked run in ``work`` tuning every layer of ``layers``: (its config, task id -> its ``tasks.json``
    entry, the measured FMA peak in GFLOP/s or None)."""
    import os

    from mlflow.tracking import MlflowClient

    from tunebench.harness.experiment import run_experiment

    cfg = compose(method, work, trials, seed, layers, extra)
    run_id = run_experiment(cfg)
    with open(os.path.join(work, "records", run_id, "tasks.json")) as fh:
        entries = {e["id"]: e for e in json.load(fh)}
    metrics = MlflowClient(f"sqlite:///{work}/mlflow.db").get_run(run_id).data.metrics
    return cfg, entries, metrics.get("peak_gflops")


def layer_task(layer: dict, target_kind: str, template: str | None = None):
    """The single-layer model's task (with its knob space of ``template``, None: the target's
    default) and ``(tasks, imported)``; its task id is the id of the same layer in the multi-layer
    model that was tuned."""
    from tunebench.targets.tvm.templates import get_template
    from tunebench.targets.tvm.variants import VARIANTS
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    tasks, imported = model_tasks({"name": "layers", "layers": [layer]}, target_kind)
    if len(tasks) != 1:
        raise RuntimeError(f"layer {label(layer)}: {len(tasks)} tasks, expected 1")
    task = tasks[0]
    task.template = template or VARIANTS[target_kind][0]
    task.space = get_template(task.kind, target_kind, task.template).make_space(task.mod)
    return task, tasks, imported


def best_config(entry: dict, task):
    """The best config of a ``tasks.json`` entry, rebuilt (a trace, or the knob space's config at
    ``best_index``), checked to round-trip to the recorded ``best_config``."""
    from tunebench.search_space import TraceConfig

    recorded = entry.get("best_config")
    if recorded is None:
        return None
    if "trace" in recorded:
        cfg = TraceConfig(int(entry["best_index"]), json.dumps(recorded["trace"], separators=(",", ":")))
    else:
        cfg = task.space.get(int(entry["best_index"]))
    if cfg.to_dict() != recorded:
        raise RuntimeError(f"task {task.name}: best_index {entry['best_index']} does not rebuild the recorded "
                           "best_config")
    return cfg


def model_timing(target, task, tasks, imported, config, settings, name: str) -> dict:
    """The single-layer model with ``config`` vs PyTorch (``model_latencies``); JSON-ready."""
    from tunebench.errors import E2EError
    from tunebench.protocol.stats import verdict
    from tunebench.targets.tvm.e2e.timing import model_latencies, summary_line
    from tunebench.targets.tvm.scheduling import schedule

    try:
        sched = schedule(task.mod, task.kind, target.kind, config, variant=task.template)
        lat = model_latencies(imported, tasks, {task.id: sched}, target, settings, name=name)
    except E2EError as exc:
        return {"error": str(exc)}
    for line in summary_line(lat, target):
        print(f"  {name}: {line}", flush=True)
    rows = {row: {"stats_ms": r["stats"].to_dict(), "verdict": r["verdict"].to_dict(),
                  "round_medians_ms": list(r["round_medians"]),
                  "timing_round_medians_ms": [list(x) for x in r.get("timing_round_medians", [r["round_medians"]])],
                  **{k: r[k] for k in ("rel_err", "compile_s", "load_s") if r.get(k) is not None}}
            for row, r in lat["rows"].items()}
    speedups = {base: {"geomean": g, "ci_low": lo, "ci_high": hi, "verdict": verdict(lo, hi, better_below=False),
                       "timing_ratios": list(lat.get("timing_speedups", {}).get(base, [g]))}
                for base, (g, lo, hi) in lat["speedups"].items()}
    return {"rows": rows, "speedups": speedups, "calib_slowdown": lat["slowdown"], "calib_drift": lat["drift"],
            "foreign_cpu": lat["foreign_cpu"], "attempts": lat["attempts"], "timings": lat.get("timings", 1)}


def fmt_ci(d: dict | None, digits: int = 2) -> str:
    if not d:
        return "—"
    finite = all(isinstance(d[k], float) and math.isfinite(d[k]) for k in ("ci_low", "ci_high"))
    ci = f" [{d['ci_low']:.{digits}f}, {d['ci_high']:.{digits}f}]" if finite else " [n/a]"
    return f"{d['geomean']:.{digits}f}{ci}"
