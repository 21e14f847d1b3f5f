"""Cost-model quality on held-out tasks: rank correlation of predicted vs measured latency.

For GAT ([Sun-PhD] Ch. 5), its ablations (mhsa, gnn_mlp, graph layers gcn/gat/sage) and MetaSchedule's
XGBoost cost model (``ms.cost_model.XGBModel``, TVM 0.27 defaults, fed task by task through its
``update`` as the task scheduler does). Records of MetaSchedule runs are split by task: every
``--holdout-every``-th task (sorted by task id) is held out, or with ``--holdout-model <name>`` every
task of that model (train on the other models' records, test on the test model's); the models train on the rest and are
scored per held-out task with Spearman's rho and Kendall's tau (predicted latency vs measured; for
XGB the predicted score is a throughput, so its negative is ranked). Reported: mean over held-out tasks.

    python benchmarks/gat_rank_correlation.py --records <run dirs> [--epochs 300] --out benchmarks/results/gat_rank_correlation.json
"""

import argparse
import json
import os
import platform
import time

import numpy as np
from scipy.stats import kendalltau, spearmanr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", nargs="+", required=True)
    ap.add_argument("--workdir", default=".")
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--holdout-every", type=int, default=4)
    ap.add_argument("--holdout-model", default=None, help="hold out every task of this model instead")
    ap.add_argument("--variants", default="gat:graphconv,mhsa:graphconv,gnn_mlp:graphconv,gat:gcn,gat:gat,gat:sage")
    ap.add_argument("--out", default="benchmarks/results/gat_rank_correlation.json")
    args = ap.parse_args()

    import tvm.s_tir.meta_schedule as ms

    from tunebench.methods.tensor_programs.gat.dataset import build_dataset
    from tunebench.methods.tensor_programs.gat.model import GATCostModel

    t0 = time.time()
    ds = build_dataset(args.records, args.workdir, keep_candidates=True)
    tids = np.array(ds["task_id"])
    tasks = sorted(set(tids))
    if args.holdout_model:
        held = {t for t, m in zip(tids, ds["model"]) if m == args.holdout_model}
        if not held:
            raise SystemExit(f"--holdout-model {args.holdout_model}: no records of it; models: {sorted(set(ds['model']))}")
    else:
        held = set(tasks[::args.holdout_every])
    train = np.array([t not in held for t in tids])
    print(f"{len(tids)} programs, {len(tasks)} tasks, {len(held)} held out ({time.time() - t0:.0f} s)", flush=True)

    def score(pred_latency_like: np.ndarray) -> dict:
        rhos, taus = [], []
        for t in sorted(held):
            m = tids == t
            if m.sum() < 3:
                continue
            rhos.append(spearmanr(pred_latency_like[m], ds["latency_s"][m])[0])
            taus.append(kendalltau(pred_latency_like[m], ds["latency_s"][m])[0])
        return {"spearman": float(np.nanmean(rhos)), "kendall": float(np.nanmean(taus)), "tasks": len(rhos)}

    results = {}
    graphs_tr = [g for g, k in zip(ds["graphs"], train) if k]
    for spec in args.variants.split(","):
        variant, layer = spec.split(":")
        t1 = time.time()
        m = GATCostModel(variant=variant, graph_layer=layer, epochs=args.epochs, seed=0)
        losses = m.fit(ds["stats"][train], graphs_tr, ds["latency_s"][train])
        pred = m.predict(ds["stats"], ds["graphs"])
        results[f"{variant}/{layer}"] = {**score(pred), "train_mse_first": losses[0], "train_mse_last": losses[-1],
                                         "fit_s": round(time.time() - t1, 1)}
        print(spec, results[f"{variant}/{layer}"], flush=True)

    # MetaSchedule's XGBoost model, trained through its own update() task by task
    t1 = time.time()
    xgb = ms.cost_model.XGBModel(num_tuning_cores=os.cpu_count() or 1)
    cands, ctxs = ds["candidates"], ds["contexts"]
    for t in tasks:
        if t in held:
            continue
        idx = np.flatnonzero(tids == t)
        xgb.update(ctxs[t], [cands[i] for i in idx],
                   [ms.runner.RunnerResult(run_secs=[float(ds["latency_s"][i])], error_msg=None) for i in idx])
    pred = np.zeros(len(tids))
    for t in held:
        idx = np.flatnonzero(tids == t)
        pred[idx] = -np.asarray(xgb.predict(ctxs[t], [cands[i] for i in idx]))
    results["metaschedule_xgb"] = {**score(pred), "fit_s": round(time.time() - t1, 1)}
    print("xgb", results["metaschedule_xgb"], flush=True)

    out = {"command": "python benchmarks/gat_rank_correlation.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}" for k, v in vars(args).items()),
        "machine": f"project machine, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, shared",
        "samples": len(tids), "tasks": len(tasks), "held_out_tasks": sorted(held), "summary": ds["summary"],
        "results": results, "wall_s": round(time.time() - t0, 1)}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
