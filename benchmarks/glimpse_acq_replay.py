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

    python benchmarks/glimpse_acq_replay.py --leave-out WORKDIR [--seeds 0] [--out JSON]

The same over every training hardware of a ``glimpse_loo.sh`` work dir (its glimpse-train runs) left out in
turn: the models are trained on the others (``glimpse train``'s settings; with the Blueprint and the
constant one, the acquisition on held-out and on in-sample priors), the pool is the left-out one's runs.
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

from _common import machine_info, usage_error, write_json
from glimpse_table import _runs

from tunebench.methods.tensor_programs.glimpse.dataset import groups_from_runs
from tunebench.methods.tensor_programs.glimpse.method import expected_improvement
from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel
from tunebench.methods.tensor_programs.glimpse.train import (
    TrainSettings,
    _z,
    prior_logp,
    replay_episode,
    replay_step,
    train,
)

ARMS = ("spec", "const")
ACQUISITIONS = ("learned", "ei")


def episode(model: GlimpseModel, g, acquisition: str, init: int, steps: int, budget: int) -> list[float]:
    """Best seen / the pool's best after the ``init`` prior configs and after each of ``steps`` steps (greedy
    :func:`~tunebench.methods.tensor_programs.glimpse.train.replay_episode`)."""
    X, y = g.config_vectors(), g.y / g.y.max()
    logp = prior_logp(model, _z(model, g), g.knobs, g.feats, g.digits)
    theta = model.theta(g.hw)

    def pick(t: int, seen: list[int], rest: np.ndarray) -> int:
        inputs, mu, sd, best = replay_step(X, y, seen, rest, logp, theta, (init + t) / budget)
        if acquisition == "ei":
            return int(np.argmax(expected_improvement(mu, sd, best)))
        with torch.no_grad():
            return int(np.argmax(model.acquisition(torch.as_tensor(inputs)).numpy()))

    seen = replay_episode(y, logp, init, steps, pick)
    best = np.maximum.accumulate(y[seen])[min(init, len(seen)) - 1:]
    return [float(v) for v in np.pad(best, (0, steps + 1 - len(best)), mode="edge")]


def _curves(model: GlimpseModel, groups, acq: str, init: int, steps: int, budget: int) -> list[float]:
    """:func:`episode`'s curve, averaged over ``groups``."""
    return [float(v) for v in np.mean([episode(model, g, acq, init, steps, budget) for g in groups], axis=0)]


def study(groups, workdirs: list[str], seeds: list[int], init: int, steps: int, budget: int) -> dict:
    hw = groups[0].hw.name
    out: dict = {}
    for wd in workdirs:
        for arm in ARMS:
            paths = [os.path.join(wd, f"glimpse_{arm}_s{seed}.pt") for seed in seeds]
            models = [GlimpseModel.load(p) for p in paths]
            for path, model in zip(paths, models):
                if hw in model.info.get("hardware", []):
                    usage_error(f"{path} was trained on {hw}: the pool's hardware is not held out")
            for acq in ACQUISITIONS:
                out.setdefault(wd, {}).setdefault(arm, {})[acq] = {
                    "seeds": seeds, "curve": [_curves(m, groups, acq, init, steps, budget) for m in models],
                    "acquisition_prior": models[0].info.get("acquisition_prior", "in-sample")}
    return out


def leave_out_study(groups, seeds: list[int], a, base: TrainSettings | None = None, log=print) -> dict:
    """Per hardware left out, arm and acquisition (``learned`` on held-out priors, ``learned-in-sample``,
    ``ei``): per seed, the curve of :func:`episode` on the left-out hardware's groups."""
    out: dict = {}
    for hw in sorted({g.hw.name for g in groups}):
        train_on = [g for g in groups if g.hw.name != hw]
        pool = [g for g in groups if g.hw.name == hw and g.y is not None and g.valid.any()]
        for arm, mode in (("spec", "spec"), ("const", "constant")):
            cell = {"learned": [], "learned-in-sample": [], "ei": []}
            for seed in seeds:
                for acq_prior, key in (("held-out", "learned"), ("in-sample", "learned-in-sample")):
                    s = dataclasses.replace(base or TrainSettings(), blueprint_mode=mode, seed=seed,
                                            acq_prior=acq_prior)
                    model = train(train_on, s)
                    cell[key].append(_curves(model, pool, "learned", a.init, a.steps, a.budget))
                cell["ei"].append(_curves(model, pool, "ei", a.init, a.steps, a.budget))
            out.setdefault(hw, {})[arm] = cell
            log(f"{hw} {arm}: " + ", ".join(f"{k} {statistics.fmean(c[a.steps // 3] for c in v):.3f}"
                                           for k, v in cell.items()) + f" after {a.init + a.steps // 3}")
    return out


def markdown(tab: dict, init: int, steps: int) -> str:
    at = [0, *range(8, steps + 1, 8)]
    lines = ["| models | acquisition trained on | arm | acquisition | " + " | ".join(
        f"after {init + k} trials" for k in at) + " |", "|---" * (4 + len(at)) + "|"]
    for wd, arms in tab.items():
        for arm, by_acq in arms.items():
            for acq, e in by_acq.items():
                cells = [_fmt(c[k] for c in e["curve"]) for k in at]
                prior = e["acquisition_prior"] if acq == "learned" else "—"
                lines.append(f"| {wd} | {prior} | {arm} | {acq} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(vals: list[float]) -> str:
    """Mean ± std over seeds (the mean alone for one seed)."""
    vals = list(vals)
    m = statistics.fmean(vals)
    return f"{m:.3f} ± {statistics.pstdev(vals):.3f}" if len(vals) > 1 else f"{m:.3f}"


def leave_out_markdown(tab: dict, init: int, steps: int) -> str:
    at = [0, *range(8, steps + 1, 8)]
    lines = ["| left out | arm | acquisition | " + " | ".join(f"after {init + k} trials" for k in at) + " |",
             "|---" * (3 + len(at)) + "|"]
    means: dict = {}
    for hw, arms in tab.items():
        for arm, by_acq in arms.items():
            for acq, curves in by_acq.items():
                vals = [[c[k] for c in curves] for k in at]
                means.setdefault((arm, acq), []).append([statistics.fmean(v) for v in vals])
                lines.append(f"| {hw} | {arm} | {acq} | " + " | ".join(_fmt(v) for v in vals) + " |")
    for (arm, acq), rows in means.items():
        lines.append(f"| mean | {arm} | {acq} | " + " | ".join(f"{statistics.fmean(col):.3f}" for col in zip(*rows))
                     + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pool", nargs="?")
    ap.add_argument("workdirs", nargs="*")
    ap.add_argument("--leave-out", metavar="WORKDIR", help="every training hardware of WORKDIR left out in turn")
    ap.add_argument("--seeds", default=None, help="model seeds (default 0,1,2; with --leave-out 0)")
    ap.add_argument("--init", type=int, default=8, help="the prior's configs first (glimpse's init_samples)")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--budget", type=int, default=64, help="the trial budget the acquisition is told (t/T)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    seeds = [int(x) for x in (args.seeds or ("0" if args.leave_out else "0,1,2")).split(",")]
    if args.leave_out:
        runs = _runs(args.leave_out, "glimpse-train")
        groups = groups_from_runs([os.path.join(args.leave_out, "records", r["run"]) for r in runs], args.leave_out)
        if len({g.hw.name for g in groups}) < 3:
            usage_error(f"--leave-out {args.leave_out}: glimpse-train runs on at least 3 hardware variants needed")
        tab = leave_out_study(groups, seeds, args)
        print(leave_out_markdown(tab, args.init, args.steps))
    else:
        if not args.pool or not args.workdirs:
            usage_error("give POOL_RUN and at least one WORKDIR, or --leave-out WORKDIR")
        groups = [g for g in groups_from_runs([args.pool]) if g.y is not None and g.valid.any()]
        if not groups:
            usage_error(f"{args.pool}: no measured configs")
        tab = study(groups, args.workdirs, seeds, args.init, args.steps, args.budget)
        print(f"pool: {groups[0].hw.name}, {len(groups)} layers, {sum(len(g.y) for g in groups)} configs")
        print(markdown(tab, args.init, args.steps))
    if args.out:
        write_json(args.out, {"machine": machine_info(), "pool": args.pool or args.leave_out, "seeds": seeds,
                              "init": args.init, "steps": args.steps, "budget": args.budget, "table": tab,
                              **({"hardware": groups[0].hw.name, "layers": len(groups)} if not args.leave_out else {})})


if __name__ == "__main__":
    main()
