"""The multi-fidelity premise on real and on our open-flow data: per kernel, the Spearman rank correlation
between each pair of fidelities (stages), for each objective, over the designs valid at both.

    python benchmarks/fpga_stage_rank.py                      # Markdown, every table
    python benchmarks/fpga_stage_rank.py --json benchmarks/results/fpga_stage_rank.json

Tables: the recorded models (data/fpga_recorded/, checked against MANIFEST.json: HGBO-DSE's MachSuite
kernels on Vivado, Spector's kernels on a DE5 board) and our open-flow tables (data/fpga/*.csv:
Amaranth -> Yosys -> nextpnr on an ECP5). An objective a stage does not report (power before
implementation) or a table does not have is left out; a pair where an objective is constant over the
designs gives no correlation (shown as "const").
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os

import pandas as pd

from tunebench.datasets import fpga_recorded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBJECTIVES = ("delay_s", "runtime", "luts", "ffs", "alms", "dsps", "brams", "power_w")


def stage_pairs(df: pd.DataFrame, fidelities: list[str]) -> dict:
    """{"a~b": {objective: (rho or None, n designs)}} for every pair of fidelities a < b."""
    out = {}
    for a, b in itertools.combinations(fidelities, 2):
        both = (df[f"{a}.valid"] == 1) & (df[f"{b}.valid"] == 1)
        res = {}
        for o in OBJECTIVES:
            if f"{a}.{o}" not in df.columns or f"{b}.{o}" not in df.columns:
                continue
            x = pd.to_numeric(df.loc[both, f"{a}.{o}"])
            y = pd.to_numeric(df.loc[both, f"{b}.{o}"])
            rho = x.corr(y, method="spearman") if x.nunique() > 1 and y.nunique() > 1 else None
            res[o] = (None if rho is None else round(float(rho), 3), int(both.sum()))
        out[f"{a}~{b}"] = res
    return out


def tables() -> list[tuple[str, str, pd.DataFrame, list[str]]]:
    """(name, family, table, fidelities) of every recorded model and open-flow table."""
    out = []
    for name in fpga_recorded.recorded_names():
        e = fpga_recorded.entry(name)
        df = pd.read_csv(fpga_recorded.verify(name), keep_default_na=False, na_values=[""])
        out.append((name, fpga_recorded.dataset_of(name), df, list(e["fidelities"])))
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "fpga", "*.csv"))):
        df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        out.append((f"open_{os.path.basename(path)[:-4]}", "open flow (ECP5)", df, ["estimate", "synth", "impl"]))
    return out


def markdown(results: list[dict]) -> str:
    lines = ["| kernel | data | stages | designs | " + " | ".join(OBJECTIVES) + " |",
             "|---|---|---|---|" + "---|" * len(OBJECTIVES)]
    for r in results:
        for pair, res in r["pairs"].items():
            n = max((v[1] for v in res.values()), default=0)
            cells = ["" if o not in res else ("const" if res[o][0] is None else f"{res[o][0]:.2f}")
                     for o in OBJECTIVES]
            lines.append(f"| {r['kernel']} | {r['family']} | {pair} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    results = [{"kernel": name, "family": fam, "designs": len(df), "pairs": stage_pairs(df, fids)}
               for name, fam, df, fids in tables()]
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"method": "Spearman rho between two stages over the designs valid at both",
                       "results": results}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
