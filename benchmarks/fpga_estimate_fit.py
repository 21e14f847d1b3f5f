"""Fit the analytical estimate's LUT cost of a LUT-built 8x8 multiplier to Yosys, per kernel family.

The ``estimate`` fidelity (``tunebench.targets.fpga.flow.estimate``) counts LUT4s with constants; the
one that dominates ``mul_core=lut`` designs is the cost of one multiplier. Per kernel, this script
takes the shipped table's ``synth`` LUT counts of the valid ``mul_core=lut`` designs, the estimate of
everything but the multipliers, and fits the least-squares constant c in

    synth.luts ~= estimate_without_multipliers + c x lanes

It prints c, and the median relative error and Spearman rank correlation of the estimate's LUTs
against synth over all valid designs with the constant in use and with the fitted one. ``--write``
regenerates the ``estimate`` value columns of ``data/fpga/<kernel>.csv`` with the constants now in
``flow.EST`` (an estimate costs milliseconds; the recorded ``estimate.tool_s`` is kept).

    python benchmarks/fpga_estimate_fit.py [--kernels gemm,conv,spmv] [--write]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.targets.fpga import flow
from tunebench.targets.fpga.generator import build
from tunebench.targets.fpga.kernels import get_kernel
from tunebench.targets.fpga.table import default_table
from tunebench.targets.fpga.tasks import fpga_tasks


def _designs(kernel: str) -> tuple[pd.DataFrame, list[dict]]:
    """The shipped table as written (to rewrite it) and the config of each of its rows."""
    space = fpga_tasks(MODEL_OPTIONS[f"hls_{kernel}"], "table")[0].space
    df = pd.read_csv(default_table(kernel), keep_default_na=False, na_values=[""])
    return df, [space.get(int(i)).to_dict() for i in df["index"]]


def _quality(est: np.ndarray, synth: np.ndarray) -> tuple[float, float]:
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    return float(np.median(np.abs(est - synth) / synth)), float(np.corrcoef(rank(est), rank(synth))[0, 1])


def fit(kernel_name: str) -> dict:
    kernel = get_kernel(kernel_name)
    df, cfgs = _designs(kernel_name)
    ok = df["synth.valid"].to_numpy() == 1
    lut = np.array([c["mul_core"] == "lut" for c in cfgs])
    lanes = np.array([build(kernel, c).lanes for c in cfgs], dtype=float)
    base = np.array([flow.estimate(kernel, c, lut_mult=0.0).metrics["luts"] for c in cfgs])
    synth = df["synth.luts"].to_numpy(dtype=float)
    sel = ok & lut
    c = float(np.sum(lanes[sel] * (synth[sel] - base[sel])) / np.sum(lanes[sel] ** 2))
    current = flow.lut_mult_cost(kernel_name)
    return {"kernel": kernel_name, "n_lut_designs": int(sel.sum()), "fitted": c, "current": current,
            "quality_current": _quality(base[ok] + lut[ok] * lanes[ok] * current, synth[ok]),
            "quality_fitted": _quality(base[ok] + lut[ok] * lanes[ok] * c, synth[ok])}


def write_estimates(kernel_name: str) -> None:
    kernel = get_kernel(kernel_name)
    df, cfgs = _designs(kernel_name)
    for i, c in enumerate(cfgs):
        m = flow.estimate(kernel, c).metrics
        df.loc[i, "estimate.delay_s"] = m["cycles"] / (m["fmax_mhz"] * 1e6)
        df.loc[i, "estimate.luts"] = m["luts"]
        df.loc[i, "estimate.ffs"] = m["ffs"]
    df.to_csv(default_table(kernel_name), index=False)


def main() -> None:
    ap = argparse.ArgumentParser(description="fit the estimate's LUT-multiplier cost to the shipped tables' synth LUTs")
    ap.add_argument("--kernels", default="gemm,conv,spmv")
    ap.add_argument("--write", action="store_true", help="regenerate the tables' estimate columns with flow.EST")
    a = ap.parse_args()
    for k in a.kernels.split(","):
        r = fit(k)
        (e0, s0), (e1, s1) = r["quality_current"], r["quality_fitted"]
        print(f"{k}: {r['n_lut_designs']} valid mul_core=lut designs; LUT4 per multiplier: in use {r['current']:.0f}, "
              f"fitted {r['fitted']:.1f}; estimate vs synth LUTs (all valid designs): median rel. error "
              f"{e0:.3f} -> {e1:.3f}, Spearman {s0:.3f} -> {s1:.3f}")
        if a.write:
            write_estimates(k)
            print(f"  wrote the estimate columns of {default_table(k)}")


if __name__ == "__main__":
    main()
