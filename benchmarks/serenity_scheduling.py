"""SERENITY's scheduling time and peak memory ([Ahn-PhD] Fig. 3.10, 3.11, 3.13, Table 3.2), re-measured.

Part 1, per graph: each combination of the DP (①), divide-and-conquer (②), adaptive soft budgeting (③)
and identity rewriting, timed ``--repeat`` times (median, min, max seconds); a combination that runs past
``--limit`` seconds is N/A (Table 3.2). Beside them the baselines' peaks (program order, Kahn, DFS,
Inductor's lpmf / bfs / dfs), the TFLite arena, the off-chip traffic at 256 KB (Belady) and the peak
measured by running the schedule in PyTorch.

RandWire's cells are benchmarked twice: with each addition of a node's input sum its own graph node
(the default, ``model.split_sums=true``) and with the sum inside the node (``split_sums=false``, the
``whole_sums`` variant and its own summary).

Part 2, growth: one RandWire stage of 16..128 nodes (WS(n, 4, 0.75)), ①+② and ①+②+③, each under
``--limit`` seconds.

    python benchmarks/serenity_scheduling.py [--repeat 3] [--limit 60] [--step-limit 10]
        [--growth 16,32,48,64,96,128] [--out PATH | --publish]

Writes ``benchmarks/results/local/serenity_scheduling.json`` (``--publish``: the tracked
``benchmarks/results/serenity_scheduling.json``) with the machine, load before and after, date and commit.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time

import torch
from _common import add_out_args, loadavg, machine_info, out_path, provenance, write_json

GRAPHS = [("darts_v2", {}), ("nasnet_a", {}), ("pnasnet5", {}),
          ("randwire_cifar10", {"stages": [1, 2, 3]}), ("randwire_cifar100", {"stages": [1, 2, 3]}),
          ("randwire_cifar10", {"stages": [1, 2, 3], "whole": True})]
# RandWire with a node's input sum inside its graph node (model.split_sums=false): the coarser graph
WHOLE_SUMS = [("randwire_cifar10", {"stages": [1, 2, 3], "split_sums": False}),
              ("randwire_cifar100", {"stages": [1, 2, 3], "split_sums": False})]
COMBOS = {"dp": (False, False), "dp+dc": (True, False), "dp+dc+sb": (True, True)}
REWRITES = ("channel", "kernel")
STEP_LIMIT = [10.0]  # T of Algorithm 3 (--step-limit)


def _graphs(name: str, change: dict) -> list:
    from tunebench.datasets.graph_models import load_graphs
    from tunebench.datasets.models import MODEL_OPTIONS

    return load_graphs(dataclasses.replace(MODEL_OPTIONS[name], **change))


def _time(fn, repeat: int) -> dict:
    """Median, min and max seconds of ``repeat`` calls, and the last result; N/A on a timeout."""
    from tunebench.methods.graph_memory.dp import Timeout

    seconds, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            result = fn()
        except Timeout:
            return {"na": True, "seconds": None}
        seconds.append(time.perf_counter() - t0)
    return {"na": False, "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
            "result": result}


def _combo(graph, divide: bool, budget: bool, limit: float):
    from tunebench.methods.graph_memory import dp
    from tunebench.methods.graph_memory.orders import kahn_order

    stats = dp.DPStats()
    if budget:
        got = dp.soft_budget_schedule(graph, divide, kahn_order(graph), STEP_LIMIT[0], total_limit_s=limit,
                                      stats=stats)
    else:
        got = dp.schedule(graph, divide, None, limit, stats)
    return got, stats


def bench_graph(graph, repeat: int, limit: float, variant: str = "") -> dict:
    """Every combination on ``graph`` and its rewritten form, the baselines and the measured peak;
    ``variant`` labels a graph of non-default model settings."""
    from tunebench.datasets.graph_rewrite import rewrite
    from tunebench.datasets.graphs import peak_memory
    from tunebench.methods.graph_memory.orders import BASELINES
    from tunebench.targets.memory.execute import execute
    from tunebench.targets.memory.plan import arena_peak, offchip_traffic

    t0 = time.perf_counter()
    rewritten, n_rw = rewrite(graph, REWRITES)
    rewrite_s = time.perf_counter() - t0
    out = {"graph": graph.name, "variant": variant, "nodes": len(graph), "edges": graph.n_edges, "rewrites": n_rw,
           "nodes_rewritten": len(rewritten), "edges_rewritten": rewritten.n_edges, "rewrite_s": rewrite_s,
           "baselines": {}, "combos": {}}
    for name, order_of in BASELINES.items():
        order = order_of(graph)
        out["baselines"][name] = {"peak": peak_memory(graph, order)[0], "arena": arena_peak(graph, order),
                                  "offchip_256k": offchip_traffic(graph, order, 256 * 1024)}
    for rw, g in (("", graph), ("rw+", rewritten)):
        if rw and not n_rw:
            continue
        for combo, (divide, budget) in COMBOS.items():
            t = _time(lambda g=g, d=divide, b=budget: _combo(g, d, b, limit), repeat)
            row = {k: v for k, v in t.items() if k != "result"}
            if not t["na"]:
                (order, peak), stats = t["result"]
                row.update(peak=peak, arena=arena_peak(g, order), offchip_256k=offchip_traffic(g, order, 256 * 1024),
                           states=stats.states, partitions=stats.partitions, budgets_tried=len(stats.budgets or []))
                if combo == "dp+dc+sb":
                    with torch.no_grad():
                        row["measured_peak"] = execute(g, order).peak_bytes
            out["combos"][rw + combo] = row
            print(f"  {graph.name}{variant and ' ' + variant} {rw + combo}: " + ("N/A" if t["na"] else
                  f"{row['median_s']:.3f} s, peak {row['peak']}"), file=sys.stderr, flush=True)
    return out


def bench_growth(sizes: list[int], limit: float) -> list[dict]:
    rows = []
    for n in sizes:
        g = _graphs("randwire_cifar10", {"stages": [2], "nodes": n})[0]
        row = {"nodes_per_stage": n, "nodes": len(g), "edges": g.n_edges}
        for combo in ("dp+dc", "dp+dc+sb"):
            divide, budget = COMBOS[combo]
            t = _time(lambda g=g, d=divide, b=budget: _combo(g, d, b, limit), 1)
            row[combo] = None if t["na"] else {"s": t["median_s"], "peak": t["result"][0][1],
                                               "states": t["result"][1].states}
            print(f"  growth n={n} {combo}: " + ("N/A" if t["na"] else f"{t['median_s']:.2f} s"), file=sys.stderr,
                  flush=True)
        rows.append(row)
    return rows


def geomean(values) -> float:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary(graphs: list[dict], variant: str = "") -> dict:
    """Fig. 3.10 / 3.11 / 3.13 style summaries over the cells (not the whole-network graph); with
    ``variant``, the cells of that variant where it has them, the default's elsewhere."""
    cells = [g for g in graphs if "stage123" not in g["graph"] and not g["variant"]]
    if variant:
        other = {g["graph"]: g for g in graphs if g["variant"] == variant}
        cells = [other.get(g["graph"], g) for g in cells]
    best = {g["graph"]: g["combos"].get("dp+dc+sb") for g in cells}
    rw = {g["graph"]: g["combos"].get("rw+dp+dc+sb") or g["combos"].get("dp+dc+sb") for g in cells}
    prog = {g["graph"]: g["baselines"]["program"] for g in cells}
    lpmf = {g["graph"]: g["baselines"]["inductor_lpmf"] for g in cells}
    return {"peak_reduction_dp_geomean": geomean(prog[k]["peak"] / best[k]["peak"] for k in best),
            "peak_reduction_rw_geomean": geomean(prog[k]["peak"] / rw[k]["peak"] for k in rw),
            "arena_reduction_rw_geomean": geomean(prog[k]["arena"] / rw[k]["arena"] for k in rw),
            "peak_reduction_vs_lpmf_rw_geomean": geomean(lpmf[k]["peak"] / rw[k]["peak"] for k in rw),
            "offchip_reduction_rw_geomean": geomean(prog[k]["offchip_256k"] / rw[k]["offchip_256k"]
                                                    for k in rw if rw[k]["offchip_256k"]),
            "schedule_s_mean_dp": statistics.mean(best[k]["median_s"] for k in best),
            "schedule_s_mean_rw": statistics.mean(rw[k]["median_s"] + g["rewrite_s"]
                                                  for g in cells for k in [g["graph"]])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds before a combination is N/A")
    ap.add_argument("--growth", default="16,32,48,64,96,128")
    ap.add_argument("--step-limit", type=float, default=10.0, help="T of Algorithm 3 (method.step_limit_s)")
    add_out_args(ap, "serenity_scheduling")
    args = ap.parse_args(argv)
    path = out_path(ap, args, "serenity_scheduling")
    STEP_LIMIT[0] = args.step_limit
    torch.set_num_threads(1)
    load0 = loadavg()
    graphs = []
    for variant, todo in (("", GRAPHS), ("whole_sums", WHOLE_SUMS)):
        for name, change in todo:
            for g in _graphs(name, change):
                graphs.append(bench_graph(g, args.repeat, args.limit, variant))
    growth = bench_growth([int(n) for n in args.growth.split(",") if n], args.limit)
    data = {"benchmark": "serenity_scheduling", **provenance(), "machine": machine_info(), "load_before": load0,
            "load_after": loadavg(), "repeat": args.repeat, "limit_s": args.limit, "step_limit_s": args.step_limit,
            "torch_threads": 1,
            "summary": summary(graphs), "summary_whole_sums": summary(graphs, "whole_sums"), "graphs": graphs,
            "growth": growth}
    write_json(path, data)
    print(f"wrote {path}: " + ", ".join(f"{k} {v:.3g}" for k, v in data["summary"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
