"""Off-chip traffic against the on-chip memory size ([Ahn-PhD] Fig. 3.11 sweeps on-chip sizes; the
thesis quotes 256 KB): for every cell, the traffic of the program order and of SERENITY's order (with
rewriting) under Belady's replacement (``target=memory``'s model), and their ratio.

    python benchmarks/serenity_offchip.py [--sizes-kb 64,128,...] [--dtype float32] [--out PATH | --publish]

Writes ``serenity_offchip_<dtype>.json`` (``benchmarks/results/local/``; ``--publish``: ``benchmarks/results/``).
Nothing is timed: the numbers do not depend on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from _common import add_out_args, out_path, provenance, write_json

MODELS = ("darts_v2", "nasnet_a", "pnasnet5", "randwire_cifar10", "randwire_cifar100")


def cells(dtype: str) -> list:
    from tunebench.datasets.graph_models import load_graphs
    from tunebench.datasets.models import MODEL_OPTIONS

    return [g for m in MODELS for g in load_graphs(dataclasses.replace(MODEL_OPTIONS[m], dtype=dtype))]


def serenity_order(graph):
    """SERENITY's choice with its default settings (:class:`SerenitySettings`: DP, divide-and-conquer,
    soft budgeting): the order of the rewritten graph when its peak is lower, else the original's."""
    from tunebench.datasets.graph_rewrite import rewrite
    from tunebench.methods.graph_memory import dp
    from tunebench.methods.graph_memory.method import SerenitySettings
    from tunebench.methods.graph_memory.orders import kahn_order

    s = SerenitySettings()

    def schedule(g):
        return dp.soft_budget_schedule(g, s.divide, kahn_order(g), s.step_limit_s, total_limit_s=s.time_limit_s)

    best = (graph, *schedule(graph))
    rewritten, count = rewrite(graph, tuple(s.rewrite))
    if count:
        other = (rewritten, *schedule(rewritten))
        if other[2] < best[2]:
            best = other
    return best[0], best[1]


def main(argv=None) -> int:
    from tunebench.targets.memory.plan import offchip_traffic

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-kb", default="32,64,128,256,512,1024,2048,4096,8192,16384")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    add_out_args(ap, "serenity_offchip_float32")
    args = ap.parse_args(argv)
    name = f"serenity_offchip_{args.dtype}"
    path = out_path(ap, args, name)
    sizes = [int(s) for s in args.sizes_kb.split(",") if s]
    rows = []
    for g in cells(args.dtype):
        sg, order = serenity_order(g)
        row = {"graph": g.name, "program": {}, "serenity": {}}
        for kb in sizes:
            row["program"][kb] = offchip_traffic(g, g.program_order(), kb * 1024)
            row["serenity"][kb] = offchip_traffic(sg, order, kb * 1024)
        rows.append(row)
    summary = {}
    for kb in sizes:
        ratios = [r["program"][kb] / r["serenity"][kb] for r in rows if r["serenity"][kb]]
        summary[kb] = {"geomean_reduction": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
                       "cells_with_traffic": len(ratios),
                       "cells_eradicated": sum(r["program"][kb] > 0 and r["serenity"][kb] == 0 for r in rows)}
    write_json(path, {"benchmark": "serenity_offchip", "dtype": args.dtype, **provenance(), "sizes_kb": sizes,
                      "summary": summary, "cells": rows})
    for kb in sizes:
        s = summary[kb]
        red = f"{s['geomean_reduction']:.3f}x" if s["geomean_reduction"] else "-"
        print(f"{kb:>6} KB: {red} over {s['cells_with_traffic']} cells with traffic, "
              f"{s['cells_eradicated']} eradicated")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
