"""External check of the replay: Kernel Tuner's own strategies in its simulation mode and tunebench's
methods on ``target=replay``, on the same Kernel Tuner cache, at the same evaluation budgets, over the
same seeds. Random search must agree within the interval (that checks the replay itself); the table
gives every method's best latency after k evaluations, mean over seeds with a 95 % bootstrap interval,
the fraction of the optimum (optimum / mean best), and [Willemsen-FGCS24]'s methodology score over
evaluations 1..budget (0: the calculated random baseline, 1: the optimum) with its interval; every
seed's best-so-far curve is kept in the result file.

    python benchmarks/kernel_tuner_check.py [--seeds 30] [--budget 100] [--cache kernel_tuner/<file>] [--publish]

``--cache``: any shipped cache (``kernel_tuner/convolution_milo_A100.json.gz``, ...) or a path; the result
file is then ``kernel_tuner_check_<cache name>.json``.

Needs the bench extra (``make install EXTRAS=test,bench``: kernel-tuner). Kernel Tuner's search space is
restricted to the cached configurations, which is tunebench's replay space (the cache lists 2,442 of
the 5,120 combinations).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, machine_info, out_path, provenance, write_json
from _replay import methodology_score, summarize, tunebench_curve

CACHE = "kernel_tuner/convolution_MI50.json.gz"
KT_STRATEGIES = ("random_sample", "simulated_annealing", "genetic_algorithm", "greedy_ils", "mls", "diff_evo")
TB_METHODS = {"random": {}, "autotvm": {}, "flextensor": {}}  # tunebench methods, their default settings
CHECKPOINTS = (10, 25, 50, 100, 200)
_LISTED: dict = {}  # keys (parameter order) and the cached configurations: Kernel Tuner's restriction


def in_cache(params: dict) -> bool:
    """Kernel Tuner restriction: the configuration is in the cache (a function: Kernel Tuner parses lambdas)."""
    return tuple(params[k] for k in _LISTED["keys"]) in _LISTED["configs"]


def kernel_tuner_curve(cache: dict, path: str, strategy: str, budget: int, seed: int,
                       options: dict | None = None) -> list[float]:
    """Best time so far (ms) per unique evaluation of one Kernel Tuner strategy in simulation mode
    (``options``: the strategy's hyperparameters; the rest at Kernel Tuner's defaults)."""
    from kernel_tuner import tune_kernel

    keys = cache["tune_params_keys"]
    _LISTED.update(keys=keys, configs={tuple(e[k] for k in keys) for e in cache["cache"].values()})
    results, _ = tune_kernel(cache["kernel_name"], "", tuple(cache["problem_size"]), [], cache["tune_params"],
                             restrictions=in_cache, strategy=strategy,
                             strategy_options={**(options or {}), "max_fevals": budget}, cache=path, simulation_mode=True,
                             seed=seed, quiet=True, verbose=False)
    seen, times = set(), []
    for r in results:  # unique configurations, in the order evaluated
        key = tuple(r[k] for k in keys)
        if key not in seen:
            seen.add(key)
            times.append(r["time"] if isinstance(r["time"], (int, float)) else np.inf)
    return list(np.minimum.accumulate(times[:budget]))


def calculated_random(cache_path: str = CACHE) -> dict:
    """The expected best of random search without replacement at each checkpoint, computed from the
    cache (:func:`tunebench.protocol.stats.expected_best_of_random`): what both random rows must match."""
    from tunebench.datasets.kt_cache import read_cache
    from tunebench.datasets.measured import resolve
    from tunebench.protocol.stats import expected_best_of_random

    ms = [r.latency_s * 1e3 if r.latency_s is not None else np.inf for r in read_cache(resolve(cache_path)).rows]
    best = min(ms)
    return {k: {"mean_ms": expected_best_of_random(ms, k), "fraction_of_optimum": best / expected_best_of_random(ms, k)}
            for k in CHECKPOINTS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--budget", type=int, default=200, help="evaluations per run")
    ap.add_argument("--strategies", default=",".join(KT_STRATEGIES), help="Kernel Tuner strategies (comma-separated)")
    ap.add_argument("--methods", default=",".join(TB_METHODS), help="tunebench methods (comma-separated)")
    ap.add_argument("--cache", default=CACHE, help="the Kernel Tuner cache (a shipped one under data/, or a path)")
    add_out_args(ap, "kernel_tuner_check")
    args = ap.parse_args()
    from tunebench.datasets.kt_cache import read_cache
    from tunebench.datasets.measured import resolve

    name = "kernel_tuner_check" + ("" if args.cache == CACHE else "_" + os.path.basename(args.cache).split(".")[0])
    cache = json.load(gzip.open(resolve(args.cache)))
    space = read_cache(resolve(args.cache)).stats(unit=1e3)  # latencies in ms, as the curves
    optimum = space.optimum
    rng = np.random.default_rng(0)

    def save(rows: dict) -> None:  # after every row: a long run that is stopped keeps what it finished
        write_json(out_path(ap, args, name),
                   {"cache": args.cache, "optimum_ms": optimum, "seeds": args.seeds, "budget": args.budget, "rows": rows,
                    "wall_s": time.time() - t0, "loadavg": [load0, loadavg()], "machine": machine_info(),
                    **provenance()})

    rows, load0, t0 = ({"calculated:random": {"checkpoints": calculated_random(args.cache), "wall_s": 0.0}}, loadavg(),
                       time.time())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cache.json")
        json.dump(cache, open(path, "w"))
        for s in args.strategies.split(","):
            tic = time.time()
            curves = [kernel_tuner_curve(cache, path, s, args.budget, seed) for seed in range(args.seeds)]
            rows[f"kernel_tuner:{s}"] = {"checkpoints": summarize(curves, optimum, rng, CHECKPOINTS), "wall_s": time.time() - tic,
                                         "score": methodology_score(curves, space, args.budget), "curves": curves}
            print(f"kernel_tuner {s}: {rows[f'kernel_tuner:{s}']['checkpoints']}", flush=True)
            save(rows)
    for m in args.methods.split(","):
        tic = time.time()
        curves = [tunebench_curve(args.cache, m, args.budget, seed, TB_METHODS[m]) for seed in range(args.seeds)]
        rows[f"tunebench:{m}"] = {"checkpoints": summarize(curves, optimum, rng, CHECKPOINTS), "wall_s": time.time() - tic,
                                  "score": methodology_score(curves, space, args.budget), "curves": curves}
        print(f"tunebench {m}: {rows[f'tunebench:{m}']['checkpoints']}", flush=True)
        save(rows)


if __name__ == "__main__":
    main()
