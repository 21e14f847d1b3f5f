"""AutoTVM vs MetaSchedule at equal trials on 3 ResNet-18 conv layers, and both vs PyTorch's conv2d.

Both methods tune the same three fused tasks (conv + bias + ReLU, `model=layers`) on `llvm` with the
same trial budget in one process, measured by the same tunebench target. Reports per layer: each
method's best latency, the best-latency ratio (autotvm / metaschedule), the search wall-time ratio
(autotvm / metaschedule), and PyTorch's own `relu(conv2d(x, w, b))` on the same CPU with the same
number of threads (median of repeated timings).

Usage: python benchmarks/autotvm_vs_metaschedule.py [--trials 64] [--out benchmarks/results/autotvm_vs_metaschedule.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

LAYERS = [  # ResNet-18: stage-1 3x3, stage-2 first 3x3 (stride 2), stage-2 3x3
    {"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 64, "height": 56, "width": 56, "out_channels": 128, "kernel": 3, "stride": 2, "padding": 1},
    {"in_channels": 128, "height": 28, "width": 28, "out_channels": 128, "kernel": 3, "stride": 1, "padding": 1},
]


def torch_conv_ms(layer: dict, threads: int, repeat: int = 50) -> float:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    x = torch.randn(1, layer["in_channels"], layer["height"], layer["width"])
    w = torch.randn(layer["out_channels"], layer["in_channels"], layer["kernel"], layer["kernel"])
    b = torch.randn(layer["out_channels"])
    times = []
    with torch.inference_mode():
        for i in range(repeat + 5):
            t0 = time.perf_counter()
            torch.relu(F.conv2d(x, w, b, stride=layer["stride"], padding=layer["padding"]))
            if i >= 5:
                times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "autotvm_vs_metaschedule.json"))
    args = ap.parse_args()

    from tunebench.harness.cli import compose_config, layers_override
    from tunebench.methods import make_method

    def config(method: str, work: str) -> dict:
        return compose_config([f"workdir={work}", "experiment=bench", "progress=false", "e2e.enabled=false",
                               f"seed={args.seed}", f"method={method}", f"budget.trials_per_task={args.trials}",
                               layers_override(LAYERS)])

    make_method(config("metaschedule", ".")["method"])  # MetaSchedule's one-time imports before MLflow's

    from mlflow.tracking import MlflowClient

    from tunebench.harness.cli import setup_logging
    from tunebench.harness.experiment import run_experiment
    from tunebench.targets.tvm_target import cpu_model_name

    setup_logging()
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as work:
        for method in ("autotvm", "metaschedule"):
            cfg = config(method, work)
            run_id = run_experiment(cfg)
            run_dir = os.path.join(work, "records", run_id)
            rows[method] = {i: t for i, t in
                            enumerate(json.load(open(os.path.join(run_dir, "tasks.json"))))}
            rows[method]["wall_s"] = MlflowClient(f"sqlite:///{work}/mlflow.db").get_run(run_id).data.metrics["wall_s"]
    threads = os.cpu_count() or 1
    table = []
    for i, layer in enumerate(LAYERS):
        a, m = rows["autotvm"][i], rows["metaschedule"][i]
        table.append({"layer": layer, "task": a["name"],
                      "autotvm_ms": a["best_latency_ms"], "metaschedule_ms": m["best_latency_ms"],
                      "best_latency_ratio_autotvm_over_ms": a["best_latency_ms"] / m["best_latency_ms"],
                      "autotvm_search_s": a["search_s"], "metaschedule_search_s": m["search_s"],
                      "search_time_ratio_autotvm_over_ms": a["search_s"] / m["search_s"],
                      "torch_ms": torch_conv_ms(layer, threads)})
    out = {"machine": {"cpu": cpu_model_name(), "cores": threads, "python": sys.version.split()[0]},
           "trials_per_layer": args.trials, "seed": args.seed, "date": time.strftime("%Y-%m-%d"), "layers": table,
           "median_best_latency_ratio": statistics.median(r["best_latency_ratio_autotvm_over_ms"] for r in table),
           "median_search_time_ratio": statistics.median(r["search_time_ratio_autotvm_over_ms"] for r in table)}
    print("| layer | autotvm ms | metaschedule ms | latency ratio (a/m) | search s (a / m) | PyTorch conv2d ms |")
    print("|---|---|---|---|---|---|")
    for r in table:
        L = r["layer"]
        print(f"| {L['in_channels']}->{L['out_channels']} {L['height']}x{L['width']} k{L['kernel']} s{L['stride']} "
              f"| {r['autotvm_ms']:.4f} | {r['metaschedule_ms']:.4f} | {r['best_latency_ratio_autotvm_over_ms']:.2f} "
              f"| {r['autotvm_search_s']:.0f} / {r['metaschedule_search_s']:.0f} | {r['torch_ms']:.4f} |")
    print(f"median best-latency ratio {out['median_best_latency_ratio']:.2f}, "
          f"median search-time ratio {out['median_search_time_ratio']:.2f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
