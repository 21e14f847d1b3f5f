"""Seed 000 Tables 3.2-3.4 layout from FPGA run records (issue 7).

Reads every ``<records_dir>/<run>/config.yaml`` + ``pareto_<kernel>.json`` (written by the harness's
FPGA metrics) and prints, per kernel and method over seeds:
  Table 3.2: ADRS mean and its standard deviation, each divided by ann's (ann = 1.00);
  Table 3.3: algorithm hours and tool (FPGA) hours (means over seeds);
  Table 3.4: overall hours (algorithm + tool);
plus raw ADRS, hypervolume and top-fidelity evaluations.

    python benchmarks/fpga_tables.py records [--methods ann,bt,...] [--markdown]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict

import numpy as np
import yaml


def load(records_dir: str):
    rows = []
    for cfg_path in glob.glob(os.path.join(records_dir, "*", "config.yaml")):
        run = os.path.dirname(cfg_path)
        with open(cfg_path) as fh:
            cfg = yaml.safe_load(fh)
        if (cfg.get("target") or {}).get("kind") not in ("table", "fpga_open", "vivado"):
            continue
        for p in glob.glob(os.path.join(run, "pareto_*.json")):
            with open(p) as fh:
                d = json.load(fh)
            rows.append({"method": cfg["method"]["name"], "model": cfg["model"]["name"], "seed": cfg.get("seed"),
                         "target": cfg["target"]["name"], "adrs": d.get("adrs"), "hv": d.get("hypervolume"),
                         "tool_s": d.get("tool_s", 0.0), "alg_s": d.get("algorithm_s", 0.0),
                         "n_top": d.get("n_top_fidelity"), "per_fidelity": d.get("per_fidelity", {})})
    return rows


def tables(rows, methods=None, norm="ann"):
    by = defaultdict(list)
    for r in rows:
        by[(r["model"], r["method"])].append(r)
    models = sorted({k[0] for k in by})
    methods = methods or sorted({k[1] for k in by})
    out = {}
    for model in models:
        for method in methods:
            rs = by.get((model, method), [])
            if not rs:
                continue
            ad = np.array([r["adrs"] for r in rs if r["adrs"] is not None], dtype=float)
            out[(model, method)] = {
                "n": len(rs), "adrs": ad.mean() if len(ad) else np.nan, "adrs_std": ad.std(ddof=1) if len(ad) > 1 else np.nan,
                "hv": float(np.mean([r["hv"] for r in rs])), "alg_h": float(np.mean([r["alg_s"] for r in rs])) / 3600,
                "tool_h": float(np.mean([r["tool_s"] for r in rs])) / 3600,
                "n_top": float(np.mean([r["n_top"] or 0 for r in rs])),
                "evals": float(np.mean([sum((r["per_fidelity"] or {}).values()) for r in rs]))}
    return models, methods, out


def render(models, methods, out, norm="ann") -> str:
    lines = []
    hdr = "| kernel | " + " | ".join(methods) + " |"
    sep = "|---|" + "---|" * len(methods)

    def table(title, fn, fmt="{:.2f}"):
        lines.extend([f"**{title}**", "", hdr, sep])
        cols = {m: [] for m in methods}
        for model in models:
            cells = []
            for m in methods:
                v = fn(model, m)
                cells.append("—" if v is None or not np.isfinite(v) else fmt.format(v))
                if v is not None and np.isfinite(v):
                    cols[m].append(v)
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("| Average | " + " | ".join(fmt.format(np.mean(cols[m])) if cols[m] else "—" for m in methods) + " |")
        lines.append("")

    def ratio(key):
        def fn(model, m):
            a, b = out.get((model, m)), out.get((model, norm))
            if a is None or b is None or not b[key]:
                return None
            return a[key] / b[key]
        return fn

    def raw(key):
        return lambda model, m: (out.get((model, m)) or {}).get(key)

    table(f"Normalized ADRS (mean over seeds, {norm} = 1.00)", ratio("adrs"))
    table(f"Normalized standard deviation of ADRS ({norm} = 1.00)", ratio("adrs_std"))
    table("ADRS (raw mean)", raw("adrs"), "{:.4f}")
    table("Normalized hypervolume (raw mean, target's reference point)", raw("hv"), "{:.4f}")
    table("Algorithm hours (mean per run; Table 3.3 'Alg.')", raw("alg_h"), "{:.4f}")
    table("Tool (FPGA) hours charged (mean per run, replayed tool seconds; Table 3.3 'FPGA')", raw("tool_h"), "{:.3f}")
    table("Overall hours (algorithm + tool; Table 3.4)", lambda model, m: None if (model, m) not in out else
          out[(model, m)]["alg_h"] + out[(model, m)]["tool_h"], "{:.3f}")
    table("Evaluations (trials, all fidelities; mean per run)", raw("evals"), "{:.1f}")
    table("Top-fidelity (impl) evaluations (mean per run)", raw("n_top"), "{:.1f}")
    ns = sorted({v["n"] for v in out.values()})
    lines.append(f"Runs per cell: {ns}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records_dir")
    ap.add_argument("--methods", default=None)
    ap.add_argument("--norm", default="ann")
    a = ap.parse_args()
    rows = load(a.records_dir)
    models, methods, out = tables(rows, a.methods.split(",") if a.methods else None)
    print(render(models, methods, out, a.norm))


if __name__ == "__main__":
    main()
