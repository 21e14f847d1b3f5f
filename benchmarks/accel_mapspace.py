"""[Dinh-MLArchSys23] §III re-measured on ``target=accel`` (ZigZag's model of a Gemmini-like accelerator):
``mapspace_bo`` against random search on the raw mapspace (``method=random``: uniform draws, invalid ones
counted), Timeloop's random-pruned mapper (``method=timeloop_random``, with its victory condition and without
it, ``timeloop_random_to_budget``), the encoding without the GP (``encoding_sobol``: ``mapspace_bo``'s Sobol initial design for every trial) and
ZigZag's LOMA and SALSA, on the paper's matrix product and convolution (``model=accel_paper``), and per layer of
ResNet-18 (``--resnet18``).

Each (task, method, seed) is one ``tune_task`` of the harness's loop on the real target, energy per MAC
(pJ) the objective. Per run: the best-so-far curve, the best at 20/30/50/100/420/600/4000 evaluations,
the share of invalid draws (random), evaluations to beat a value; a run that stopped by itself (Timeloop's
victory condition) keeps its best at every larger checkpoint. Printed: mean +- std over the seeds, with
Student's t 95 % intervals of the mean (``ci95``) and, for Timeloop's mapper, the trial of its last
improvement and why it stopped.

Usage: python benchmarks/accel_mapspace.py [--seeds 5] [--bo-trials 100] [--random-trials 4000]
           [--encodings scores categorical] [--resnet18 --layer-trials 100 --layer-seeds 1 [--layers FIRST:LAST]]
           [--transfer --transfer-samples 24] [--salsa-trials 3]
           [--product M N K] [--seed-start 0] [--only mapspace_bo_scores random timeloop_random loma ...]
           [--gp-features mapping|encoding] [--out PATH | --publish]
  default output: benchmarks/results/local/accel_mapspace.json (untracked).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, matmul_model, out_path, provenance, run_main, write_json

CHECKPOINTS = (10, 20, 30, 50, 100, 420, 600, 1600, 4000)


#: ``--gp-features``: settings given to every ``mapspace_bo`` run of this process (empty: the defaults)
BO_SETTINGS: dict = {}


def tune(task, target, method: dict, trials: int, seed: int) -> dict:
    import torch

    from tunebench.harness.loop import tune_task
    from tunebench.methods import Budget, make_method

    torch.set_num_threads(1)
    if method["name"] == "mapspace_bo":
        method = {**BO_SETTINGS, **method}
    start = time.perf_counter()
    r = tune_task(task, make_method(method), target, Budget(trials), np.random.default_rng(seed))
    curve = [float(v) for v in r.best_so_far]
    # a method that stopped by itself (Timeloop's victory condition) keeps its best for every larger budget
    reach = trials if r.stop_reason == "exhausted" and curve else len(curve)
    return {"method": method, "seed": seed, "trials": len(r.measurements), "invalid": r.n_invalid,
            "wall_s": time.perf_counter() - start, "best": curve[-1] if curve else None,
            "stop_reason": r.stop_reason,
            "at": {n: curve[min(n, len(curve)) - 1] for n in CHECKPOINTS if n <= reach},
            "curve": curve if len(curve) <= 100 else curve[:100] + curve[100::20],
            "report": {k: v for k, v in r.report.items() if k != "sobol_st"}}


def interval95(vals: list[float]) -> list[float]:
    """Student's t 95 % interval of the mean of ``vals`` (its two ends; the mean twice for one value)."""
    from scipy.stats import t

    m = float(np.mean(vals))
    if len(vals) < 2:
        return [m, m]
    half = float(t.ppf(0.975, len(vals) - 1) * np.std(vals, ddof=1) / np.sqrt(len(vals)))
    return [m - half, m + half]


def summary(runs: list[dict]) -> dict:
    """Per checkpoint: [mean, population std] and its 95 % interval (``ci95``); the invalid share; for
    ``timeloop_random``, the trial of the last improvement (median, mean) and why the runs stopped."""
    out: dict = {"ci95": {}}
    for n in CHECKPOINTS:
        vals = [r["at"][n] for r in runs if n in r["at"]]
        if vals:
            out[n] = [float(np.mean(vals)), float(np.std(vals))]
            out["ci95"][n] = interval95(vals)
    out["invalid_share"] = float(np.mean([r["invalid"] / max(r["trials"], 1) for r in runs]))
    last = [r["report"]["last_improvement"] for r in runs if "last_improvement" in r["report"]]
    if last:
        out["last_improvement"] = {"median": float(np.median(last)), "mean": float(np.mean(last))}
        it = [r["report"]["last_improvement_iteration"] for r in runs]
        out["last_improvement_iteration"] = {"median": float(np.median(it)), "mean": float(np.mean(it))}
        out["trials_used"] = {"median": float(np.median([r["trials"] for r in runs])),
                              "max": max(r["trials"] for r in runs)}
        out["stops"] = {k: sum(r["report"]["stop"] == k for r in runs) for k in {r["report"]["stop"] for r in runs}}
    return out


def evals_to_beat(runs: list[dict], value: float) -> list[int | None]:
    """Per run, the first evaluation whose best-so-far is at most ``value`` (None: never)."""
    out = []
    for r in runs:
        full = r["curve"]
        out.append(next((i + 1 for i, v in enumerate(full[:100]) if v <= value), None)
                   if len(full) <= 100 or full[99] <= value else
                   next((100 + 20 * j + 1 for j, v in enumerate(full[100:]) if v <= value), None))
    return out


def paper(args, target, tasks) -> dict:
    out = {}
    seeds = range(args.seed_start, args.seed_start + args.seeds)
    for task in tasks:
        res: dict = {"task": task.name, "shape": task.shape}
        if args.only:
            out[task.name] = {**res, **chosen(args, target, task, seeds)}
            continue
        for enc in args.encodings:
            runs = [tune(task, target, {"name": "mapspace_bo", "order_encoding": enc}, args.bo_trials, s)
                    for s in seeds]
            res[f"mapspace_bo_{enc}"] = {"runs": runs, "summary": summary(runs)}
            print(task.name, enc, summary(runs), flush=True)
        # the encoding without the GP: its initial design (consecutive scrambled Sobol points) for every trial
        runs = [tune(task, target, {"name": "mapspace_bo", "n_init": args.bo_trials, "sobol_samples": 0},
                     args.bo_trials, s) for s in seeds]
        res["encoding_sobol"] = {"runs": runs, "summary": summary(runs)}
        print(task.name, "encoding_sobol", summary(runs), flush=True)
        runs = [tune(task, target, {"name": "random"}, args.random_trials, s) for s in seeds]
        res["random"] = {"runs": runs, "summary": summary(runs)}
        print(task.name, "random", summary(runs), flush=True)
        for name, method in TIMELOOP.items():
            tl = [tune(task, target, dict(method), args.random_trials, s) for s in seeds]
            res[name] = {"runs": tl, "summary": summary(tl)}
            print(task.name, name, summary(tl), flush=True)
        loma = tune(task, target, {"name": "loma"}, args.bo_trials, 0)
        res["loma"] = {"runs": [loma], "summary": summary([loma])}
        print(task.name, "loma", loma["best"], loma["report"], flush=True)
        runs_salsa = [tune(task, target, {"name": "salsa"}, args.salsa_trials, s) for s in seeds]
        res["salsa"] = {"runs": runs_salsa, "summary": summary(runs_salsa)}
        print(task.name, "salsa", [r["best"] for r in runs_salsa], flush=True)
        for enc in args.encodings:
            bo = res[f"mapspace_bo_{enc}"]["runs"]
            target_value = float(np.mean([r["best"] for r in bo]))
            res[f"random_evals_to_beat_bo_{enc}"] = evals_to_beat(runs, target_value)
        out[task.name] = res
    return out


#: Timeloop's random-pruned mapper with its default termination (victory after 500 valid mappings without
#: improvement), and without the victory condition (it runs to the trial budget)
TIMELOOP = {"timeloop_random": {"name": "timeloop_random"},
            "timeloop_random_to_budget": {"name": "timeloop_random", "victory_condition": 0}}


def chosen(args, target, task, seeds) -> dict:
    """``--only``: the named methods alone (``mapspace_bo_<encoding>``, ``random``, ``loma``, ``salsa``), each
    over ``seeds`` (LOMA once: it is deterministic)."""
    res = {}
    for name in args.only:
        if name.startswith("mapspace_bo_"):
            method, trials = {"name": "mapspace_bo", "order_encoding": name.split("_")[-1]}, args.bo_trials
        elif name.startswith("timeloop_random"):
            method, trials = dict(TIMELOOP[name]), args.random_trials
        else:
            method = {"name": name}
            trials = {"random": args.random_trials, "salsa": args.salsa_trials}.get(name, args.bo_trials)
        runs = [tune(task, target, method, trials, s) for s in (seeds[:1] if name == "loma" else seeds)]
        res[name] = {"runs": runs, "summary": summary(runs)}
        print(task.name, name, summary(runs), [r["best"] for r in runs], flush=True)
    return res


def resnet18(args, target, save) -> dict:
    from tunebench.datasets.models import MODEL_OPTIONS

    tasks, _ = target.load_tasks(MODEL_OPTIONS["resnet18"])
    first, last = (int(x) for x in args.layers.split(":")) if args.layers else (0, len(tasks))
    rows = []
    for task in tasks[first:last]:
        row = {"task": task.name, "shape": task.shape, "weight": task.weight}
        for method in ({"name": "mapspace_bo", "order_encoding": "scores"}, {"name": "random"}, {"name": "loma"},
                       {"name": "salsa"}):
            seeds = 1 if method["name"] in ("loma", "salsa") else args.layer_seeds
            trials = args.salsa_trials if method["name"] == "salsa" else args.layer_trials
            runs = [tune(task, target, method, trials, s) for s in range(seeds)]
            row[method["name"]] = {"best": [r["best"] for r in runs], "invalid": [r["invalid"] for r in runs],
                                   "report": runs[0]["report"]}
        print(row["task"], {k: v["best"] for k, v in row.items() if isinstance(v, dict) and "best" in v}, flush=True)
        rows.append(row)
        save({"layers": rows})  # after every layer: a run that is stopped keeps what it finished
    return {"layers": rows}


#: the four source memory configurations of the transfer run (the target keeps the default 256 / 64 KiB)
SOURCES = [{"scratchpad_kib": 64, "accumulator_kib": 16}, {"scratchpad_kib": 128, "accumulator_kib": 32},
           {"scratchpad_kib": 512, "accumulator_kib": 128}, {"scratchpad_kib": 1024, "accumulator_kib": 256}]


def transfer(args, target, tasks) -> dict:
    """§III-B: mapspace_bo pre-trained on four other memory configurations (``transfer_samples`` points
    each) against cold mapspace_bo, 20 trials on the default accelerator."""
    out = {}
    for task in tasks:
        res = {}
        for name, extra in (("transfer", {"transfer_from": SOURCES, "transfer_samples": args.transfer_samples}),
                            ("cold", {})):
            runs = [tune(task, target, {"name": "mapspace_bo", "sobol_samples": 0, **extra}, 20, s)
                    for s in range(args.seeds)]
            res[name] = {"runs": runs, "summary": summary(runs)}
            print(task.name, name, summary(runs), flush=True)
        out[task.name] = res
    return {"sources": SOURCES, "transfer_samples": args.transfer_samples, "tasks": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed-start", type=int, default=0, help="the first seed (runs split over processes)")
    ap.add_argument("--product", type=int, nargs=3, metavar=("M", "N", "K"), default=None,
                    help="an M x N x K matrix product (dense layer: batch M, out_features N, in_features K) in "
                         "place of model=accel_paper's two problems")
    ap.add_argument("--only", nargs="+", default=None,
                    choices=["mapspace_bo_scores", "mapspace_bo_categorical", "random", "loma", "salsa",
                             *TIMELOOP],
                    help="run only these methods")
    ap.add_argument("--bo-trials", type=int, default=100)
    ap.add_argument("--random-trials", type=int, default=4000)
    ap.add_argument("--encodings", nargs="+", default=["scores", "categorical"])
    ap.add_argument("--resnet18", action="store_true", help="the per-layer ResNet-18 table instead")
    ap.add_argument("--layer-trials", type=int, default=100)
    ap.add_argument("--layer-seeds", type=int, default=1)
    ap.add_argument("--layers", default=None, help="FIRST:LAST: only these layers of the ResNet-18 table (0-based, "
                    "LAST excluded), e.g. to run it in two processes")
    ap.add_argument("--transfer", action="store_true", help="the transfer run (§III-B) instead")
    ap.add_argument("--transfer-samples", type=int, default=24)
    ap.add_argument("--salsa-trials", type=int, default=3,
                    help="SALSA proposals per run (each one annealing run of 1000 model evaluations)")
    ap.add_argument("--gp-features", choices=["mapping", "encoding"], default=None,
                    help="mapspace_bo's method.gp_features for every BO run (default: the method's default)")
    add_out_args(ap, "accel_mapspace")
    args = ap.parse_args()
    if args.gp_features:
        BO_SETTINGS["gp_features"] = args.gp_features
    name = "accel_mapspace_resnet18" if args.resnet18 else "accel_mapspace_transfer" if args.transfer else "accel_mapspace"
    path = out_path(ap, args, name)

    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    target = AccelTarget(AccelSettings())
    load0 = loadavg()
    start = time.time()

    def save(results: dict) -> None:
        write_json(path, {**provenance(), "machine": {"cores": os.cpu_count(), "load_before": load0,
                                                      "load_after": loadavg()},
                          "args": vars(args), "wall_s": time.time() - start, "results": results})

    if args.resnet18:
        results = resnet18(args, target, save)
    elif args.transfer:
        results = transfer(args, target, target.load_tasks(MODEL_OPTIONS["accel_paper"])[0])
    elif args.product:
        results = paper(args, target, target.load_tasks(matmul_model(args.product))[0])
    else:
        results = paper(args, target, target.load_tasks(MODEL_OPTIONS["accel_paper"])[0])
    save(results)
    print("written", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
