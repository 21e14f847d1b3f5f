"""The headline method comparison on this CPU's measured spaces, replayed: every method on every shipped
space (``data/spaces/``, measured by ``python -m tunebench space measure``) over many seeds, scored with
[Willemsen-FGCS24]'s methodology score (0 = the calculated random-search baseline, 1 = the space's
optimum) over evaluations and over replayed search time, per space and aggregated over the spaces (95 %
bootstrap intervals over seeds), the fraction of the optimum at checkpoints, and which pairwise
differences of the aggregate score survive their intervals. Every seed's curve is kept in the result file.

    python benchmarks/replay_compare.py [--seeds 30] [--budget 200] [--methods random,autotvm,...]
        [--spaces data/spaces/a.jsonl,...] [--dgp-sources one|per-seed] [--jobs 2] [--publish]

dgp transfers within a layer group ([Sun-ICCV21] §4.2: kernel, padding, stride): on a space its history
is autotvm's records on the other spaces of the same group (the paper's source layers, tuned by AutoTVM;
their tuning and the pre-training on them are not on dgp's clock, the paper's accounting).
``--dgp-sources one`` (default): autotvm's seed-0 records, one source history for every seed, as a user
has one. The DGP is pre-trained on it once per space before the seeds run, on no seed's clock ([Sun-ICCV21]
§3.2: "The DGP preparation step is task-independent"), and the seeds vary the transfer and the search.
``--dgp-sources per-seed``: seed s gets autotvm's seed-s records, so the spread over seeds also covers
the source tuning and the pre-training; each seed pre-trains anew, on its own clock (~4x dgp's time). A
space alone in its group
has no source: dgp would be autotvm there, so it is not run on it, and dgp is compared on its group's
spaces only (the second aggregate). metaschedule is not among the methods: its schedules are traces, not
points of a template's knob space, so it cannot run on a measured space (``target=replay`` refuses it).
Replayed latencies do not depend on the machine's load; only the wall time does.

``python -m tunebench suite cpu --methods random,autotvm,chameleon,flextensor,dgp`` does the same comparison
as tracked runs, dgp included (its groups, sources and one-time preparation: :mod:`tunebench.report.suite_dgp`,
whose groups this script uses); this script keeps what only it has (``--dgp-sources per-seed``, the table
of the spaces, the checkpoints, every seed's curve in one file) and scores with the suite's code
(:mod:`tunebench.report.suite_score`).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, machine_info, out_path, provenance, write_json
from _replay import best_so_far, methodology_score, prepare, replay_run, summarize

METHODS = ("random", "autotvm", "chameleon", "flextensor", "dgp")  # dgp last: it transfers from autotvm's runs
CHECKPOINTS = (10, 25, 50, 100, 200)
HERE = os.path.dirname(os.path.abspath(__file__))


def _seed_curves(runs: list[tuple[list, list]]) -> list:
    from tunebench.report.suite_score import SeedCurve

    return [SeedCurve(np.asarray(c, dtype=np.float64), np.asarray(t, dtype=np.float64)) for c, t in runs]


def aggregate(done: dict, spaces: dict, budget: int, names: list[str], over: str = "evals") -> dict:
    """Per method that ran on every space of ``names`` (``done``: (space, method) -> its seeds' (curve,
    clock) runs first): the score over evaluations or over replayed time aggregated over those spaces, as
    ``python -m tunebench suite`` computes it (:func:`tunebench.report.suite_score.method_score`)."""
    from tunebench.report.suite_score import method_score

    methods = [m for n, m in done if n == names[0] and all((o, m) in done for o in names)]
    return {m: method_score({n: _seed_curves(done[(n, m)][0]) for n in names}, spaces, budget, over)
            for m in methods}


def dgp_history(name: str, groups: dict, autotvm_runs: dict, seed: int):
    """dgp's source records for space ``name``: autotvm's seed-``seed`` records on the other spaces of the
    group (None when the space is alone in its group)."""
    from tunebench.history import History
    from tunebench.record_file import record_line

    others = [n for n in groups if n != name and groups[n] == groups[name]]
    if not others:
        return None
    hist = History()
    for n in others:
        task, result = autotvm_runs[(n, seed)]
        hist.add_records([record_line(m, task) for m in result.measurements], origin="loaded")
    return hist


def space_row(name: str, measured) -> dict:
    """What a space is: its layer, configs measured of the template's, failed and noisy ones, the optimum
    and median latency, the minutes its measurement took (the recorded build + run seconds)."""
    meta = measured.meta
    lat = sorted(r.latency_s for r in measured.rows if r.latency_s is not None)
    return {"name": name, "layer": (meta.get("task") or {}).get("shape", {}), "configs": measured.space.size,
            "space_size": meta.get("space_size", measured.space.size),
            "failed": sum(r.latency_s is None for r in measured.rows), "noisy": sum(r.noisy for r in measured.rows),
            "optimum_ms": lat[0] * 1e3, "median_ms": lat[len(lat) // 2] * 1e3,
            "gflops": measured.flops / lat[0] / 1e9 if measured.flops else None,
            "minutes": sum(r.compile_s + r.benchmark_s for r in measured.rows) / 60,
            "date": meta.get("date"), "commit": (meta.get("commit") or "")[:7]}


def markdown(result: dict) -> str:
    """The spaces, the aggregate tables and the per-space scores, for docs/RESULTS.md."""
    lines = ["| space | configs (of the template's) | failed | noisy | optimum [ms] | median [ms] | GFLOP/s at the "
             "optimum | measuring [min] |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['configs']} ({r['space_size']}) | {r['failed']} | {r['noisy']} | "
              f"{r['optimum_ms']:.4f} | {r['median_ms']:.4f} | {r['gflops'] or 0:.1f} | {r['minutes']:.1f} |"
              for r in result["space_rows"]]
    for title, agg in result["aggregates"].items():
        names = agg["spaces"]
        lines += ["", f"{title}:", "", "| method | score over evaluations [95 % CI] | score over time [95 % CI] | " +
                  " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
        for m, a in agg["evals"].items():
            t = agg["time"][m]
            cells = [f"{result['per_space'][n][m]['score']['mean']:.2f}" for n in names]
            lines.append(f"| {m} | {a['mean']:.3f} [{a['ci'][0]:.3f}, {a['ci'][1]:.3f}] | {t['mean']:.3f} "
                         f"[{t['ci'][0]:.3f}, {t['ci'][1]:.3f}] | " + " | ".join(cells) + " |")
        lines += ["", "| pair | difference [95 % CI] | survives |", "|---|---|---|"]
        lines += [f"| {d['a']} − {d['b']} | {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] | "
                  f"{'yes' if d['survives'] else 'no'} |" for d in agg["differences"]]
    return "\n".join(lines)


def dgp_histories(name: str, groups: dict, autotvm_runs: dict, args) -> list:
    """Every seed's source history (module docstring: ``--dgp-sources``). With ``one`` every seed gets the
    same History object, whose model cache then keeps the DGP pre-trained by the first seed."""
    if args.dgp_sources == "one":
        return [dgp_history(name, groups, autotvm_runs, 0)] * args.seeds
    return [dgp_history(name, groups, autotvm_runs, s) for s in range(args.seeds)]


def improvements(curve: list[float], times: list[float]) -> dict:
    """A seed's best-so-far curve and replay clock, losslessly for the scores: its length, its final clock
    and ``[evaluation, clock s, best ms]`` at every evaluation where the best improved (the curve is
    constant in between)."""
    steps = [[i + 1, round(times[i], 4), curve[i]] for i in range(len(curve))
             if i == 0 or curve[i] < curve[i - 1]]
    return {"evaluations": len(curve), "end_s": round(times[-1], 4) if times else 0.0, "steps": steps}


def run_unit(path: str, method: str, budget: int, seeds: int, histories=None) -> tuple[list, float, list]:
    """``seeds`` runs of one method on one space: the best-so-far curves and clocks, the wall seconds, and
    autotvm's tasks and results (dgp's sources)."""
    tic, runs, kept = time.time(), [], []
    if histories and all(h is histories[0] for h in histories[1:]):  # one shared source history
        prepare(path, method, histories[0])  # dgp's one pre-training: a preparation, on no seed's clock
    for seed in range(seeds):
        task, res = replay_run(path, method, budget, seed, history=histories[seed] if histories else None)
        runs.append(best_so_far(res))
        if method == "autotvm":
            kept.append((task, res))
    return runs, time.time() - tic, kept


def run_units(units: list, args) -> dict:
    """Every ``(space, path, method, histories)`` unit, ``args.jobs`` at a time; by ``(space, method)``."""
    from concurrent.futures import ProcessPoolExecutor

    units = sorted(units, key=lambda u: u[2] != "chameleon")  # the slowest first: the pool ends together
    if args.jobs <= 1:
        return {(n, m): run_unit(p, m, args.budget, args.seeds, h) for n, p, m, h in units}
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {(n, m): pool.submit(run_unit, p, m, args.budget, args.seeds, h) for n, p, m, h in units}
        return {key: f.result() for key, f in futures.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--budget", type=int, default=200, help="evaluations per run")
    ap.add_argument("--methods", default=",".join(METHODS), help="tunebench methods (comma-separated)")
    ap.add_argument("--spaces", default=None, help="space files (comma-separated); default: data/spaces/*.jsonl*")
    ap.add_argument("--jobs", type=int, default=1, help="processes running (method, space) units side by side")
    ap.add_argument("--dgp-sources", choices=("one", "per-seed"), default="one",
                    help="dgp's source history: autotvm's seed-0 records for every seed (one pre-training per "
                         "space), or seed s's for seed s (module docstring)")
    add_out_args(ap, "replay_compare")
    args = ap.parse_args()
    from tunebench.datasets.space_file import read_measured
    from tunebench.report.suite_dgp import space_group
    from tunebench.report.suite_score import differences, method_score

    paths = args.spaces.split(",") if args.spaces else sorted(glob.glob(os.path.join(HERE, "..", "data", "spaces",
                                                                                      "*.jsonl*")))
    paths = {os.path.basename(p).split(".jsonl")[0]: os.path.abspath(p) for p in paths}
    measured = {n: read_measured(p) for n, p in paths.items()}
    spaces = {n: m.stats(unit=1e3) for n, m in measured.items()}  # latencies in ms, as the curves
    rng, load0, t0 = np.random.default_rng(0), loadavg(), time.time()
    per_space: dict = {n: {} for n in paths}
    groups = {n: space_group(p) for n, p in paths.items()}  # dgp's groups, as the suite's (tunebench.report.suite_dgp)
    methods = args.methods.split(",")
    done = run_units([(n, paths[n], m, None) for m in methods if m != "dgp" for n in paths], args)
    autotvm_runs = {(n, seed): kept for (n, m), (_, _, runs) in done.items() if m == "autotvm"
                    for seed, kept in enumerate(runs)}
    if "dgp" in methods:  # alone in its group a space has no source: dgp would be autotvm there
        units = [(n, paths[n], "dgp", dgp_histories(n, groups, autotvm_runs, args))
                 for n in paths if any(groups[o] == groups[n] for o in paths if o != n)]
        done.update(run_units(units, args))
    for (p, m), (runs, wall, _) in done.items():
        curves = [c for c, _ in runs]
        per_space[p][m] = {"checkpoints": summarize(curves, spaces[p].optimum, rng, CHECKPOINTS),
                           "score": methodology_score(curves, spaces[p], args.budget),
                           "time_score": method_score({p: _seed_curves(runs)}, spaces, args.budget, "time"),
                           "wall_s": wall, "runs": [improvements(c, t) for c, t in runs]}
        print(f"{p} {m}: score {per_space[p][m]['score']['mean']:.3f} ({wall:.1f} s)", flush=True)
    aggregates = {}
    dgp_spaces = [n for n in paths if "dgp" in per_space[n]]
    for title, names in (("All spaces", list(paths)), ("dgp's group (spaces with a source layer)", dgp_spaces)):
        if not names:
            continue
        ev = aggregate(done, spaces, args.budget, names)
        aggregates[title] = {"spaces": names, "evals": ev, "time": aggregate(done, spaces, args.budget, names, "time"),
                             "differences": differences(ev)}
    result = {"spaces": list(paths), "optimum_ms": {p: spaces[p].optimum for p in paths},
              "dgp_sources": args.dgp_sources if "dgp" in methods else None,
              "space_rows": [space_row(n, m) for n, m in measured.items()], "seeds": args.seeds,
              "budget": args.budget, "per_space": per_space, "aggregates": aggregates,
              "wall_s": time.time() - t0, "loadavg": [load0, loadavg()], "machine": machine_info(), **provenance()}
    result["markdown"] = markdown(result)
    print(result["markdown"], f"\nwall {result['wall_s']:.0f} s", flush=True)
    write_json(out_path(ap, args, "replay_compare"), result)


if __name__ == "__main__":
    main()
