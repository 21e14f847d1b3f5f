"""Where a suite run's time goes, per method: the whole tracked run (``python -m tunebench suite``'s
``run_one``: composing, MLflow, records, the loop, the replay) against the time inside the method's own
``setup``, ``ask`` and ``tell``, per evaluation, on measured spaces.

    python benchmarks/suite_speed.py [--methods random,autotvm,chameleon,flextensor] [--seeds 5]
        [--budget 200] [--spaces kernel_tuner/convolution_milo_A100.json.gz,...] [--publish]

Per (space, method): wall and CPU seconds per run (after one warm-up run that imports everything),
seconds inside the method per evaluation, and the harness's share: (run wall - time inside the method) /
evaluations, fixed costs per run (the MLflow run, its files) included. One process, runs one after another;
check the load (``loadavg`` in the result file) before trusting the wall times.
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
    inside = [0.0]
    timed_inside(method_class(data["method"]["name"]), inside, ("setup", "ask", "tell"))
    run_one(data, seeds + 1)  # warm-up: imports, the space read
    rows = []
    for seed in range(seeds):
        inside[0], t0, c0 = 0.0, time.perf_counter(), time.process_time()
        _, records, _ = run_one(data, seed)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = len(records)
        rows.append({"wall_s": wall, "cpu_s": cpu, "method_s": inside[0], "evaluations": n,
                     "harness_ms_per_eval": (wall - inside[0]) / n * 1e3})
    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    return {"space": space, "method": method, "median": med, "runs": rows}


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
            cells.append(cell)
    write_json(out_file, {"seeds": args.seeds, "budget": args.budget, "cells": cells,
                          "loadavg": [load0, loadavg()], "machine": machine_info(), **provenance()})


if __name__ == "__main__":
    main()
