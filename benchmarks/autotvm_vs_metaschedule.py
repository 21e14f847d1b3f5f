"""AutoTVM vs MetaSchedule at equal trials on ResNet-18 conv layers, and both vs PyTorch.

Both methods tune the same fused tasks (conv + bias + ReLU, `model=layers`, up to three ResNet-18
layers) on `llvm` with the same trial budget in one process (`run_experiment`, e2e step off). Then,
by the measurement protocol (docs/MEASUREMENT.md), per layer:

1. each method's best config is rebuilt from its `tasks.json` entry and both are re-timed on one
   fresh target, interleaved (`TVMTarget.retime`: `measure.retime.rounds` rounds of
   `measure.retime.repeat` repeats, the calibration kernel after every round; the calibration
   kernel is timed once first against the machine's quiet reference). The autotvm / metaschedule
   latency ratio is the geometric mean of the per-round ratios with a 95 % Student-t interval;
2. for each method, the single-layer model with that method's best schedule is timed against
   PyTorch eager (and `torch.compile`) in interleaved rounds (`model_latencies`, the `e2e` config):
   speedup = PyTorch / TVM with a 95 % interval over the rounds, every row judged for noise;
3. the search-time ratio comes from `tasks.json` (`search_s`, the search clock of each task).

Prints a Markdown table (a value marked noisy is named in the `noisy` column), the geometric means
over the layers and a three-line conclusion (which method's kernels are faster, whether each beats
PyTorch eager, what was noisy); a layer counts for a side only when its interval excludes 1.

Exit codes: 0 done (noisy values are marked, not fatal); 2 bad arguments or input; 4 a failure
(traceback). Runtime: about 3 x (2 x trials x ~0.6 s) of tuning, MetaSchedule's one-time import
(30-60 s) and ~1 min per layer of re-timing and model timing on a 2-core machine.

Usage: python benchmarks/autotvm_vs_metaschedule.py [--trials 64] [--layers 3] [--seed 0]
    [--rounds R] [--repeat K] [--no-torch-compile] [--out PATH | --publish]
  default output: benchmarks/results/local/autotvm_vs_metaschedule.json (untracked);
  --publish: benchmarks/results/autotvm_vs_metaschedule.json (tracked, cited by docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

from _common import add_out_args, loadavg, machine_info, out_path, provenance, run_main, write_json
from _layers import best_config, compose, fmt_ci, label, layer_task, model_timing

NAME = "autotvm_vs_metaschedule"
METHODS = ("autotvm", "metaschedule")
SHORT = {"autotvm": "a", "metaschedule": "m"}
LAYERS = [  # ResNet-18: stage-1 3x3, stage-2 first 3x3 (stride 2), stage-2 3x3
    {"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 64, "height": 56, "width": 56, "out_channels": 128, "kernel": 3, "stride": 2, "padding": 1},
    {"in_channels": 128, "height": 28, "width": 28, "out_channels": 128, "kernel": 3, "stride": 1, "padding": 1},
]
E2E_ROWS = ("tuned", "torch", "torch_compile")  # the model rows the table uses (tvm_default: JSON only)


# ---- tuning -------------------------------------------------------------------------------------

def tune_methods(args, layers: list[dict], work: str) -> dict:
    """Tune ``layers`` with each method (one run each, same budget). Per method: ``run_id``,
    ``tasks`` (task id -> ``tasks.json`` entry) and the run's protocol metrics."""
    from mlflow.tracking import MlflowClient

    from tunebench.harness.experiment import run_experiment

    out = {}
    for method in METHODS:
        run_id = run_experiment(compose(method, work, args.trials, args.seed, layers))
        with open(os.path.join(work, "records", run_id, "tasks.json")) as fh:
            entries = json.load(fh)
        m = MlflowClient(f"sqlite:///{work}/mlflow.db").get_run(run_id).data.metrics
        keep = ("wall_s", "search_time_s", "n_measurements", "n_invalid", "n_noisy_measurements", "n_noisy_tasks",
                "calib_max_slowdown", "protocol_s", "lock_wait_s", "peak_gflops")
        out[method] = {"run_id": run_id, "tasks": {e["id"]: e for e in entries},
                       "metrics": {k: m[k] for k in keep if k in m}}
    return out


# ---- measuring ----------------------------------------------------------------------------------

def retime_pair(target, task, configs: list, rounds: int, repeat: int) -> dict:
    """Both bests re-timed interleaved: per method its statistics (ms) and verdict, and the paired
    autotvm / metaschedule ratio of the per-round medians."""
    from tunebench.protocol.stats import paired_ratio_ci, verdict

    res = target.retime(task, configs, rounds, repeat)
    for method, r in zip(METHODS, res):
        if r is None:
            raise RuntimeError(f"task {task.name}: the {method} best config did not build for the re-timing")
    out = {method: {"stats_ms": r["stats"].scaled(1e3).to_dict(), "verdict": r["verdict"].to_dict(),
                    "round_medians_ms": [x * 1e3 for x in r["round_medians"]], "calibration_s": r["calibration"]}
           for method, r in zip(METHODS, res)}
    g, lo, hi = paired_ratio_ci(res[0]["round_medians"], res[1]["round_medians"])
    out["ratio"] = {"geomean": g, "ci_low": lo, "ci_high": hi, "verdict": verdict(lo, hi)}
    return out


def noisy_values(row: dict) -> list[str]:
    """Names of the noisy values of a layer row, e.g. ``a kernel``, ``m e2e: torch`` (``a e2e failed``:
    no model timing, the error is in the JSON)."""
    out = [f"{SHORT[m]} kernel" for m in METHODS if row["retime"][m]["verdict"]["noisy"]]
    for m in METHODS:
        e2e = row["e2e"][m]
        bad = [r for r in E2E_ROWS if r in e2e.get("rows", {}) and e2e["rows"][r]["verdict"]["noisy"]]
        if "error" in e2e:
            out.append(f"{SHORT[m]} e2e failed")
        elif bad:
            out.append(f"{SHORT[m]} e2e: {', '.join(bad)}")
    return out


def measure_layer(layer: dict, runs: dict, target, rounds: int, repeat: int, settings) -> dict:
    """Re-timing, model timing and search times of one layer (both methods)."""
    task, tasks, imported = layer_task(layer, target.kind)
    entries = {m: runs[m]["tasks"].get(task.id) for m in METHODS}
    row = {"layer": layer, "label": label(layer), "task_id": task.id, "task": task.name, "flops": task.flops}
    missing = [m for m in METHODS if entries[m] is None or entries[m].get("best_config") is None]
    if missing:
        row["error"] = f"no output-checked best config from {', '.join(missing)}"
        return row
    configs = [best_config(entries[m], task) for m in METHODS]
    row["tuning"] = {m: {k: entries[m][k] for k in ("best_index", "best_trial", "best_latency_ms", "best_noisy",
                                                    "best_latency_search_ms", "search_s", "trials", "invalid")}
                     for m in METHODS}
    row["search_ratio"] = entries["autotvm"]["search_s"] / entries["metaschedule"]["search_s"]
    print(f"{row['label']}: re-timing both bests, {rounds} interleaved rounds x {repeat} repeats", flush=True)
    row["retime"] = retime_pair(target, task, configs, rounds, repeat)
    row["e2e"] = {m: model_timing(target, task, tasks, imported, c, settings, f"{row['label']} ({m})")
                  for m, c in zip(METHODS, configs)}
    row["noisy"] = noisy_values(row)
    return row


# ---- reporting ----------------------------------------------------------------------------------

def speedup(row: dict, method: str, base: str = "torch") -> dict | None:
    return row["e2e"][method].get("speedups", {}).get(base)


def torch_ms(row: dict, method: str, base: str = "torch") -> str:
    r = row["e2e"][method].get("rows", {}).get(base)
    return f"{r['stats_ms']['median']:.3f}" if r else "—"


def print_table(rows: list[dict]) -> None:
    print("| layer | autotvm ms | metaschedule ms | ratio a/m [95 % CI] | search s a / m (ratio) "
          "| speedup vs PyTorch: autotvm [CI] | metaschedule [CI] | PyTorch ms (a / m run) | noisy |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['label']} | {r['error']} |||||||")
            continue
        rt, t = r["retime"], r["tuning"]
        print(f"| {r['label']} | {rt['autotvm']['stats_ms']['median']:.3f} | {rt['metaschedule']['stats_ms']['median']:.3f} "
              f"| {fmt_ci(rt['ratio'])} | {t['autotvm']['search_s']:.0f} / {t['metaschedule']['search_s']:.0f} "
              f"({r['search_ratio']:.2f}) | {fmt_ci(speedup(r, 'autotvm'))} | {fmt_ci(speedup(r, 'metaschedule'))} "
              f"| {torch_ms(r, 'autotvm')} / {torch_ms(r, 'metaschedule')} | {'; '.join(r['noisy']) or '—'} |")
    if any(speedup(r, m, "torch_compile") for r in rows if "error" not in r for m in METHODS):
        print("\n| layer | speedup vs torch.compile: autotvm [CI] | metaschedule [CI] | torch.compile ms (a / m run) |")
        print("|---|---|---|---|")
        for r in (r for r in rows if "error" not in r):
            print(f"| {r['label']} | {fmt_ci(speedup(r, 'autotvm', 'torch_compile'))} "
                  f"| {fmt_ci(speedup(r, 'metaschedule', 'torch_compile'))} "
                  f"| {torch_ms(r, 'autotvm', 'torch_compile')} / {torch_ms(r, 'metaschedule', 'torch_compile')} |")


def geomeans(rows: list[dict]) -> dict:
    """Geometric means over the measured layers (point values; the layers are not a sample)."""
    from tunebench.protocol.stats import geomean

    ok = [r for r in rows if "error" not in r]
    out = {"n_layers": len(ok), "latency_ratio_a_over_m": geomean([r["retime"]["ratio"]["geomean"] for r in ok]),
           "search_time_ratio_a_over_m": geomean([r["search_ratio"] for r in ok])}
    for m in METHODS:
        for base in ("torch", "torch_compile"):
            vals = [speedup(r, m, base) for r in ok]
            if vals and all(vals):
                out[f"speedup_{m}_vs_{base}"] = geomean([v["geomean"] for v in vals])
    return out


def _sides(verdicts: list[str], n: int, a: str, b: str, what: str) -> str:
    """The summary of per-layer verdicts ("better": side ``a`` wins) where intervals exclude 1."""
    wa, wb = verdicts.count("better"), verdicts.count("worse")
    if wa and wb:
        return f"mixed: {a} {what} on some layers, {b} on others"
    if wa or wb:
        side, k = (a, wa) if wa else (b, wb)
        return f"{side} {what} on every layer" if k == n else f"{side} {what} where there is a difference ({k} of {n})"
    return "no significant difference on any layer"


def _counted(layers: list[dict], noisy) -> tuple[list[dict], str]:
    """The layers whose values for this line are clean, and a note on the ones left out."""
    clean = [r for r in layers if not noisy(r)]
    left = [r["label"] for r in layers if noisy(r)]
    return clean, (f" [{len(left)} noisy layer(s) not counted: {', '.join(left)}]" if left else "")


def conclusion(rows: list[dict]) -> list[str]:
    """Three lines: faster kernels, PyTorch eager, noise. A layer counts for a side only where its
    interval excludes 1 and the values behind it are clean; noisy layers are named, never counted."""
    ok = [r for r in rows if "error" not in r]
    clean, note = _counted(ok, lambda r: any(x.endswith("kernel") for x in r["noisy"]))
    kern = [r["retime"]["ratio"]["verdict"] for r in clean]
    n = len(clean)
    lines = [(f"kernels: autotvm faster on {kern.count('better')} of {n} clean layers, metaschedule on "
              f"{kern.count('worse')}, no significant difference on {kern.count('n.s.')} (paired ratio over "
              f"interleaved rounds) -> " + (_sides(kern, n, "autotvm", "metaschedule", "has the faster kernels")
                                             if n else "no conclusion") + note)]
    parts = []
    for meth in METHODS:
        mine, note = _counted(ok, lambda r, m=meth: any(x.startswith(f"{SHORT[m]} e2e") for x in r["noisy"]))
        v = [(speedup(r, meth) or {}).get("verdict", "n.s.") for r in mine]
        beats = ("no conclusion" if not mine else "beats it on every clean layer" if v.count("better") == len(mine)
                 else "does not beat it on any clean layer" if not v.count("better") else "beats it on some layers only")
        parts.append(f"{meth} faster on {v.count('better')} of {len(mine)} clean layers, slower on "
                     f"{v.count('worse')} -> {beats}{note}")
    lines.append("vs PyTorch eager: " + "; ".join(parts))
    failed = [r["label"] for r in rows if "error" in r]
    noisy = [r for r in ok if r["noisy"]]
    if not noisy and not failed:
        lines.append("noise: none; every value above is clean")
        return lines
    desc = "; ".join(f"{r['label']} ({', '.join(r['noisy'])})" for r in noisy) or "none"
    lines.append(f"noise: {desc}{'; no result: ' + ', '.join(failed) if failed else ''}")
    return lines


# ---- main ---------------------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64, help="trials per layer and method (default 64)")
    ap.add_argument("--layers", type=int, default=3, help=f"the first N of the {len(LAYERS)} layers (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None, help="re-timing rounds (default measure.retime.rounds)")
    ap.add_argument("--repeat", type=int, default=None, help="repeats per round (default measure.retime.repeat)")
    ap.add_argument("--no-torch-compile", action="store_true", help="leave out the torch.compile row")
    add_out_args(ap, NAME)
    args = ap.parse_args()
    if not 1 <= args.layers <= len(LAYERS):
        ap.error(f"--layers must be 1..{len(LAYERS)}")
    for name in ("trials", "rounds", "repeat"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name} must be positive")
    return args, out_path(ap, args, NAME)


def main() -> int:
    args, path = parse_args()
    layers = LAYERS[:args.layers]
    from tunebench.methods import make_method

    make_method(compose("metaschedule", ".", args.trials, args.seed, layers)["method"])  # MetaSchedule's imports before MLflow's

    from tunebench.harness.commands.cli import setup_logging
    from tunebench.targets import make_target

    setup_logging()
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as work:
        cfg = compose("autotvm", work, args.trials, args.seed, layers)
        runs = tune_methods(args, layers, work)
    rounds, repeat = args.rounds or cfg.measure.retime.rounds, args.repeat or cfg.measure.retime.repeat
    settings = cfg.e2e
    if args.no_torch_compile:
        settings = dataclasses.replace(settings, torch_compile=False)
    target = make_target(cfg.target, cfg.measure)
    with target:
        calib = target.calibrate()
        rows = [measure_layer(layer, runs, target, rounds, repeat, settings) for layer in layers]
        desc = target.describe()
    out = {"machine": machine_info(), "device": desc, "threads": desc["threads"], "precision": desc["precision"],
           "trials_per_layer": args.trials, "seed": args.seed, "retime": {"rounds": rounds, "repeat": repeat},
           "e2e_settings": dataclasses.asdict(settings), "calibration_before": calib,
           "tuning_runs": {m: {"run_id": r["run_id"], **r["metrics"]} for m, r in runs.items()},
           "layers": rows, "geomeans": geomeans(rows), "conclusion": conclusion(rows),
           "loadavg_before": load_before, "loadavg_after": loadavg(), **provenance()}
    report(out)
    write_json(path, out)
    print(f"written: {os.path.relpath(path)}")
    return 0


def report(out: dict) -> None:
    """The table, the geometric means and the conclusion, on stdout."""
    d, g = out["device"], out["geomeans"]
    print(f"\nAutoTVM vs MetaSchedule, {out['trials_per_layer']} trials per layer, seed {out['seed']}; {d['name']}, "
          f"{out['threads']} threads, {out['precision']}; load average {out['loadavg_before']} -> "
          f"{out['loadavg_after']}; {out['date']}, {out['git_commit']}\n")
    print_table(out["layers"])
    means = [f"latency ratio a/m {g['latency_ratio_a_over_m']:.2f}", f"search-time ratio a/m {g['search_time_ratio_a_over_m']:.2f}"]
    means += [f"speedup vs {b} {m} {g[f'speedup_{m}_vs_{b}']:.2f}" for b in ("torch", "torch_compile")
              for m in METHODS if f"speedup_{m}_vs_{b}" in g]
    print(f"\ngeometric means over {g['n_layers']} layer(s): " + ", ".join(means))
    if out["calibration_before"]["noisy"]:
        print(f"calibration before the re-timing was noisy: {'; '.join(out['calibration_before']['reasons'])}")
    print("\nconclusion (95 % intervals; a layer counts for a side only when its interval excludes 1):")
    for line in out["conclusion"]:
        print(f"- {line}")


if __name__ == "__main__":
    sys.exit(run_main(main))
