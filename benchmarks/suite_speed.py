"""Where a suite run's time goes, per method: the whole tracked run (``python -m tunebench suite``'s
``run_one``: composing, MLflow, records, the loop, the replay) against the time inside the method's own
``setup``, ``ask`` and ``tell``, per evaluation, on measured spaces.

    python benchmarks/suite_speed.py [--methods random,autotvm,chameleon,flextensor] [--seeds 5]
        [--budget 200] [--spaces kernel_tuner/convolution_milo_A100.json.gz,...] [--publish]

Per (space, method): wall and CPU seconds per run (after one warm-up run that imports everything),
seconds inside the method per evaluation, and the harness's share: (run wall - time inside the method) /
evaluations, fixed costs per run (the MLflow run, its files) included. One process, runs one after another;
check the load (``loadavg`` in the result file) before trusting the wall times. Numbers a method reports
in seconds (keys ``*_s`` of its ``report()``, e.g. dgp's ``map_s`` and ``transfer_s``) are kept per run as
``report_<key>``. dgp runs as in the gpu suite: its sources (the other gpu-set spaces of its group) tuned by
autotvm's seed 0, its deep GP pre-trained on their records once (the suite's preparation, timed:
``preparation``), then its seeds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, machine_info, out_path, provenance, timed_inside, write_json

SPACES = "kernel_tuner/convolution_milo_A100.json.gz,kernel_tuner/dedispersion_milo_A100.json.gz"
METHODS = "random,autotvm,chameleon,flextensor"


def measure(space: str, method: str, seeds: int, budget: int) -> dict:
    """Seeds 0..N-1 of one method on one space through the suite's tracked run, after a warm-up."""
    from tunebench.datasets.measured import resolve
    from tunebench.methods import method_class
    from tunebench.report.suite import compose_units, run_one

    args = argparse.Namespace(methods=method, budget=budget, experiment="suite-speed")
    data = compose_units(args, {"s": os.path.abspath(resolve(space))})[("s", method)]
    prep = None
    if data["method"]["name"] == "dgp":
        data, prep = dgp_prepared(space, method, budget)
    inside, reports = [0.0], []
    cls = method_class(data["method"]["name"])
    timed_inside(cls, inside, ("setup", "ask", "tell"))
    keep_reports(cls, reports)
    run_one(data, seeds + 1)  # warm-up: imports, the space read
    rows = []
    for seed in range(seeds):
        inside[0], t0, c0 = 0.0, time.perf_counter(), time.process_time()
        reports.clear()
        records = run_one(data, seed)[1]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = len(records)
        rows.append({"wall_s": wall, "cpu_s": cpu, "method_s": inside[0], "evaluations": n,
                     "harness_ms_per_eval": (wall - inside[0]) / n * 1e3,
                     **{f"report_{k}": float(v) for r in reports for k, v in r.items()
                        if k.endswith("_s") and isinstance(v, (int, float))}})
    med = {k: float(np.median([r[k] for r in rows if k in r])) for k in rows[0]}
    out = {"space": space, "method": method, "median": med, "runs": rows}
    return {**out, "preparation": prep} if prep else out


def keep_reports(cls, reports: list) -> None:
    """Every ``cls.report()`` of the runs goes to ``reports`` too (dgp's ``map_s``, ``transfer_s``)."""
    original = cls.report

    def report(self, _original=original):
        out = _original(self)
        reports.append(dict(out))
        return out

    cls.report = report


def dgp_prepared(space: str, method: str, budget: int) -> tuple[dict, dict]:
    """dgp's unit on ``space`` as the gpu suite runs it: its sources (the other spaces of the gpu set in its
    group) tuned by autotvm's seed 0, its deep GP pre-trained on their records (the suite's preparation,
    timed: ``preparation``) and read by every run."""
    from tunebench.datasets.measured import resolve
    from tunebench.datasets.shipped import space_set
    from tunebench.report import suite_dgp
    from tunebench.report.suite import compose_units, run_one

    path = os.path.abspath(resolve(space))
    paths = {os.path.basename(p).split(".json")[0]: p for p in space_set("gpu")}
    name = next(n for n, p in paths.items() if os.path.samefile(p, path))

    def compose(m, some):
        return compose_units(argparse.Namespace(methods=m, budget=budget, experiment="suite-speed"), some)

    units = compose(method, paths)
    plan = suite_dgp.plan(units, paths, compose)
    files = [run_one(plan.extra[(s, plan.source_method)], 0)[2] for s in plan.sources[name]]
    history = ",".join(files)
    target = suite_dgp.prepared_path(plan, name, history)
    prep = suite_dgp.prepare(units[(name, method)], history, target)
    return suite_dgp.with_preparation(units[(name, method)], history, target), prep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--spaces", default=SPACES)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=200)
    add_out_args(ap, "suite_speed")
    args = ap.parse_args()
    out_file = os.path.abspath(out_path(ap, args, "suite_speed"))
    load0 = loadavg()
    os.chdir(tempfile.mkdtemp(prefix="suite_speed_"))  # the runs' MLflow store and records: not kept
    cells = []
    for space in args.spaces.split(","):
        for method in args.methods.split(","):
            cell = measure(space, method, args.seeds, args.budget)
            m = cell["median"]
            print(f"{os.path.basename(space).split('.')[0]} {method}: {m['wall_s']:.3f} s/run wall, "
                  f"{m['cpu_s']:.3f} s cpu, method {m['method_s'] / m['evaluations'] * 1e3:.2f} ms/eval, "
                  f"harness {m['harness_ms_per_eval']:.2f} ms/eval ({m['evaluations']:.0f} evals)", flush=True)
            if cell.get("preparation"):
                print(f"  dgp preparation: fit {cell['preparation']['fit_s']:.2f} s, "
                      f"{cell['preparation']['seconds']:.2f} s in all", flush=True)
            cells.append(cell)
    write_json(out_file, {"seeds": args.seeds, "budget": args.budget, "cells": cells,
                          "loadavg": [load0, loadavg()], "machine": machine_info(), **provenance()})


if __name__ == "__main__":
    main()
