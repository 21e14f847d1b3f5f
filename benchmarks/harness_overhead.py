"""Trials per minute and harness overhead for one ResNet-18 layer on `llvm`.

Tunes ResNet-18's 3x3 conv of the 56x56 stage (64 -> 64, pad 1, bias + ReLU fused) with
`method=random` through the full harness (worker processes, records, MLflow in a temporary
embedded store) and reports, from the run's own metrics:

- trials per minute of wall time (worker start-up excluded; it happens once per run);
- the share of wall time spent outside the build phase (template + compile, in parallel workers)
  and the run phase (timing on the device): the harness overhead. Above 10 % is a defect.

Usage: python benchmarks/harness_overhead.py [--trials 64] [--out benchmarks/results/harness_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

LAYER = {"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "harness_overhead.json"))
    args = ap.parse_args()

    from mlflow.tracking import MlflowClient

    from tunebench.harness.cli import compose_config, layers_override, setup_logging
    from tunebench.harness.experiment import run_experiment
    from tunebench.targets.tvm_target import cpu_model_name

    setup_logging()
    with tempfile.TemporaryDirectory() as work:
        cfg = compose_config([f"workdir={work}", "experiment=bench", "progress=false", f"seed={args.seed}",
                              "method=random", f"budget.trials_per_task={args.trials}",
                              layers_override([LAYER])])
        t0 = time.perf_counter()
        run_id = run_experiment(cfg)
        total = time.perf_counter() - t0
        m = MlflowClient(f"sqlite:///{work}/mlflow.db").get_run(run_id).data.metrics
    wall = m["wall_s"] - m["check_s"]
    out = {
        "machine": {"cpu": cpu_model_name(), "host": platform.node(), "cores": os.cpu_count(),
                    "python": sys.version.split()[0]},
        "layer": LAYER, "trials": int(m["n_measurements"]), "invalid": int(m["n_invalid"]),
        "tuning_wall_s": round(wall, 2), "build_phase_s": round(m["build_phase_s"], 2),
        "run_phase_s": round(m["run_phase_s"], 2), "check_s": round(m["check_s"], 2),
        "trials_per_minute": round(m["n_measurements"] / wall * 60, 1),
        "harness_overhead_share": round(m["harness_overhead_share"], 4),
        "whole_command_s": round(total, 1), "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(out, indent=1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    if out["harness_overhead_share"] > 0.10:
        print(f"DEFECT: harness overhead {out['harness_overhead_share']:.1%} of wall time is above 10 %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
