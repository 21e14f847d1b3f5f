"""Analytical cycles against Gemmini's RTL: [Dinh-MLArchSys23] Fig. 1 with DOSA's FireSim data, and ``target=accel``'s
ZigZag model beside DOSA's Timeloop.

Every row of ``data/dosa_firesim/dataset.csv`` ([Hong-MICRO23]; its README) is a layer, a mapping, the 16x16
Gemmini it ran on (scratchpad and accumulator sizes per row), Timeloop's predicted cycles and the cycles FireSim
measured on Gemmini's RTL. ZigZag gets the same layer, the same mapping (``targets/accel/dosa.py``) and the row's
accelerator: ``target=accel``'s defaults with the row's array, buffer sizes and the bandwidths of DOSA's Timeloop
Gemmini (``zigzag``) or ``target=accel``'s own (Gemmini's ``Configs.scala``, ``zigzag_own_bw``); both are
evaluated and written. A mapping ``target=accel`` cannot express is counted and listed with the reason.

Printed and written: per model, the ratio model / FireSim (log10: min, median, max; the orders of magnitude
between the extremes), Spearman's rho across rows (with a paired bootstrap of ZigZag's minus Timeloop's rho on
the same rows) and within each layer across its rows (what a mapper needs: the mean and median rho, and how often
the model's cheapest row is FireSim's, and the regret of taking it). ``--plot PATH`` draws the log-log scatter of Fig. 1.

Usage: python benchmarks/accel_firesim.py [--plot PATH] [--bootstrap 2000] [--out PATH | --publish]
  default output: benchmarks/results/local/accel_firesim.json (untracked).
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, out_path, provenance, run_main, spearman, write_json

MODELS = ("zigzag", "zigzag_own_bw", "timeloop")


def evaluate_rows(rows) -> list[dict]:
    """One entry per row: FireSim's and Timeloop's cycles, ZigZag's with DOSA's and with ``target=accel``'s
    bandwidths (None where the mapping cannot be expressed, ``why`` says why)."""
    from tunebench.targets.accel.dosa import evaluate_row
    from tunebench.targets.accel.settings import AccelSettings

    base = AccelSettings()
    out = []
    for r in rows:
        dosa_bw = evaluate_row(r, base)
        own_bw = evaluate_row(r, base, dosa_bandwidths=False) if "cycles" in dosa_bw else {}
        out.append({"row": r.index, "layer": list(r.layer), "mapping": r.mapping,
                    "firesim": r.firesim_cycles, "firesim_auto": r.firesim_auto_cycles, "timeloop": r.timeloop_cycles,
                    "zigzag": dosa_bw.get("cycles"), "zigzag_fits": dosa_bw.get("fits"),
                    "zigzag_own_bw": own_bw.get("cycles"), "why": dosa_bw.get("not_expressible")})
    return out


def ratio_stats(model: np.ndarray, firesim: np.ndarray) -> dict:
    """log10 of model / FireSim: min, median, max, and the orders of magnitude between the extremes."""
    lr = np.log10(model / firesim)
    return {"n": int(lr.size), "log10_ratio_min": float(lr.min()), "log10_ratio_median": float(np.median(lr)),
            "log10_ratio_max": float(lr.max()), "orders_between_extremes": float(lr.max() - lr.min()),
            "max_abs_log10_ratio": float(np.abs(lr).max()), "ratio_min": float(10 ** lr.min()),
            "ratio_max": float(10 ** lr.max()), "share_within_2x": float(np.mean(np.abs(lr) <= np.log10(2)))}


def within_layers(entries: list[dict], model: str) -> dict:
    """Per layer (its rows: mappings, and DOSA's hardware per row), Spearman's rho of the model against FireSim
    (undefined where the model gives every row the same cycles), whether the model's cheapest row is FireSim's
    (a tie for the cheapest is no agreement), and the regret of taking the model's cheapest row: its FireSim
    cycles over the layer's best (a tie: the mean over the tied rows, what a random pick among them costs)."""
    by_layer = collections.defaultdict(list)
    for e in entries:
        by_layer[tuple(e["layer"])].append(e)
    rhos, top1, tied, regrets, blind, sizes = [], 0, 0, [], [], collections.Counter()
    for rows in by_layer.values():
        sizes[len(rows)] += 1
        if len(rows) < 2:
            continue
        m, f = np.array([e[model] for e in rows]), np.array([e["firesim"] for e in rows])
        rhos.append(spearman(m, f))
        chosen = m == m.min()
        tied += int(chosen.sum() > 1)
        top1 += int(chosen.sum() == 1 and int(np.argmin(m)) == int(np.argmin(f)))
        regrets.append(float(f[chosen].mean() / f.min()))
        blind.append(float(f.mean() / f.min()))  # a row picked at random
    finite = [r for r in rhos if r == r]
    return {"layers": len(by_layer), "rows_per_layer": dict(sorted(sizes.items())), "layers_ranked": len(rhos),
            "rho_mean": float(np.mean(finite)) if finite else None,
            "rho_median": float(np.median(finite)) if finite else None,
            "rho_is_1": sum(r == 1.0 for r in finite), "rho_undefined": len(rhos) - len(finite),
            "cheapest_row_agrees": top1, "cheapest_tied": tied,
            "regret_geomean": float(np.exp(np.mean(np.log(regrets)))) if regrets else None,
            "regret_max": max(regrets) if regrets else None,
            "regret_random_row_geomean": float(np.exp(np.mean(np.log(blind)))) if blind else None}


def bootstrap_rho_difference(entries: list[dict], n: int, seed: int = 0) -> dict:
    """Paired bootstrap over rows of rho(ZigZag, FireSim) - rho(Timeloop, FireSim): its 2.5/97.5 percentiles."""
    rng = np.random.default_rng(seed)
    z, t, f = (np.array([e[k] for e in entries]) for k in ("zigzag", "timeloop", "firesim"))
    diffs = []
    for _ in range(n):
        i = rng.integers(0, len(f), len(f))
        diffs.append(spearman(z[i], f[i]) - spearman(t[i], f[i]))
    d = np.array([x for x in diffs if x == x])
    return {"resamples": n, "p2.5": float(np.percentile(d, 2.5)), "p97.5": float(np.percentile(d, 97.5)),
            "share_zigzag_not_below": float(np.mean(d >= 0))}


def summarize(entries: list[dict], boot: int) -> dict:
    """The statistics of every model on the rows all of them price, and Timeloop's on every row."""
    measured = [e for e in entries if e["firesim"] is not None]
    common = [e for e in measured if all(e[m] is not None for m in MODELS)]
    f = np.array([e["firesim"] for e in common])
    out = {"rows": len(entries), "rows_measured": len(measured), "rows_common": len(common), "models": {}}
    for m in MODELS:
        v = np.array([e[m] for e in common])
        out["models"][m] = {**ratio_stats(v, f), "spearman_rows": spearman(v, f), "within_layer": within_layers(common, m)}
    tl_all = [e for e in measured if e["timeloop"] is not None]
    out["timeloop_all_rows"] = {**ratio_stats(np.array([e["timeloop"] for e in tl_all]),
                                              np.array([e["firesim"] for e in tl_all])),
                                "spearman_rows": spearman([e["timeloop"] for e in tl_all], [e["firesim"] for e in tl_all]),
                                "within_layer": within_layers(tl_all, "timeloop")}
    out["bootstrap_zigzag_minus_timeloop"] = bootstrap_rho_difference(common, boot) if boot else None
    auto = [e for e in measured if e["firesim_auto"] is not None]
    out["firesim_mapping_beats_gemmini_auto"] = sum(e["firesim"] < e["firesim_auto"] for e in auto)
    out["firesim_auto_rows"] = len(auto)
    not_expr = [e for e in entries if e["why"]]
    out["not_expressible"] = {"count": len(not_expr), "reasons": dict(collections.Counter(e["why"] for e in not_expr)),
                              "rows": [{"row": e["row"], "layer": e["layer"], "mapping": e["mapping"], "why": e["why"]}
                                       for e in not_expr]}
    out["zigzag_does_not_fit"] = [e["row"] for e in common if e["zigzag_fits"] is False]
    return out


def plot(entries: list[dict], path: str) -> None:
    """Fig. 1 of [Dinh-MLArchSys23] with real data: model cycles against FireSim's, log-log, y = x dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    common = [e for e in entries if e["firesim"] and e["zigzag"] and e["timeloop"]]
    for m, mark, colour, label in (("timeloop", "x", "C0", "Timeloop (DOSA)"), ("zigzag", "o", "C1", "ZigZag (target=accel)")):
        style = {"facecolors": "none", "edgecolors": colour} if mark == "o" else {"color": colour}
        ax.scatter([e["firesim"] for e in common], [e[m] for e in common], s=16, marker=mark, alpha=0.7, label=label,
                   **style)
    lo = min(min(e["firesim"], e["zigzag"], e["timeloop"]) for e in common) / 2
    hi = max(max(e["firesim"], e["zigzag"], e["timeloop"]) for e in common) * 2
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="FireSim cycles (Gemmini RTL)",
           ylabel="predicted cycles", title=f"{len(common)} layer+mapping rows of DOSA's data set")
    ax.legend(loc="upper left")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)


def report(s: dict) -> None:
    print(f"{s['rows']} rows, {s['rows_measured']} with FireSim cycles, {s['rows_common']} priced by every model; "
          f"{s['not_expressible']['count']} not expressible on target=accel: {s['not_expressible']['reasons']}")
    for m, r in [*s["models"].items(), ("timeloop (all rows)", s["timeloop_all_rows"])]:
        w = r["within_layer"]
        print(f"{m:>20}: ratio {r['ratio_min']:.3g}..{r['ratio_max']:.3g} (median x{10 ** r['log10_ratio_median']:.3g}, "
              f"{r['orders_between_extremes']:.2f} orders), within 2x: {100 * r['share_within_2x']:.0f} %; "
              f"rho rows {r['spearman_rows']:.4f}; within layers ({w['layers_ranked']}): mean {w['rho_mean']:.3f}, "
              f"median {w['rho_median']:.3f}, undefined {w['rho_undefined']}; cheapest agrees {w['cheapest_row_agrees']}, "
              f"tied {w['cheapest_tied']}; regret geomean {w['regret_geomean']:.3f} (a random row: "
              f"{w['regret_random_row_geomean']:.3f}), max {w['regret_max']:.2f}")
    if s["bootstrap_zigzag_minus_timeloop"]:
        b = s["bootstrap_zigzag_minus_timeloop"]
        print(f"rho(ZigZag) - rho(Timeloop), paired bootstrap 95 %: [{b['p2.5']:.4f}, {b['p97.5']:.4f}]")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", default=None, help="write the log-log scatter (PNG) here")
    ap.add_argument("--bootstrap", type=int, default=2000, help="paired bootstrap resamples (0: none)")
    add_out_args(ap, "accel_firesim")
    args = ap.parse_args()
    if args.bootstrap < 0:
        ap.error("--bootstrap must be >= 0")
    path = out_path(ap, args, "accel_firesim")
    logging.getLogger("zigzag").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)

    from tunebench.targets.accel.dosa import read_rows

    load0, start = loadavg(), time.time()
    entries = evaluate_rows(read_rows())
    summary = summarize(entries, args.bootstrap)
    report(summary)
    if args.plot:
        plot(entries, args.plot)
        print("plot", args.plot)
    write_json(path, {**provenance(), "machine": {"cores": os.cpu_count(), "load_before": load0,
                                                  "load_after": loadavg()},
                      "args": vars(args), "wall_s": time.time() - start, "summary": summary, "rows": entries})
    print("written", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
