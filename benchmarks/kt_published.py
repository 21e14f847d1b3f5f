"""Kernel Tuner's strategies against a published table: [Willemsen-HPT25]'s hyperparameter data set (the
benchmark hub's ``hyperparametertuning/cachefiles/hyperparamtuning_paper_bruteforce_<strategy>.json``)
records [Willemsen-FGCS24]'s aggregate methodology score of six Kernel Tuner strategies at every
hyperparameter configuration of a grid; its "Default" configuration (the hub's
``hyperparametertuning/algorithms/metatuning_<strategy>.json``) is the number quoted here. This script
re-runs those strategies, at that configuration and at Kernel Tuner 1.5's own defaults, in Kernel
Tuner's simulation mode on the shipped benchmark-hub caches, scores them the way tunebench scores its
methods (evaluations 1..budget), and puts tunebench's methods beside them (their per-seed scores from
the suite's result file, the same seeds and score).

    python benchmarks/kt_published.py run --caches kernel_tuner/convolution_milo_A100.json.gz,... [--seeds 25]
    python benchmarks/kt_published.py report [--publish]

``run`` writes one file per cache (``kt_published_<cache name>.json``: per strategy the checkpoints, the
score with its per-seed values, how many evaluations the runs made); ``report`` reads them with the
suite's result file and writes ``kt_published.json`` (per space and aggregated over spaces: the mean over
spaces of each seed's score, which is [Willemsen-FGCS24]'s aggregate, with a 95 % bootstrap interval) and
prints the Markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS, add_out_args, loadavg, machine_info, out_path, provenance, spearman, write_json
from _replay import methodology_score, summarize

HUB = ("AutoTuningAssociation/benchmark_hub", "8eeb99e7179e6838af95d392ac6c60cebfd8c434")
#: Per strategy: the hub's "Default" hyperparameters, the score recorded for them, and the lowest,
#: median and highest score over the recorded grid (n configurations). Setting of those runs (Kernel
#: Tuner's hypertuner defaults of May 2025): 12 spaces (A100, A4000, MI250X x convolution_milo,
#: dedispersion_milo, hotspot_milo, gemm_milo), 25 repeats, the score over replayed time from the 1 %
#: to the 95 % cutoff of random search.
PUBLISHED = {
    "genetic_algorithm": ({"method": "uniform", "popsize": 20, "maxiter": 100, "mutation_chance": 10},
                          0.353, (-0.346, 0.336, 0.517), 108),
    "simulated_annealing": ({"T": 1.0, "T_min": 0.001, "alpha": 0.995, "maxiter": 2}, -0.118,
                            (-0.281, -0.125, 0.061), 81),
    "dual_annealing": ({"method": "COBYLA"}, -0.234, (-1.011, -0.49, -0.234), 8),
    "pso": ({"popsize": 20, "maxiter": 100, "c1": 2.0, "c2": 1.0}, -0.589, (-1.803, -0.688, -0.327), 81),
    "diff_evo": ({"method": "randtobest1bin", "popsize": 20, "maxiter": 100}, -0.618, (-1.315, -0.782, -0.419), 90),
    "firefly_algorithm": ({"popsize": 20, "maxiter": 100, "B0": 1.0, "gamma": 0.25, "alpha": 0.2}, -0.77,
                          (-1.837, -0.741, -0.271), 243),
}
#: Kernel Tuner strategies run at Kernel Tuner 1.5's defaults as well (no published score).
EXTRA = ("random_sample", "bayes_opt")
PUBLISHED_GPUS = ("A100", "A4000", "MI250X")
SUITE_FILE = os.path.join(RESULTS, "suite_gpu_30seeds.json")
CHECKPOINTS = (10, 50, 100, 200)


def settings() -> dict[str, tuple[str, dict]]:
    """The rows to run: ``<strategy>`` at Kernel Tuner 1.5's defaults and ``<strategy>@hub`` at the
    hub's Default hyperparameters (row name -> strategy, options)."""
    rows = {s: (s, {}) for s in (*PUBLISHED, *EXTRA)}
    rows.update({f"{s}@hub": (s, dict(p[0])) for s, p in PUBLISHED.items()})
    return rows


def aggregate(per_space: dict[str, list[float]], seed: int = 0) -> dict:
    """[Willemsen-FGCS24]'s aggregate from per-space per-seed scores (space -> one score per seed, seed
    i of every space matched): each seed's mean over the spaces, then the mean over seeds with a 95 %
    bootstrap interval. Equal to the score of the seeds' curves averaged over the spaces when no
    standardised point is undefined (the score is a mean over the range, a linear operation)."""
    from tunebench.protocol.stats import bootstrap_ci

    seeds = min(len(v) for v in per_space.values())
    rows = np.array([[per_space[n][s] for n in per_space] for s in range(seeds)], dtype=float)
    per_seed = [float(np.mean(r)) if np.all(np.isfinite(r)) else math.nan for r in rows]
    vals = np.array([v for v in per_seed if math.isfinite(v)])
    low, high = bootstrap_ci(vals, seed=seed)
    return {"mean": float(vals.mean()) if len(vals) else math.nan, "ci": [low, high], "per_seed": per_seed,
            "spaces": list(per_space)}


def rank_agreement(published: dict[str, float], ours: dict[str, float]) -> float:
    """Spearman's rank correlation between two scorings of the same strategies (their common keys)."""
    keys = [k for k in published if k in ours and math.isfinite(ours[k])]
    return spearman([published[k] for k in keys], [ours[k] for k in keys], min_n=3)


def space_name(cache: str) -> str:
    return os.path.basename(cache).split(".")[0]


def run(args, ap) -> None:
    from kernel_tuner_check import kernel_tuner_curve

    from tunebench.datasets.kt_cache import read_cache
    from tunebench.datasets.measured import resolve

    rows_to_run = settings()
    wanted = [r for r in (args.rows.split(",") if args.rows else rows_to_run) if r]
    for cache_rel in [c for c in args.caches.split(",") if c]:
        name = "kt_published_" + space_name(cache_rel)
        cache = json.load(gzip.open(resolve(cache_rel)))
        space = read_cache(resolve(cache_rel)).stats(unit=1e3)
        rng, out, load0, t0 = np.random.default_rng(0), {}, loadavg(), time.time()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cache.json")
            json.dump(cache, open(path, "w"))
            for row in wanted:
                strategy, options = rows_to_run[row]
                tic = time.time()
                curves = [kernel_tuner_curve(cache, path, strategy, args.budget, seed, options)
                          for seed in range(args.seeds)]
                out[row] = {"strategy": strategy, "options": options, "wall_s": time.time() - tic,
                            "evaluations": [len(c) for c in curves],
                            "checkpoints": summarize(curves, space.optimum, rng, CHECKPOINTS),
                            "score": methodology_score(curves, space, args.budget)}
                print(f"{space_name(cache_rel)} {row}: score {out[row]['score']['mean']:.3f} "
                      f"({out[row]['wall_s']:.0f} s)", flush=True)
                write_json(os.path.join(args.dir, name + ".json"),
                           {"cache": cache_rel, "optimum_ms": space.optimum, "seeds": args.seeds,
                            "budget": args.budget, "rows": out, "wall_s": time.time() - t0,
                            "loadavg": [load0, loadavg()], "machine": machine_info(), **provenance()})


def _cell(s: dict | None) -> str:
    if not s or not math.isfinite(s["mean"]):
        return "n/a"
    return f"{s['mean']:.2f} [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}]"


def report(args, ap) -> None:
    files = sorted(f for f in os.listdir(args.dir) if f.startswith("kt_published_") and f.endswith(".json"))
    per = {f[len("kt_published_"):-5]: json.load(open(os.path.join(args.dir, f))) for f in files}
    suite = json.load(open(SUITE_FILE))
    spaces = [n for n in per if n in suite["scores"]["per_space"]]
    rows: dict[str, dict[str, list[float]]] = {}
    evals: dict[tuple[str, str], float] = {}
    for n in spaces:
        for r, v in per[n]["rows"].items():
            rows.setdefault(f"kernel_tuner:{r}", {})[n] = v["score"]["per_seed"]
            evals[(f"kernel_tuner:{r}", n)] = float(np.mean(v["evaluations"]))
        for m in suite["methods"]:
            rows.setdefault(f"tunebench:{m}", {})[n] = suite["scores"]["per_space"][n][m]["evals"]["per_seed"]
    groups = {"published GPUs": [n for n in spaces if n.rsplit("_", 1)[1] in PUBLISHED_GPUS], "all": spaces}
    agg = {g: {r: aggregate({n: rows[r][n] for n in names if n in rows[r]}) for r in rows
               if all(n in rows[r] for n in names)} for g, names in groups.items() if names}
    published = {s: p[1] for s, p in PUBLISHED.items()}
    ranks = {g: {"hub": rank_agreement(published, {s: a[f"kernel_tuner:{s}@hub"]["mean"] for s in PUBLISHED
                                                   if f"kernel_tuner:{s}@hub" in a}),
                 "kt15": rank_agreement(published, {s: a[f"kernel_tuner:{s}"]["mean"] for s in PUBLISHED
                                                    if f"kernel_tuner:{s}" in a})} for g, a in agg.items()}
    result = {"spaces": spaces, "published": {s: {"hyperparameters": p[0], "score": p[1], "grid_min_median_max": p[2],
                                                  "grid_size": p[3]} for s, p in PUBLISHED.items()},
              "published_origin": {"repository": HUB[0], "commit": HUB[1],
                                   "paths": "hyperparametertuning/cachefiles/hyperparamtuning_paper_bruteforce_<strategy>"
                                            ".json, hyperparametertuning/algorithms/metatuning_<strategy>.json"},
              "tunebench_from": {"file": "benchmarks/results/suite_gpu_30seeds.json", "commit": suite.get("commit")},
              "per_space": {r: {n: {"mean": float(np.nanmean(v)), "per_seed": v,
                                    "evaluations": evals.get((r, n))} for n, v in by.items()}
                            for r, by in rows.items()},
              "aggregate": agg, "spearman_vs_published": ranks, "run_files": files,
              "runs": {n: {"date": p["date"], "commit": p["git_commit"], "wall_s": p["wall_s"], "loadavg": p["loadavg"],
                           "seeds": p["seeds"], "budget": p["budget"]} for n, p in per.items()}, **provenance()}
    write_json(out_path(ap, args, "kt_published"), result)
    print(markdown(result))


def markdown(result: dict) -> str:
    agg, pub = result["aggregate"], result["published"]
    groups = list(agg)
    lines = ["| row | published (12 spaces, time range) | " + " | ".join(f"ours: {g} ({len(agg[g][next(iter(agg[g]))]['spaces'])}"
                                                                         " spaces)" for g in groups) + " |",
             "|---|---|" + "---|" * len(groups)]
    for r in sorted(agg[groups[0]], key=lambda r: -agg[groups[0]][r]["mean"]):
        s = r.split(":", 1)[1].removesuffix("@hub")
        p = f"{pub[s]['score']:+.3f}" if r.endswith("@hub") and s in pub else "—"
        lines.append(f"| {r} | {p} | " + " | ".join(_cell(agg[g].get(r)) for g in groups) + " |")
    spaces = result["spaces"]
    lines += ["", "Per space, score over evaluations 1-budget (mean over seeds; evaluations a run made, mean):", "",
              "| row | " + " | ".join(spaces) + " |", "|---|" + "---|" * len(spaces)]
    for r, by in result["per_space"].items():
        lines.append(f"| {r} | " + " | ".join(f"{by[n]['mean']:.2f}" + (f" ({by[n]['evaluations']:.0f})"
                                                                      if by[n].get("evaluations") else "")
                                              if n in by else "—" for n in spaces) + " |")
    lines += ["", "Spearman rank correlation with the published scores, six strategies: "
              + "; ".join(f"{g}: hub defaults {v['hub']:+.2f}, Kernel Tuner 1.5 defaults {v['kt15']:+.2f}"
                          for g, v in result["spearman_vs_published"].items())]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("run", "report"))
    ap.add_argument("--caches", default="", help="run: the caches (comma-separated, shipped names or paths)")
    ap.add_argument("--rows", default="", help=f"run: rows to run (default all: {', '.join(settings())})")
    ap.add_argument("--seeds", type=int, default=25, help="run: seeds 0..N-1 (the published runs used 25 repeats)")
    ap.add_argument("--budget", type=int, default=200, help="run: evaluations per run")
    ap.add_argument("--dir", default=os.path.join(RESULTS, "local"), help="folder of the per-cache files")
    add_out_args(ap, "kt_published")
    args = ap.parse_args()
    bad = [r for r in args.rows.split(",") if r and r not in settings()]
    if bad:
        ap.error(f"--rows {bad[0]!r} is unknown; valid: {', '.join(settings())}")
    (run if args.what == "run" else report)(args, ap)


if __name__ == "__main__":
    main()
