"""How many CUDA configs break a GPU's limits, and that the tuning loop measures none of them (no GPU needed).

1. Uniform sampling: for every CUDA task of each model (``target.template=--template``), ``--configs`` uniformly
   random configs, checked against the limits of ``--tag`` (``target=cuda``'s static check, the knob-only
   verdict of the templates); the fraction that breaks them is the share of trials a method that samples
   uniformly, AutoTVM's random plan for instance, would spend on kernels that cannot launch.
2. The loop: ``--methods`` tune every task with ``--trials`` trials through ``tune_task``, the static check the
   same; per task, the configs proposed, rejected (told to the method, no trial) and measured, and how many
   measured configs break the limits (0 by construction). The measuring is a stand-in: there is no GPU here,
   so a config's "latency" is a fixed function of its index; its numbers are not reported, only the counts.

    python benchmarks/cuda_static_validity.py [--models resnet18 vgg16] [--tag nvidia/nvidia-h100]
        [--template direct] [--configs 500] [--methods random autotvm] [--trials 32] [--publish]

(``--publish``: ``benchmarks/results/cuda_static_validity.json``, ``_<template>`` added for another template.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import add_out_args, loadavg, machine_info, out_path, provenance, write_json

from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.methods.tensor_programs.glimpse.gpu_validity import cuda_tasks
from tunebench.targets.base import is_static_invalid
from tunebench.targets.tvm.gpu_limits import tag_limits
from tunebench.targets.tvm.templates import FLEX
from tunebench.targets.tvm.variants import VARIANTS
from tunebench.testing.fakes import FakeTarget

KINDS = ("conv2d", "depthwise_conv2d", "dense")


def uniform_fraction(rows, limits: dict, n: int, seed: int) -> dict:
    """Per task and over all tasks: the invalid fraction of ``n`` uniformly random configs."""
    per_task, bad, total = {}, 0, 0
    for task, template, space in rows:
        idx = space.sample(np.random.default_rng(seed), n)
        invalid = sum(template.static_check(task.mod, space.get(int(i)), limits) is not None for i in idx)
        per_task[task.name] = round(invalid / len(idx), 4)
        bad, total = bad + invalid, total + len(idx)
    return {"invalid_fraction": round(bad / total, 4), "configs": total, "per_task": per_task}


def loop_counts(rows, limits: dict, method: str, trials: int, seed: int) -> dict:
    """Tune every task with ``method`` under the static check; the counts per task and in all."""
    per_task, sums = {}, dict.fromkeys(("proposed", "rejected", "measured", "measured_invalid"), 0)
    for task, template, _ in rows:
        def check(config, task=task, template=template):
            return template.static_check(task.mod, config, limits)

        target = FakeTarget(latency=lambda c: 1e-4 * (1 + c.index % 1009), static=check, batch_size=8)
        settings = {"name": method, **({"plan_size": trials // 2} if method == "autotvm" else {})}
        t0 = time.perf_counter()
        res = tune_task(task, make_method(settings), target, Budget(trials), np.random.default_rng(seed))
        counts = {"proposed": len(res.measurements) + len(res.static_rejected),
                  "rejected": len(res.static_rejected), "measured": len(target.measured),
                  "measured_invalid": sum(check(task.space.get(i)) is not None for i in target.measured)
                  + sum(is_static_invalid(m) for m in res.measurements)}
        per_task[task.name] = {**counts, "static_invalid_fraction": round(res.static_invalid_fraction, 4),
                               "seconds": round(time.perf_counter() - t0, 2)}
        sums = {k: sums[k] + counts[k] for k in sums}
    return {**sums, "rejected_fraction": round(sums["rejected"] / max(sums["proposed"], 1), 4), "per_task": per_task}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18", "vgg16"])
    ap.add_argument("--tag", default="nvidia/nvidia-h100")
    ap.add_argument("--template", default="direct", choices=[v for v in VARIANTS["cuda"] if ("cuda", v) not in FLEX],
                    help="the CUDA template variant (target.template)")
    ap.add_argument("--configs", type=int, default=500, help="uniform configs per task")
    ap.add_argument("--methods", nargs="+", default=["random", "autotvm"])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    add_out_args(ap, "cuda_static_validity")
    args = ap.parse_args()
    path = out_path(ap, args, "cuda_static_validity" + ("" if args.template == "direct" else f"_{args.template}"))
    limits = tag_limits(args.tag)
    out = {"tag": args.tag, "template": args.template, "limits": limits, "configs_per_task": args.configs, "trials": args.trials,
           "machine": machine_info(), "loadavg_before": loadavg(), **provenance(), "models": {}}
    for model in args.models:
        rows = cuda_tasks(model, KINDS, args.template)
        entry = {"tasks": len(rows), "uniform": uniform_fraction(rows, limits, args.configs, args.seed)}
        print(f"{model}: {len(rows)} tasks, uniform invalid fraction {entry['uniform']['invalid_fraction']:.3f}",
              flush=True)
        for method in args.methods:
            entry[method] = loop_counts(rows, limits, method, args.trials, args.seed)
            m = entry[method]
            print(f"  {method}: proposed {m['proposed']}, rejected {m['rejected']} ({m['rejected_fraction']:.3f}), "
                  f"measured {m['measured']}, measured invalid {m['measured_invalid']}", flush=True)
        out["models"][model] = entry
    out["loadavg_after"] = loadavg()
    write_json(path, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
