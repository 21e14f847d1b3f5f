"""Speed of ``target=accel`` and ``mapspace_bo``: one mapping evaluation (ZigZag's cost model, median
and spread over 300 fitting mappings of the paper's convolution), a 4000-sample random-mapper run of the
paper's matrix product through the harness's loop (wall time), and one BO step (GP fit + acquisition) at
100 observations (median of 10 steps). Targets: <= 10 ms, < 60 s, <= 2 s.

Usage: python benchmarks/accel_speed.py [--out PATH | --publish]
  default output: benchmarks/results/local/accel_speed.json (untracked).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, out_path, provenance, run_main, write_json


def evaluation_ms(target, task) -> dict:
    from tunebench.methods.accelerator_mapping.encoding import Encoding

    enc = Encoding(task.mod, "scores")
    rng = np.random.default_rng(0)
    configs = [enc.decode(x) for x in rng.random((300, enc.d))]
    target.measure(task, configs[:5])  # ZigZag's layer built once per task
    times = []
    for c in configs:
        start = time.perf_counter()
        target.measure(task, [c])
        times.append((time.perf_counter() - start) * 1e3)
    q = np.percentile(times, [25, 50, 75])
    return {"median_ms": float(q[1]), "p25_ms": float(q[0]), "p75_ms": float(q[2]), "n": len(times)}


def random_run_s(target, task) -> dict:
    from tunebench.harness.loop import tune_task
    from tunebench.methods import Budget, make_method

    start = time.perf_counter()
    r = tune_task(task, make_method("random"), target, Budget(4000), np.random.default_rng(0))
    return {"wall_s": time.perf_counter() - start, "trials": len(r.measurements), "invalid": r.n_invalid}


def bo_step_s(target, task) -> dict:
    """Ten steps of mapspace_bo after 100 observations (points of the encoding, measured)."""
    import torch

    from tunebench.config.experiment import Budget
    from tunebench.methods import make_method

    torch.set_num_threads(1)
    method = make_method({"name": "mapspace_bo", "n_init": 100, "sobol_samples": 0})
    method.setup(task, target.info, None, Budget(200), np.random.default_rng(0))
    method.tell(target.measure(task, method.ask(100)))
    steps = []
    for _ in range(10):
        start = time.perf_counter()
        configs = method.ask(1)
        steps.append(time.perf_counter() - start)
        method.tell(target.measure(task, configs))
    return {"median_s": float(np.median(steps)), "min_s": float(np.min(steps)), "max_s": float(np.max(steps)),
            "observations": "100 to 109"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_args(ap, "accel_speed")
    args = ap.parse_args()
    path = out_path(ap, args, "accel_speed")

    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    target = AccelTarget(AccelSettings())
    matmul, conv = target.load_tasks(MODEL_OPTIONS["accel_paper"])[0]
    load0 = loadavg()
    out = {"evaluation": evaluation_ms(target, conv), "random_4000": random_run_s(target, matmul),
           "bo_step_at_100": bo_step_s(target, conv)}
    out["verdict"] = {"evaluation_le_10ms": out["evaluation"]["median_ms"] <= 10,
                      "random_4000_lt_60s": out["random_4000"]["wall_s"] < 60,
                      "bo_step_le_2s": out["bo_step_at_100"]["median_s"] <= 2}
    print(out)
    write_json(path, {**provenance(), "machine": {"cores": os.cpu_count(), "load_before": load0,
                                                  "load_after": loadavg()}, "results": out})
    print("written", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
