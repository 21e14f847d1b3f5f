"""HMCOS ([Wang-DAC22]) against SERENITY and the baseline orders, on our cells and on HMCOS's networks.

Per graph: the peak of every order under both accountings (``live``: the sum of live tensors, what the
PyTorch run holds; ``hmcos``: element-wise ops write over an input they read last), TFLite's arena, the
scheduling seconds, and the peak measured by running the order in PyTorch (it must equal the computed
live peak). Orders: program, reverse post-order, Kahn, DFS, Inductor's lpmf / bfs / dfs, SERENITY's DP
with divide-and-conquer (①+②; on our cells only: the whole networks have no cut inside a cell) and with
soft budgeting (①+②+③), each under ``--limit`` seconds (N/A past it), and HMCOS minimizing each accounting (its own ``time_limit_s`` = ``--limit``: past it, the best
schedule of the iterations done, marked ``timed_out``); and SERENITY with HMCOS as its front end
(``method.front_end=hmcos``: HMCOS's peak as the DP's hard budget, its order when the DP does not finish;
the limit covers both), and SERENITY's DP inside HMCOS's groups (``method.front_end=hmcos_groups``: each
window of HMCOS's order that holds whole groups reordered by the DP).

    python benchmarks/hmcos_comparison.py --set ours|theirs [--only MODELS] [--orders ORDERS] [--limit 60]
        [--out PATH | --publish]

``ours``: the DARTS_V2, NASNet-A, PNASNet-5 cells and RandWire's CIFAR stages (the SERENITY benchmark's
cells); ``theirs``: the whole networks of HMCOS's evaluation (:mod:`tunebench.datasets.hmcos_nets`).
Writes ``benchmarks/results/local/hmcos_<set>.json`` (``--publish``: ``benchmarks/results/hmcos_<set>.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import torch
from _common import add_out_args, loadavg, machine_info, out_path, provenance, write_json

OURS = [("darts_v2", {}), ("nasnet_a", {}), ("pnasnet5", {}), ("randwire_cifar10", {"stages": [1, 2, 3]}),
        ("randwire_cifar100", {"stages": [1, 2, 3]})]
THEIRS = [(name, {}) for name in ("hmcos_randwire", "hmcos_nasnet_cifar", "hmcos_nasnet_imagenet",
                                  "hmcos_amoebanet_cifar", "hmcos_amoebanet_imagenet", "hmcos_darts_cifar",
                                  "hmcos_darts_imagenet")]
SETS = {"ours": OURS, "theirs": THEIRS}


def _graphs(name: str, change: dict) -> list:
    from tunebench.datasets.graph_models import load_graphs
    from tunebench.datasets.models import MODEL_OPTIONS

    return load_graphs(dataclasses.replace(MODEL_OPTIONS[name], **change))


def _row(graph, order, seconds: float, measure: bool) -> dict:
    from tunebench.datasets.memory_accounting import peak_of
    from tunebench.targets.memory.execute import execute
    from tunebench.targets.memory.plan import arena_peak

    row = {"peak": peak_of(graph, order, "live"), "hmcos_peak": peak_of(graph, order, "hmcos"),
           "arena": arena_peak(graph, order), "s": seconds}
    if measure:
        run = execute(graph, order)
        row["measured_peak"] = run.peak_bytes
        if run.peak_bytes != row["peak"]:
            raise SystemExit(f"error: {graph.name}: measured peak {run.peak_bytes} B != computed {row['peak']} B")
    return row


def _serenity(graph, divide_only: bool, limit: float):
    from tunebench.methods.graph_memory import dp
    from tunebench.methods.graph_memory.orders import kahn_order

    stats = dp.DPStats()
    if divide_only:
        got = dp.schedule(graph, True, None, limit, stats)
    else:
        got = dp.soft_budget_schedule(graph, True, kahn_order(graph), min(10.0, limit), total_limit_s=limit,
                                      stats=stats)
    return got[0], {"states": stats.states}


def _serenity_front_end(graph, limit: float, front_end: str = "hmcos"):
    """``method=serenity method.front_end=<front_end> method.rewrite=[]`` (its own code path) under ``limit``."""
    from types import SimpleNamespace

    from tunebench.methods import make_method

    method = make_method({"name": "serenity", "front_end": front_end, "rewrite": [], "time_limit_s": limit})
    method.target_info, method.info = SimpleNamespace(capacity=None), {}
    order = method._schedule_graph(graph, "")
    if order is None:
        from tunebench.methods.graph_memory import hmcos

        raise hmcos.Timeout()
    return order, {k: method.info[k] for k in ("front_end_s", "front_end_peak", "timed_out", "dp_states", "windows",
                                               "largest_window", "windows_solved", "windows_improved")
                   if k in method.info}


def _hmcos(graph, accounting: str, limit: float):
    from tunebench.methods.graph_memory import hmcos

    stats = hmcos.HmcosStats()
    got = hmcos.hmcos_schedule(graph, accounting, hmcos.Options(time_limit_s=limit), stats)
    return got[0], {"sequences": stats.sequences, "groups": stats.groups, "iterations": stats.iterations,
                    "states": stats.states, "rpo_groups": stats.rpo_groups, "dp_groups": stats.dp_groups,
                    "memo_hits": stats.memo_hits, "timed_out": stats.timed_out, "peaks": stats.peaks}


def _timed(graph, fn, measure: bool, label: str) -> dict:
    from tunebench.methods.graph_memory import dp, hmcos

    t0 = time.perf_counter()
    try:
        order, extra = fn()
    except (dp.Timeout, hmcos.Timeout):
        print(f"  {graph.name} {label}: N/A", file=sys.stderr, flush=True)
        return {"na": True}
    row = {"na": False, **_row(graph, order, time.perf_counter() - t0, measure), **extra}
    print(f"  {graph.name} {label}: {row['s']:.2f} s, peak {row['peak'] / 1024:.1f} KB "
          f"(hmcos accounting {row['hmcos_peak'] / 1024:.1f} KB)", file=sys.stderr, flush=True)
    return row


def bench_graph(graph, limit: float, divide_only: bool = True, orders: tuple[str, ...] = ()) -> dict:
    """Every order of the module's text on ``graph`` (``orders``: only those named; empty: all)."""
    from tunebench.methods.graph_memory.orders import BASELINES

    runs = {name: (lambda f=order_of: (f(graph), {}), name == "program", name) for name, order_of in BASELINES.items()}
    if divide_only:
        runs["serenity_dp+dc"] = (lambda: _serenity(graph, True, limit), False, "serenity dp+dc")
    runs["serenity_dp+dc+sb"] = (lambda: _serenity(graph, False, limit), True, "serenity dp+dc+sb")
    runs["serenity_dp+dc+sb+hmcos_front"] = (lambda: _serenity_front_end(graph, limit), True,
                                             "serenity dp+dc+sb, hmcos front end")
    runs["serenity_hmcos_groups"] = (lambda: _serenity_front_end(graph, limit, "hmcos_groups"), True,
                                     "serenity, DP in hmcos's groups")
    runs["hmcos"] = (lambda: _hmcos(graph, "live", limit), True, "hmcos")
    runs["hmcos_own_accounting"] = (lambda: _hmcos(graph, "hmcos", limit), False, "hmcos (its accounting)")
    out = {"graph": graph.name, "nodes": len(graph), "edges": graph.n_edges, "orders": {}}
    for key, (fn, measure, label) in runs.items():
        if not orders or key in orders:
            out["orders"][key] = _timed(graph, fn, measure, label)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), required=True)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds per scheduler and graph")
    ap.add_argument("--only", default="", help="comma-separated model names of the set (default: all); the "
                                                "result file is then hmcos_<set>_<first name>.json")
    ap.add_argument("--orders", default="", help="comma-separated orders to run (keys of the result file's "
                                                  "'orders', e.g. hmcos,serenity_hmcos_groups; default: all); the "
                                                  "result file's name then ends in _orders")
    add_out_args(ap, "hmcos_<set>")
    args = ap.parse_args(argv)
    only = [m for m in args.only.split(",") if m]
    orders = tuple(o for o in args.orders.split(",") if o)
    todo = [(m, c) for m, c in SETS[args.set] if not only or m in only]
    name = f"hmcos_{args.set}" + (f"_{only[0]}" if only else "") + ("_orders" if orders else "")
    path = out_path(ap, args, name)
    torch.set_num_threads(1)
    from tunebench.datasets.graphs import abstract_graph
    from tunebench.methods import make_method
    from tunebench.methods.graph_memory import hmcos

    # first imports (the method registry, networkx for HMCOS's post-dominators) are no graph's scheduling time
    make_method({"name": "serenity"})
    hmcos.hmcos_schedule(abstract_graph([(), (0,), (0,), (1, 2)], [1, 2, 2, 1], "warm_up"))
    load0 = loadavg()
    graphs = [bench_graph(g, args.limit, args.set == "ours", orders) for model, change in todo
              for g in _graphs(model, change)]
    data = {"benchmark": name, **provenance(), "machine": machine_info(), "load_before": load0,
            "load_after": loadavg(), "limit_s": args.limit, "torch_threads": 1, "graphs": graphs}
    write_json(path, data)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
