"""Tuned kernels vs the vendor library: every conv/dense layer of a model (or a layer set) tuned by one
method, the best kernel of each layer timed against PyTorch in interleaved rounds.

One tuning run (``run_experiment``, ``model=layers``, e2e step off) tunes every layer with the method
and trial budget given. Then, per layer, by the measurement protocol (docs/MEASUREMENT.md): the
single-layer model built with the layer's best schedule (its output checked against PyTorch) and
PyTorch eager (and ``torch.compile``) run in their own worker processes with the same threads and
FP32 (TF32 off on CUDA), timed in interleaved rounds (``model_latencies``, the ``e2e`` config):
speedup = PyTorch / TVM as the geometric mean of the per-round ratios with a 95 % bootstrap
interval; every row judged for noise (noisy values are named in the table, never dropped).

Layer sets: ``--model resnet18`` (its distinct conv and dense layers, each + bias + ReLU here),
``--set irregular`` (shapes no model of the suite has: odd and prime channel counts, stride 2 without
padding, 1x1 at 7x7, 5x5, 7x7 stride 2, depthwise, a non-power-of-two width, 3-channel stems), ``--set weak`` (prime
channel counts, 5x5, a 3-channel stem) or ``--layers FILE``
(a JSON list of ``model.layers`` specs).

Table: layer, tuned ms, PyTorch ms, GFLOP/s of the tuned layer, % of the device's measured FMA peak,
speedup vs PyTorch [95 % CI], noisy values; the geometric mean of the speedups over the layers.

Exit codes: 0 done (noisy values are marked, not fatal); 2 bad arguments or input; 4 a failure
(traceback). Runtime on 2 cores: about layers x trials x 0.5 s of tuning plus ~40 s per layer.

Usage: python benchmarks/vs_library.py [--model resnet18 | --set irregular|weak | --layers FILE]
    [--method autotvm] [--trials 64] [--target llvm] [--template packed] [--seed 0]
    [--no-torch-compile] [--out PATH | --publish]
  default output: benchmarks/results/local/vs_library.json (untracked); --publish:
  benchmarks/results/vs_library_<set>_<method>_<target>_<template>.json (tracked, cited by docs/RESULTS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile

from _common import RESULTS, add_out_args, loadavg, machine_info, out_path, provenance, run_main, write_json
from _layers import best_config, fmt_ci, label, layer_task, model_timing, tune_layers

NAME = "vs_library"
IRREGULAR = [
    {"in_channels": 27, "height": 32, "width": 32, "out_channels": 45, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 64, "height": 57, "width": 57, "out_channels": 96, "kernel": 3, "stride": 2, "padding": 0},
    {"in_channels": 832, "height": 7, "width": 7, "out_channels": 256, "kernel": 1, "stride": 1, "padding": 0},
    {"in_channels": 48, "height": 27, "width": 27, "out_channels": 64, "kernel": 5, "stride": 1, "padding": 2},
    {"in_channels": 16, "height": 112, "width": 112, "out_channels": 32, "kernel": 7, "stride": 2, "padding": 3},
    {"in_channels": 144, "height": 28, "width": 28, "out_channels": 144, "kernel": 3, "stride": 1, "padding": 1,
     "groups": 144},
    {"in_channels": 96, "height": 28, "width": 28, "out_channels": 24, "kernel": 1, "stride": 1, "padding": 0},
    {"in_channels": 200, "height": 14, "width": 14, "out_channels": 200, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 67, "height": 28, "width": 28, "out_channels": 71, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 37, "height": 28, "width": 28, "out_channels": 53, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 40, "height": 28, "width": 28, "out_channels": 60, "kernel": 5, "stride": 1, "padding": 2},
    {"in_channels": 100, "height": 14, "width": 14, "out_channels": 100, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 3, "height": 224, "width": 224, "out_channels": 24, "kernel": 7, "stride": 2, "padding": 3},
    {"in_channels": 3, "height": 224, "width": 224, "out_channels": 32, "kernel": 3, "stride": 2, "padding": 1},
]
#: layers of the kinds the packed CPU templates lost on: prime channel counts on both sides (no
#: multiple-of-16 divisor), a 5x5 kernel, a 3-channel 7x7 stride-2 stem
WEAK = [
    {"in_channels": 67, "height": 28, "width": 28, "out_channels": 71, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 64, "height": 28, "width": 28, "out_channels": 96, "kernel": 5, "stride": 1, "padding": 2},
    {"in_channels": 3, "height": 224, "width": 224, "out_channels": 32, "kernel": 7, "stride": 2, "padding": 3},
]
SETS = {"irregular": IRREGULAR, "weak": WEAK}
SHAPE_KEYS = {"conv2d": ("batch", "in_channels", "height", "width", "out_channels", "kernel", "stride", "padding",
                         "groups"),
              "dense": ("batch", "in_features", "out_features")}
SHAPE_KEYS["depthwise_conv2d"] = SHAPE_KEYS["conv2d"]


def model_layers(name: str, target_kind: str) -> list[dict]:
    """The distinct conv and dense layers of model ``name`` as ``model.layers`` specs (+ bias + ReLU)."""
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    tasks, _ = model_tasks({"name": name}, target_kind)
    out = []
    for t in tasks:
        spec = {k: int(t.shape[k]) for k in SHAPE_KEYS[t.kind]}
        if spec not in out:
            out.append(spec)
    return out


def measure_layer(layer: dict, entries: dict, target, template: str, settings, peak: float | None) -> dict:
    """One layer's row: the tuned single-layer model against PyTorch, interleaved."""
    task, tasks, imported = layer_task(layer, target.kind, template)
    row = {"layer": layer, "label": label(layer), "task_id": task.id, "flops": task.flops}
    entry = entries.get(task.id)
    if entry is None or entry.get("best_config") is None:
        row["error"] = "no output-checked best config"
        return row
    row["tuning"] = {k: entry[k] for k in ("best_index", "best_config", "best_latency_ms", "best_noisy", "search_s",
                                           "trials", "invalid")}
    row["timing"] = t = model_timing(target, task, tasks, imported, best_config(entry, task), settings, row["label"])
    if "error" in t:
        return row
    ms = t["rows"]["tuned"]["stats_ms"]["median"]
    row["gflops"] = task.flops / ms / 1e6
    row["pct_peak"] = 100.0 * row["gflops"] / peak if peak else None
    row["noisy"] = [name for name, r in t["rows"].items() if r["verdict"]["noisy"]]
    return row


def print_table(out: dict) -> None:
    d = out["device"]
    print(f"\n{out['method']} ({out['template']} templates), {out['trials_per_layer']} trials per layer, {out['set']}; "
          f"{d['name']}, {out['threads']} threads, {out['precision']}; peak {out['peak_gflops'] or 0:.0f} GFLOP/s; load "
          f"{out['loadavg_before']} -> {out['loadavg_after']}; {out['date']}, {out['git_commit']}\n")
    print("| layer | tuned ms | PyTorch ms | GFLOP/s | % peak | speedup vs PyTorch [95 % CI] "
          "| vs torch.compile [CI] | noisy |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out["layers"]:
        t = r.get("timing", {})
        if "error" in r or "error" in t:
            print(f"| {r['label']} | {r.get('error') or t['error']} |||||||")
            continue
        rows, sp = t["rows"], t["speedups"]
        pct = f"{r['pct_peak']:.0f}" if r["pct_peak"] is not None else "—"
        print(f"| {r['label']} | {rows['tuned']['stats_ms']['median']:.3f} | {rows['torch']['stats_ms']['median']:.3f} "
              f"| {r['gflops']:.0f} | {pct} | {fmt_ci(sp.get('torch'))} | {fmt_ci(sp.get('torch_compile'))} "
              f"| {', '.join(r['noisy']) or '—'} |")
    g = out["geomean_speedup_vs_torch"]
    print(f"\ngeometric mean of the speedups vs PyTorch over {out['n_layers_timed']} layer(s): "
          + (f"{g:.2f}" if g else "n/a") + (f" ({out['n_noisy_layers']} layer(s) with a noisy value)"
                                          if out["n_noisy_layers"] else " (no noisy value)"))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--model", default=None, help="the distinct conv layers of this model (e.g. resnet18)")
    which.add_argument("--set", choices=tuple(SETS), default=None, help="a built-in layer set")
    which.add_argument("--layers", default=None, help="a JSON file with a list of model.layers specs")
    ap.add_argument("--method", default="autotvm")
    ap.add_argument("--trials", type=int, default=64, help="trials per layer (default 64)")
    ap.add_argument("--target", default="llvm", choices=("llvm", "cuda"))
    ap.add_argument("--template", default=None, help="target.template (default: the target's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-torch-compile", action="store_true", help="leave out the torch.compile row")
    add_out_args(ap, NAME)
    args = ap.parse_args()
    if args.trials < 1:
        ap.error("--trials must be positive")
    args.path = out_path(ap, args, NAME)  # with --publish, named after the set, method, target and template
    from_file = os.path.splitext(os.path.basename(args.layers))[0] if args.layers else None
    args.set_name = args.model or args.set or from_file or "resnet18"
    if not (args.model or args.set or args.layers):
        args.model = "resnet18"
    return args


def _layers(args) -> list[dict]:
    from tunebench.datasets.layer_spec import check_layer_list

    if args.set:
        return check_layer_list(SETS[args.set])
    if args.layers:
        with open(args.layers) as fh:
            return check_layer_list(json.load(fh))
    return check_layer_list(model_layers(args.model, args.target))


def main() -> int:
    args = parse_args()
    from tunebench.harness.commands.cli import setup_logging
    from tunebench.protocol.stats import geomean
    from tunebench.targets import make_target

    setup_logging()
    layers = _layers(args)
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as work:
        extra = [f"target={args.target}"] + ([f"target.template={args.template}"] if args.template else [])
        cfg, entries, peak = tune_layers(args.method, work, args.trials, args.seed, layers, extra)
    settings = cfg.e2e
    if args.no_torch_compile:
        settings = dataclasses.replace(settings, torch_compile=False)
    target = make_target(cfg.target, cfg.measure)
    with target:
        template = target.template
        rows = [measure_layer(layer, entries, target, template, settings, peak) for layer in layers]
        desc = target.describe()
    timed = [r for r in rows if "gflops" in r]
    ratios = [r["timing"]["speedups"]["torch"]["geomean"] for r in timed]
    out = {"set": args.set_name, "method": args.method, "template": template, "trials_per_layer": args.trials,
           "seed": args.seed, "machine": machine_info(), "device": desc, "threads": desc["threads"],
           "precision": desc["precision"], "peak_gflops": peak, "e2e_settings": dataclasses.asdict(settings),
           "layers": rows, "n_layers_timed": len(timed), "n_noisy_layers": sum(bool(r["noisy"]) for r in timed),
           "geomean_speedup_vs_torch": geomean(ratios) if ratios else None,
           "loadavg_before": load_before, "loadavg_after": loadavg(), **provenance()}
    print_table(out)
    name = f"{NAME}_{args.set_name}_{args.method}_{args.target}_{template}.json"
    path = os.path.join(RESULTS, name) if args.publish else args.path
    write_json(path, out)
    print(f"written: {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
