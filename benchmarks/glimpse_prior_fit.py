"""How well Glimpse's prior ([Ahn-PhD] §4.4.1) generalizes to the held-out hardware, apart from any tuning
run's luck: for each layer measured there, the cross-entropy from H's prior to the best 10 % of the configs
AutoTVM measured on it (H's own training loss, on data it never saw), for the models trained with the
Blueprint and for those trained with a constant one (the ablation), beside a uniform prior; and the share of
knobs whose most probable value is the value of AutoTVM's best config.

    python benchmarks/glimpse_prior_fit.py WORKDIR [--experiment glimpse-loo] [--method autotvm] [--out JSON]

WORKDIR is a work dir of benchmarks/glimpse_loo.sh: its models ``glimpse_spec_s*.pt`` and
``glimpse_const_s*.pt`` and its held-out runs (``--method``'s runs of ``--experiment``). Lower cross-entropy
is better; each cell is the mean ± std over models (seeds) and held-out runs. Nothing is timed.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_info, write_json
from glimpse_table import _runs, layer_label

from tunebench.methods.tensor_programs.glimpse.dataset import groups_from_runs
from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel
from tunebench.methods.tensor_programs.glimpse.train import prior_cross_entropy, uniform_cross_entropy

TOP = 0.1


def _argmax_agreement(model: GlimpseModel, g) -> float:
    """Share of knobs whose most probable value under the prior is the group's best config's value."""
    best = g.digits[int(np.argmax(g.y))]
    lps = model.knob_log_probs(g.knobs, g.feats, model.z(g.kind, g.shape, g.flops, g.hw))
    return float(np.mean([int(np.argmax(lp)) == int(best[k]) for k, lp in enumerate(lps)]))


def _cell(vals: list[float]) -> dict:
    return {"mean": statistics.fmean(vals), "std": statistics.pstdev(vals), "n": len(vals)}


def fit_table(workdir: str, experiment: str, method: str) -> dict:
    """Per layer: cross-entropy and argmax agreement of each model kind (see the module docstring)."""
    runs = [r for r in _runs(workdir, experiment) if r["label"] == method]
    if not runs:
        raise SystemExit(f"error: no {method} runs of experiment {experiment} under {workdir}/records")
    groups = groups_from_runs([os.path.join(workdir, "records", r["run"]) for r in runs], workdir)
    names = {t["id"]: t["name"] for r in runs for t in r["tasks"]}
    models = {kind: [GlimpseModel.load(p) for p in sorted(glob.glob(os.path.join(workdir, f"glimpse_{kind}_s*.pt")))]
              for kind in ("spec", "const")}
    if not all(models.values()):
        raise SystemExit(f"error: {workdir} lacks glimpse_spec_s*.pt or glimpse_const_s*.pt (the train stage)")
    out: dict[str, dict] = {}
    for g in groups:
        row = out.setdefault(names.get(g.task_id, g.task_id), {"shape": g.shape, "hardware": g.hw.name,
                                                                "ce": {}, "argmax": {}})
        row["ce"].setdefault("uniform", []).append(uniform_cross_entropy(g, TOP))
        for kind, ms in models.items():
            row["ce"].setdefault(kind, []).extend(prior_cross_entropy(m, g, TOP) for m in ms)
            row["argmax"].setdefault(kind, []).extend(_argmax_agreement(m, g) for m in ms)
    for row in out.values():
        for part in ("ce", "argmax"):
            row[part] = {k: _cell(v) for k, v in row[part].items()}
    return out


def markdown(tab: dict) -> str:
    def f(c):
        return f"{c['mean']:.2f} ± {c['std']:.2f}"

    lines = ["| layer | hardware | cross-entropy: Blueprint | constant | uniform | argmax = best: Blueprint | constant |",
             "|---|---|---|---|---|---|---|"]
    for row in tab.values():
        lines.append(f"| {layer_label(row['shape'])} | {row['hardware']} | {f(row['ce']['spec'])} | {f(row['ce']['const'])} | "
                     f"{f(row['ce']['uniform'])} | {f(row['argmax']['spec'])} | {f(row['argmax']['const'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir")
    ap.add_argument("--experiment", default="glimpse-loo")
    ap.add_argument("--method", default="autotvm", help="whose held-out measurements are the reference")
    ap.add_argument("--out", help="write the table as JSON")
    args = ap.parse_args()
    tab = fit_table(args.workdir, args.experiment, args.method)
    print(markdown(tab))
    if args.out:
        write_json(args.out, {"machine": machine_info(), "top_fraction": TOP, "table": tab})


if __name__ == "__main__":
    main()
