"""Glimpse's acquisition ([Ahn-PhD] §4.4.2) replayed on a held-out hardware's measured configs, apart from
the machine's speed: for each model of a ``glimpse_loo.sh`` work dir (``glimpse_{spec,const}_s<seed>.pt``,
the Blueprint and the ablation), each layer of a run measured on hardware the models were not trained on
(a random-search run: its configs are the pool), a greedy episode as the models' meta-training replays
them: the prior's ``init`` most probable configs of the pool first, then at each step the GP fitted to
what was seen and the pool config the acquisition (or expected improvement) scores highest. Reported: the
best seen over the pool's best, after ``init`` and every 8 further steps, averaged over the layers, per
model seed. Nothing is timed; the pool's throughputs are those measured once.

    python benchmarks/glimpse_acq_replay.py POOL_RUN WORKDIR [WORKDIR ...] [--seeds 0,1,2] [--init 8]
                                            [--steps 24] [--budget 64] [--out JSON]

POOL_RUN: a run folder (random search on the held-out hardware, e.g. a glimpse-train run of it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_info, usage_error, write_json

from tunebench.methods.glimpse.dataset import groups_from_runs
from tunebench.methods.glimpse.method import expected_improvement
from tunebench.methods.glimpse.model import GlimpseModel
from tunebench.methods.glimpse.train import _z, prior_logp, replay_step

ARMS = ("spec", "const")
ACQUISITIONS = ("learned", "ei")


def episode(model: GlimpseModel, g, acquisition: str, init: int, steps: int, budget: int) -> list[float]:
    """Best seen / the pool's best after the ``init`` prior configs and after each of ``steps`` steps."""
    X, y = g.config_vectors(), g.y / g.y.max()
    logp = prior_logp(model, _z(model, g), g.knobs, g.feats, g.digits)
    theta = model.theta(g.hw)
    seen = [int(i) for i in np.argsort(-logp, kind="stable")[:init]]
    curve = [float(y[seen].max())]
    for t in range(steps):
        rest = np.setdiff1d(np.arange(len(y)), seen)
        if len(rest) == 0:
            curve.append(curve[-1])
            continue
        inputs, mu, sd, best = replay_step(X, y, seen, rest, logp, theta, (init + t) / budget)
        if acquisition == "learned":
            with torch.no_grad():
                scores = model.acquisition(torch.as_tensor(inputs)).numpy()
        else:
            scores = expected_improvement(mu, sd, best)
        seen.append(int(rest[int(np.argmax(scores))]))
        curve.append(float(y[seen].max()))
    return curve


def study(groups, workdirs: list[str], seeds: list[int], init: int, steps: int, budget: int) -> dict:
    hw = groups[0].hw.name
    out: dict = {}
    for wd in workdirs:
        for arm in ARMS:
            for acq in ACQUISITIONS:
                per_seed = []
                for seed in seeds:
                    path = os.path.join(wd, f"glimpse_{arm}_s{seed}.pt")
                    model = GlimpseModel.load(path)
                    if hw in model.info.get("hardware", []):
                        usage_error(f"{path} was trained on {hw}: the pool's hardware is not held out")
                    curves = np.array([episode(model, g, acq, init, steps, budget) for g in groups])
                    per_seed.append([float(v) for v in curves.mean(axis=0)])
                out.setdefault(wd, {}).setdefault(arm, {})[acq] = {
                    "seeds": seeds, "curve": per_seed,
                    "acquisition_prior": GlimpseModel.load(os.path.join(wd, f"glimpse_{arm}_s{seeds[0]}.pt"))
                    .info.get("acquisition_prior", "in-sample")}
    return out


def markdown(tab: dict, init: int, steps: int) -> str:
    at = [0, *range(8, steps + 1, 8)]
    lines = ["| models | acquisition trained on | arm | acquisition | " + " | ".join(
        f"after {init + k} trials" for k in at) + " |", "|---" * (4 + len(at)) + "|"]
    for wd, arms in tab.items():
        for arm, by_acq in arms.items():
            for acq, e in by_acq.items():
                cells = [f"{statistics.fmean(c[k] for c in e['curve']):.3f} ± "
                         f"{statistics.pstdev(c[k] for c in e['curve']):.3f}" for k in at]
                prior = e["acquisition_prior"] if acq == "learned" else "—"
                lines.append(f"| {wd} | {prior} | {arm} | {acq} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pool")
    ap.add_argument("workdirs", nargs="+")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--init", type=int, default=8, help="the prior's configs first (glimpse's init_samples)")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--budget", type=int, default=64, help="the trial budget the acquisition is told (t/T)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    groups = [g for g in groups_from_runs([args.pool]) if g.y is not None and g.valid.any()]
    if not groups:
        usage_error(f"{args.pool}: no measured configs")
    seeds = [int(s) for s in args.seeds.split(",")]
    tab = study(groups, args.workdirs, seeds, args.init, args.steps, args.budget)
    print(f"pool: {groups[0].hw.name}, {len(groups)} layers, {sum(len(g.y) for g in groups)} configs")
    print(markdown(tab, args.init, args.steps))
    if args.out:
        write_json(args.out, {"machine": machine_info(), "pool": args.pool, "hardware": groups[0].hw.name,
                              "layers": len(groups), "init": args.init, "steps": args.steps,
                              "budget": args.budget, "table": tab})


if __name__ == "__main__":
    main()
