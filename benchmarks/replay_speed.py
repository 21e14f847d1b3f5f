"""Harness time per replayed trial: ``method=random`` on ``target=replay`` (the shipped Kernel Tuner
cache) through the tuning loop, wall time per trial outside the method, over seeds.

    python benchmarks/replay_speed.py [--seeds 30] [--trials 200] [--publish]

A trial's harness time is the loop's wall time minus the time inside the method's ask and tell, divided
by the trials; the target's replay is part of it (it is the harness's side of a trial).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, machine_info, out_path, provenance, timed_inside, write_json


def timed_run(seed: int, trials: int) -> dict:
    """One random-search task on the replayed cache: loop wall time, time in the method, trials."""
    from tunebench.config.experiment import Budget
    from tunebench.datasets.models import MeasuredModel
    from tunebench.harness.loop import tune_task
    from tunebench.harness.tuning import task_rng
    from tunebench.methods import make_method
    from tunebench.targets.replay import ReplaySettings, ReplayTarget

    target = ReplayTarget(ReplaySettings())
    task = target.load_tasks(MeasuredModel())[0][0]
    method, inside = make_method("random"), [0.0]
    timed_inside(method, inside)
    t0 = time.perf_counter()
    result = tune_task(task, method, target, Budget(trials), task_rng(seed, task))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "method_s": inside[0], "trials": len(result.measurements)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--trials", type=int, default=200)
    add_out_args(ap, "replay_speed")
    args = ap.parse_args()
    load0 = loadavg()
    timed_run(0, 10)  # imports and the cache read, once
    runs = [timed_run(seed, args.trials) for seed in range(args.seeds)]
    per_trial_ms = np.array([(r["wall_s"] - r["method_s"]) / r["trials"] * 1e3 for r in runs])
    out = {"seeds": args.seeds, "trials": args.trials,
           "harness_ms_per_trial": {"median": float(np.median(per_trial_ms)), "min": float(per_trial_ms.min()),
                                    "max": float(per_trial_ms.max())},
           "run_wall_s_median": float(np.median([r["wall_s"] for r in runs])),
           "loadavg": [load0, loadavg()], "machine": machine_info(), **provenance()}
    print(out["harness_ms_per_trial"], "run wall median", round(out["run_wall_s_median"], 3), "s", flush=True)
    write_json(out_path(ap, args, "replay_speed"), out)


if __name__ == "__main__":
    main()
