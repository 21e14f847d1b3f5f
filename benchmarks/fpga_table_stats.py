"""Summary of FPGA design-space tables (``data/fpga/*.csv``): size, valid designs, true Pareto front,
tool seconds, how well the cheap fidelities rank the designs, and whether the target's hypervolume
reference point holds every design.

    python benchmarks/fpga_table_stats.py                      # every shipped table, Markdown
    python benchmarks/fpga_table_stats.py data/fpga/conv.csv   # one table

Per table: pruned configs; designs valid at impl (and why the others are not); the size of the true
front at impl (delay_s, luts, ffs, all minimized); per tool stage the sum / mean / max of its seconds;
Spearman rank correlation of each objective at ``estimate`` and at ``synth`` with ``impl`` over the
designs valid at all three; the impl ranges; the largest normalized impl value per objective (divided by
``scale`` of target=fpga_open, FPGAOpenSettings), which the reference point must exceed.
"""

from __future__ import annotations

import argparse
import glob
import os

import numpy as np
import pandas as pd

from tunebench.pareto import pareto_front

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OBJECTIVES = ("delay_s", "luts", "ffs")
FIDELITIES = ("estimate", "synth", "impl")


def summarize(path: str, scale: dict, ref: list[float]) -> dict:
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    valid = df["impl.valid"] == 1
    errors = df.loc[~valid, "impl.error"].astype(str).str.slice(0, 60).value_counts().to_dict()
    all3 = np.logical_and.reduce([df[f"{f}.valid"] == 1 for f in FIDELITIES])
    corr = {}
    for f in ("estimate", "synth"):
        corr[f] = [float(df.loc[all3, f"{f}.{o}"].corr(df.loc[all3, f"impl.{o}"], method="spearman"))
                   for o in OBJECTIVES]
    Y = df.loc[valid, [f"impl.{o}" for o in OBJECTIVES]].to_numpy(dtype=float)
    stages = {s: df[f"{s}.tool_s"].to_numpy(dtype=float) for s in ("synth", "impl") if f"{s}.tool_s" in df}
    norm_max = [float(Y[:, j].max() / scale[o]) for j, o in enumerate(OBJECTIVES)] if len(Y) else []
    return {"table": os.path.relpath(path, ROOT), "configs": len(df), "valid_impl": int(valid.sum()),
            "invalid_reasons": errors, "front_impl": len(pareto_front(Y)),
            "tool_s": {s: (float(v.sum()), float(v.mean()), float(v.max())) for s, v in stages.items()},
            "tool_h": float(sum(v.sum() for v in stages.values()) / 3600), "spearman_vs_impl": corr,
            "impl_ranges": {o: (float(Y[:, j].min()), float(Y[:, j].max())) for j, o in enumerate(OBJECTIVES)},
            "max_normalized": norm_max, "reference_point": ref,
            "reference_holds_all": bool(norm_max and all(m < r for m, r in zip(norm_max, ref)))}


def markdown(rows: list[dict]) -> str:
    out = ["| table | configs | valid at impl | true front (impl) | synth tool s (sum / mean / max) | "
           "impl tool s (sum / mean / max) | tool h | rank corr. with impl (delay, LUT, FF): estimate / synth |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = {s: " / ".join(f"{v:.0f}" if i == 0 else f"{v:.1f}" if i == 1 else f"{v:.0f}"
                           for i, v in enumerate(r["tool_s"].get(s, (0, 0, 0)))) for s in ("synth", "impl")}
        c = " / ".join(", ".join(f"{v:.2f}" for v in r["spearman_vs_impl"][f]) for f in ("estimate", "synth"))
        out.append(f"| {r['table']} | {r['configs']} | {r['valid_impl']} | {r['front_impl']} | {t['synth']} | "
                   f"{t['impl']} | {r['tool_h']:.2f} | {c} |")
    out.append("")
    for r in rows:
        rng = ", ".join(f"{o} {lo:.3g}–{hi:.3g}" for o, (lo, hi) in r["impl_ranges"].items())
        bad = "; ".join(f"{n}× {e}" for e, n in r["invalid_reasons"].items()) or "none"
        out.append(f"- {r['table']}: impl ranges {rng}; invalid at impl: {bad}; largest normalized impl values "
                   f"{[round(v, 3) for v in r['max_normalized']]} vs reference point {r['reference_point']} "
                   f"({'holds' if r['reference_holds_all'] else 'does NOT hold'} every design)")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="*", help="CSV tables (default: data/fpga/*.csv)")
    args = ap.parse_args(argv)
    from tunebench.targets.fpga.settings import FPGAOpenSettings

    settings = FPGAOpenSettings()
    scale = {o: float(v) for o, v in settings.scale.items()}
    paths = args.tables or sorted(glob.glob(os.path.join(ROOT, "data", "fpga", "*.csv")))
    if not paths:
        raise SystemExit("error: no tables given and none in data/fpga/")
    for p in paths:
        if not os.path.exists(p):
            raise SystemExit(f"error: table {p!r} does not exist")
    print(markdown([summarize(p, scale, settings.reference_point) for p in paths]))


if __name__ == "__main__":
    main()
