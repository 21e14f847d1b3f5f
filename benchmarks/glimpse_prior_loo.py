"""Glimpse's prior generator H ([Ahn-PhD] §4.4.1) on every hardware left out in turn, apart from any tuning
run's luck: for each hardware of the training runs, H is trained on the others, with the Blueprint and with
a constant one (the ablation), and scored on the left-out hardware: the cross-entropy from its prior to the
best 10 % of that hardware's measured configs, per layer (H's own training loss, on data it never saw;
lower is better), averaged over the layers. Each model is scored at the epoch count ``glimpse train``
chooses by default (leave-one-hardware-out validation among the training hardware only: nested, the
left-out hardware plays no part in it) and at fixed counts along one training run.

    python benchmarks/glimpse_prior_loo.py WORKDIR [--experiment glimpse-train] [--seeds 0,1,2]
                                           [--fixed 50,150,300,600] [--out JSON]

WORKDIR holds the training runs (``records/`` of benchmarks/glimpse_loo.sh's data stage). Nothing is timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_info, write_json
from glimpse_table import _runs

from tunebench.methods.tensor_programs.glimpse.dataset import groups_from_runs
from tunebench.methods.tensor_programs.glimpse.train import (
    TrainSettings,
    choose_prior_epochs,
    model_factory,
    prior_cross_entropy,
    train_prior,
    uniform_cross_entropy,
)

MODES = ("spec", "constant")


def left_out(train, held, mode: str, seed: int, fixed: list[int], base: TrainSettings | None = None) -> dict:
    """One model of ``mode`` and ``seed`` (other settings: ``base``, default ``glimpse train``'s) trained on
    ``train``, scored on ``held``: at the chosen epoch count and at each of ``fixed``."""
    s = dataclasses.replace(base or TrainSettings(), blueprint_mode=mode, seed=seed)
    new_model = model_factory(train, s)
    chosen, _ = choose_prior_epochs(new_model, train, s)
    torch.manual_seed(seed)
    model = new_model()
    wanted = set(fixed) | {chosen}
    scores: dict[int, float] = {}

    def check(n: int) -> None:
        if n in wanted:
            scores[n] = statistics.fmean(prior_cross_entropy(model, g) for g in held)

    train_prior(model, train, s, epochs=max(wanted), on_epoch=check)
    return {"chosen_epochs": chosen, "chosen": scores[chosen], "fixed": {str(n): scores[n] for n in fixed}}


def study(groups, seeds: list[int], fixed: list[int], base: TrainSettings | None = None, log=print) -> dict:
    out = {}
    for hw in sorted({g.hw.name for g in groups}):
        train = [g for g in groups if g.hw.name != hw]
        held = [g for g in groups if g.hw.name == hw]
        row = {"uniform": statistics.fmean(uniform_cross_entropy(g) for g in held), "layers": len(held)}
        for mode in MODES:
            row[mode] = [left_out(train, held, mode, seed, fixed, base) for seed in seeds]
        out[hw] = row
        log(f"{hw}: Blueprint {statistics.fmean(r['chosen'] for r in row['spec']):.3f}, constant "
            f"{statistics.fmean(r['chosen'] for r in row['constant']):.3f}, uniform {row['uniform']:.3f}")
    return out


def _cell(rows: list[dict], key: str | None) -> tuple[float, float]:
    vals = [r["chosen"] if key is None else r["fixed"][key] for r in rows]
    return statistics.fmean(vals), statistics.pstdev(vals)


def markdown(tab: dict, fixed: list[int]) -> str:
    cols = [None] + [str(n) for n in fixed]
    names = ["chosen"] + [f"{n} epochs" for n in fixed]
    head = "| left out | " + " | ".join(f"{n}: Blueprint | constant" for n in names) + " | uniform |"
    lines = [head, "|---" * (2 + 2 * len(cols)) + "|"]
    for hw, row in tab.items():
        cells = []
        for key in cols:
            for mode in MODES:
                m, sd = _cell(row[mode], key)
                cells.append(f"{m:.2f} ± {sd:.2f}")
        lines.append(f"| {hw} | " + " | ".join(cells) + f" | {row['uniform']:.2f} |")
    summary = []
    for key, name in zip(cols, names):
        spec = [_cell(r["spec"], key)[0] for r in tab.values()]
        const = [_cell(r["constant"], key)[0] for r in tab.values()]
        better = sum(a < b for a, b in zip(spec, const))
        summary.append(f"{name}: Blueprint {np.mean(spec):.3f}, constant {np.mean(const):.3f} (mean over the "
                       f"left-out hardware); Blueprint lower on {better} of {len(spec)}")
    return "\n".join(lines) + "\n\n" + "\n".join(summary)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir")
    ap.add_argument("--experiment", default="glimpse-train")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--fixed", default="50,150,300,600", help="fixed epoch counts to score besides the chosen one")
    ap.add_argument("--out", help="write the table as JSON")
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    fixed = [int(x) for x in args.fixed.split(",") if x]
    runs = _runs(args.workdir, args.experiment)
    if not runs:
        raise SystemExit(f"error: no runs of experiment {args.experiment} under {args.workdir}/records")
    groups = groups_from_runs([os.path.join(args.workdir, "records", r["run"]) for r in runs], args.workdir)
    if len({g.hw.name for g in groups}) < 3:
        raise SystemExit("error: leaving one hardware out needs runs on at least 3 hardware variants")
    tab = study(groups, seeds, fixed)
    print(markdown(tab, fixed))
    if args.out:
        write_json(args.out, {"machine": machine_info(), "seeds": seeds, "fixed_epochs": fixed, "table": tab})


if __name__ == "__main__":
    main()
