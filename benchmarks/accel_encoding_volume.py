"""How much of ``mapspace_bo``'s encoding each objective value occupies ([Dinh-MLArchSys23] §II, eqs. 1-3),
on ``model=accel_paper``'s tasks (or an M x N x K matrix product) on ``target=accel``'s default accelerator.

Every point of the unit cube decodes to a valid mapping; many points decode to one mapping and many mappings
share one energy. Scrambled Sobol points are decoded, each distinct mapping is evaluated once by ZigZag, and
the share of the points per energy value is printed, lowest first: the chance that one uniform point of the
cube lands on that value, and so what random search in the encoding would reach in n points
(1 - (1 - share)^n). A BO run that does no better than that on a problem has learnt nothing about it.

Usage: python benchmarks/accel_encoding_volume.py [--points 20000] [--encoding scores] [--levels 6]
           [--product M N K] [--out PATH | --publish]
  default output: benchmarks/results/local/accel_encoding_volume.json (untracked).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, matmul_model, out_path, provenance, run_main, write_json


def volumes(task, target, encoding: str, points: int, levels: int) -> dict:
    """The lowest ``levels`` energies (pJ/MAC) with their share of ``points`` Sobol points and their
    mapping counts; the chance of reaching the lowest in 10 / 30 / 100 uniform points."""
    from tunebench.methods.accelerator_mapping.encoding import Encoding, sobol_points

    enc = Encoding(task.mod, encoding)
    hits: collections.Counter = collections.Counter()
    configs = {}
    for x in sobol_points(enc.d, points, 0):
        c = enc.decode(x)
        hits[c.index] += 1
        configs[c.index] = c
    value = {c.index: round(m.score, 4) if m.valid else None
             for c, m in zip(configs.values(), target.measure(task, list(configs.values())))}
    share: collections.Counter = collections.Counter()
    mappings: collections.Counter = collections.Counter()
    for i, n in hits.items():
        share[value[i]] += n / points
        mappings[value[i]] += 1
    lowest = sorted(v for v in share if v is not None)[:levels]
    p = share[lowest[0]]
    return {"encoding": encoding, "dims": enc.d, "points": points, "distinct_mappings": len(configs),
            "invalid_share": share.get(None, 0.0),
            "levels": [{"pj_per_mac": v, "share": share[v], "mappings": mappings[v]} for v in lowest],
            "p_lowest_within": {n: 1 - (1 - p) ** n for n in (10, 30, 50, 100)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000)
    ap.add_argument("--encoding", default="scores", choices=["scores", "categorical"])
    ap.add_argument("--levels", type=int, default=6)
    ap.add_argument("--product", type=int, nargs=3, metavar=("M", "N", "K"), default=None,
                    help="an M x N x K matrix product instead of model=accel_paper (as benchmarks/accel_mapspace.py)")
    add_out_args(ap, "accel_encoding_volume")
    args = ap.parse_args()
    if args.points < 1 or args.levels < 1:
        ap.error("--points and --levels must be at least 1")
    path = out_path(ap, args, "accel_encoding_volume")

    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    model = matmul_model(args.product) if args.product else MODEL_OPTIONS["accel_paper"]
    target = AccelTarget(AccelSettings())
    load0, start = loadavg(), time.time()
    out = {}
    for task in target.load_tasks(model)[0]:
        out[task.name] = volumes(task, target, args.encoding, args.points, args.levels)
        r = out[task.name]
        print(task.name, f"{r['distinct_mappings']} mappings in {args.points} points;",
              ", ".join(f"{lv['pj_per_mac']}: {100 * lv['share']:.2f} %" for lv in r["levels"]),
              "; P(lowest) within 30:", f"{r['p_lowest_within'][30]:.2f}", flush=True)
    write_json(path, {**provenance(), "machine": {"cores": os.cpu_count(), "load_before": load0,
                                                  "load_after": loadavg()},
                      "args": vars(args), "wall_s": time.time() - start, "results": out})
    print("written", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
