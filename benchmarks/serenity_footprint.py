"""The memory footprint while a cell runs, with and without TFLite's arena ([Ahn-PhD] Fig. 3.12, which
plots SwiftNet Cell A; its cells are not public, so a cell of ours stands in).

For the program order, SERENITY's DP order and SERENITY with rewriting: the live activation bytes after
each node's allocation (no allocator; the measured trace of running the order in PyTorch, which the
script checks against the computed one) and the arena's extent at each step (the highest end offset of
the allocations live then, TFLite's simple memory arena as in ``target=memory``).

    python benchmarks/serenity_footprint.py [--model nasnet_a] [--out PATH | --publish]

Writes ``serenity_footprint_<model>.json`` and ``.png`` under ``benchmarks/results/local/``
(``--publish``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import os
import sys

from _common import add_out_args, loadavg, machine_info, out_path, provenance, write_json


def arena_extent(graph, order) -> list[int]:
    """The arena's extent after each node's allocation: the highest end offset of the live allocations."""
    from tunebench.targets.memory.plan import arena_events, arena_offsets

    _, offsets = arena_offsets(arena_events(graph, order))
    live: dict[int, int] = {}
    remaining = [len(u) for u in graph.users]
    out = []
    for u in order:
        if graph.nbytes[u]:
            live[u] = offsets[u] + graph.nbytes[u]
        out.append(max(live.values(), default=0))
        for p in graph.frees()[u]:
            remaining[p] -= 1
            if remaining[p] == 0:
                live.pop(p, None)
    return out


def traces(model: str) -> dict:
    import dataclasses

    from tunebench.datasets.graph_models import load_graphs
    from tunebench.datasets.graph_rewrite import rewrite
    from tunebench.datasets.graphs import peak_memory
    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.methods.graph_memory import dp
    from tunebench.targets.memory.execute import execute

    graph = load_graphs(dataclasses.replace(MODEL_OPTIONS[model]))[0]
    rewritten = rewrite(graph, ("channel", "kernel"))[0]
    rows = {"program order": (graph, graph.program_order()), "SERENITY (DP)": (graph, dp.schedule(graph, True)[0]),
            "SERENITY (DP + rewriting)": (rewritten, dp.schedule(rewritten, True)[0])}
    out = {}
    for name, (g, order) in rows.items():
        computed = peak_memory(g, order)[1]
        measured = execute(g, order).trace
        if measured != computed:
            raise SystemExit(f"{name}: the measured trace differs from the computed one")
        out[name] = {"live_bytes": computed, "arena_extent_bytes": arena_extent(g, order),
                     "nodes": [g.names[v] for v in order]}
    return out


def plot(data: dict, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, key, label in zip(axes, ("arena_extent_bytes", "live_bytes"),
                              ("(a) with TFLite's simple memory arena", "(b) without allocator (sum of live tensors)")):
        for name, row in data.items():
            ys = [b / 1024 for b in row[key]]
            ax.step(range(1, len(ys) + 1), ys, where="post", label=f"{name}: peak {max(ys):.0f} KB")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("step (node scheduled)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("activation memory [KB]")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="nasnet_a", help="a graph model of one cell (darts_v2, nasnet_a, pnasnet5)")
    add_out_args(ap, f"serenity_footprint_{ap.parse_known_args(argv)[0].model}")
    args = ap.parse_args(argv)
    name = f"serenity_footprint_{args.model}"
    path = out_path(ap, args, name)
    load0 = loadavg()
    data = traces(args.model)
    write_json(path, {"benchmark": "serenity_footprint", "model": args.model, **provenance(),
                      "machine": machine_info(), "load_before": load0, "load_after": loadavg(), "traces": data})
    png = os.path.splitext(path)[0] + ".png"
    plot(data, png, f"{args.model}: activation memory while the cell runs (float32, batch 1)")
    print(f"wrote {path} and {png}: " + ", ".join(f"{k} peak {max(v['live_bytes']) / 1024:.0f} KB, arena "
                                                  f"{max(v['arena_extent_bytes']) / 1024:.0f} KB" for k, v in data.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
