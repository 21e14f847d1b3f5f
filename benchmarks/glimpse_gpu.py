"""Glimpse on GPU specifications, without a GPU ([Ahn-PhD] Fig. 4.4 and Fig. 4.8, statically):

1. Fig. 4.4: the Blueprint PCA's reconstruction error against the number of components, on the GPU
   datasheet table (data/glimpse/gpus.csv) and on the CPU-variant catalogue.
2. Fig. 4.8, static: the validity ensemble trained on CUDA configs labelled under the limits of the table's
   GPUs minus a held-out set (the thesis's four GPUs and every fourth other one), then asked about fresh
   random configs on each held-out GPU; per GPU, the invalid fraction of uniform sampling (what AutoTVM's
   random proposals meet), the invalid fraction among the configs the ensemble accepts, the reduction, and
   the valid configs it wrongly rejects. Tasks seen in training (ResNet-18's first six conv2d tasks) and
   unseen ones (its other conv2d tasks) separately.

    python benchmarks/glimpse_gpu.py [--configs 300] [--out benchmarks/results/glimpse_gpu.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_info, provenance, write_json

from tunebench.methods.annealing import index_digits
from tunebench.methods.tensor_programs.glimpse import gpu_data
from tunebench.methods.tensor_programs.glimpse.blueprint import catalogue, reconstruction_rmse
from tunebench.methods.tensor_programs.glimpse.encoding import entity_features
from tunebench.methods.tensor_programs.glimpse.gpu_validity import static_labels
from tunebench.methods.tensor_programs.glimpse.networks import votes_reject
from tunebench.methods.tensor_programs.glimpse.train import TrainSettings, train

THESIS_GPUS = ("nvidia/nvidia-titan-xp", "nvidia/geforce-rtx-2070", "nvidia/geforce-rtx-2080-ti",
               "nvidia/geforce-rtx-3090")
TAU = 1 / 3


def split_tags() -> tuple[list[str], list[str]]:
    tags = gpu_data.table_tags()
    others = [t for t in tags if t not in THESIS_GPUS]
    held = [t for t in THESIS_GPUS if t in tags] + others[::4]
    return [t for t in tags if t not in held], held


def evaluate(model, tag: str, configs: list[tuple]) -> dict:
    """Base and filtered invalid fractions of ``configs`` under ``tag``'s limits."""
    hw = gpu_data.gpu_hardware(tag)
    n = bad = kept = kept_bad = good_rejected = 0
    for task, template, space, indices in configs:
        labels = static_labels(task, template, space, indices, gpu_data.gpu_limits(tag))
        z = model.z(task.kind, task.shape, task.flops, hw)
        votes = model.invalid_votes([k.name for k in space.knobs], entity_features(space), z)
        rej = votes_reject(votes, index_digits(space, np.asarray(indices, dtype=np.int64)), TAU)
        n += len(labels)
        bad += int((~labels).sum())
        kept += int((~rej).sum())
        kept_bad += int((~labels & ~rej).sum())
        good_rejected += int((labels & rej).sum())
    base, after = bad / n, (kept_bad / kept if kept else float("nan"))
    return {"configs": n, "invalid_uniform": base, "invalid_accepted": after,
            "reduction": base / after if after > 0 else float("inf"), "accepted": kept / n,
            "valid_rejected": good_rejected / max(1, n - bad)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=300, help="random configs per task (training and evaluation)")
    ap.add_argument("--out", default="benchmarks/results/glimpse_gpu.json")
    args = ap.parse_args()
    t0 = time.time()
    fig44 = {f: reconstruction_rmse(catalogue(f)[1]) for f in ("gpu", "cpu")}
    for f, curve in fig44.items():
        print(f"Fig. 4.4 {f}: RMSE by components " + " ".join(f"{k}:{v:.3f}" for k, v in enumerate(curve)))
    train_tags, held = split_tags()
    seen = gpu_data.labelled_configs(args.configs, seed=0, tasks=6)
    model = train(gpu_data.static_groups_for(train_tags, seen), TrainSettings(validity_epochs=300))
    fresh = gpu_data.labelled_configs(args.configs, seed=1, tasks=100)
    seen_ids = {c[0].id for c in seen}
    rows = {}
    for tag in held:
        rows[tag] = {"seen_tasks": evaluate(model, tag, [c for c in fresh if c[0].id in seen_ids]),
                     "unseen_tasks": evaluate(model, tag, [c for c in fresh if c[0].id not in seen_ids])}
        r = rows[tag]
        print(f"{tag}: seen tasks invalid {r['seen_tasks']['invalid_uniform']:.3f} -> "
              f"{r['seen_tasks']['invalid_accepted']:.3f} ({r['seen_tasks']['reduction']:.2f}x, "
              f"valid rejected {r['seen_tasks']['valid_rejected']:.3f}); unseen tasks "
              f"{r['unseen_tasks']['invalid_uniform']:.3f} -> {r['unseen_tasks']['invalid_accepted']:.3f} "
              f"({r['unseen_tasks']['reduction']:.2f}x, valid rejected {r['unseen_tasks']['valid_rejected']:.3f})",
              flush=True)
    write_json(args.out, {"machine": machine_info(), **provenance(), "fig_4_4_rmse": fig44,
                          "train_tags": train_tags, "held_out": rows, "tau": TAU, "configs_per_task": args.configs,
                          "tasks_seen": len(seen), "tasks_fresh": len(fresh), "seconds": time.time() - t0})
    print(f"{args.out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
