"""Training sets for the GAT cost model from tunebench record files, and offline training.

``python -m tunebench dataset build --records <run dir or run id>... --out set.pt`` replays every
valid MetaSchedule record (a :class:`~tunebench.space.TraceConfig` trace) on its task's PrimFunc
(tasks re-extracted from the run's ``config.yaml`` model), computes both feature kinds
(:mod:`tunebench.methods.gat_features`) and saves ``{"stats" (n, STAT_DIM), "graphs" [(x, edge_index)],
"latency_s" (n,), "task_id" [n], "model" [n], "summary"}`` with ``torch.save``.

``python -m tunebench gat train --dataset set.pt --out model.pt`` trains a GATCostModel
(seed 000 §5.4.1 settings unless overridden), shows per-epoch progress, and logs the checkpoint and
the training-set summary to MLflow (experiment ``gat-training`` in ``--workdir``'s store).
"""

from __future__ import annotations

import json
import logging
import os
import time

import numpy as np

from tunebench.errors import UserError

log = logging.getLogger(__name__)


def _run_dir(ref: str, workdir: str, records_dir: str = "records") -> str:
    """A record folder from a path (folder or records.jsonl) or an MLflow run id under workdir."""
    if os.path.isfile(ref) and ref.endswith(".jsonl"):
        return os.path.dirname(os.path.abspath(ref))
    if os.path.isdir(ref):
        return ref
    cand = os.path.join(workdir, records_dir, ref)
    if os.path.isdir(cand):
        return cand
    raise UserError(f"--records {ref}: neither a record folder, a records.jsonl nor a run id with "
                    f"{os.path.join(workdir, records_dir, ref)}")


def build_dataset(refs: list[str], workdir: str = ".", keep_candidates: bool = False) -> dict:
    """The training set (see module docstring) from record folders / run ids ``refs``.

    ``keep_candidates``: also return ``"candidates"`` (the replayed MeasureCandidates) and
    ``"contexts"`` (task id -> TuneContext), for comparisons with MetaSchedule's own cost model."""
    import tvm
    import tvm.s_tir.meta_schedule as ms
    from omegaconf import OmegaConf

    from tunebench.datasets.tasks import model_tasks
    from tunebench.harness.records import read_records
    from tunebench.methods.gat_features import stat_features, tir_graph

    stats, graphs, lat, tids, models, kept = [], [], [], [], [], []
    per_task: dict[str, int] = {}
    all_ctx: dict = {}
    for ref in refs:
        d = _run_dir(ref, workdir)
        cfg_path = os.path.join(d, "config.yaml")
        if not os.path.isfile(cfg_path):
            raise UserError(f"--records {ref}: {cfg_path} missing (not a tunebench run folder)")
        cfg = OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=False)
        recs = [r for r in read_records(os.path.join(d, "records.jsonl")) if r.get("valid") and "trace" in r["config"]]
        if not recs:
            log.warning("%s: no valid MetaSchedule (trace) records", d)
            continue
        kind = cfg["target"]["kind"] if "kind" in cfg["target"] else cfg["target"].get("name", "llvm")
        tasks, _ = model_tasks(cfg["model"], kind)
        by_id = {t.id: t for t in tasks}
        target = tvm.target.Target({"kind": kind})
        ctxs: dict = {}
        for i, r in enumerate(recs):
            task = by_id.get(r["task_id"])
            if task is None:
                continue
            if task.id not in ctxs:
                ctxs[task.id] = (ms.TuneContext(mod=task.mod, target=target, task_name=task.name, num_threads=1),
                                 ms.arg_info.ArgInfo.from_prim_func(task.mod["main"]))
            ctx, args = ctxs[task.id]
            sch = tvm.s_tir.Schedule(task.mod)
            tvm.s_tir.schedule.Trace.apply_json_to_schedule(r["config"]["trace"], sch)
            cand = ms.MeasureCandidate(sch, args)
            stats.append(stat_features(ctx, [cand])[0])
            graphs.append(tir_graph(sch.mod["main"]))
            lat.append(float(r["latency_s"]))
            tids.append(task.id)
            models.append(cfg["model"]["name"])
            per_task[task.id] = per_task.get(task.id, 0) + 1
            if keep_candidates:
                kept.append(cand)
                all_ctx[task.id] = ctx
            if (i + 1) % 100 == 0:
                print(f"  {d}: {i + 1}/{len(recs)} records", flush=True)
    if not lat:
        raise UserError("no valid MetaSchedule records in " + ", ".join(refs))
    summary = {"samples": len(lat), "tasks": len(per_task), "models": sorted(set(models)),
               "per_task": per_task, "sources": list(refs),
               "latency_s_min": float(min(lat)), "latency_s_max": float(max(lat))}
    out = {"stats": np.stack(stats), "graphs": graphs, "latency_s": np.asarray(lat), "task_id": tids,
           "model": models, "summary": summary}
    if keep_candidates:
        out["candidates"], out["contexts"] = kept, all_ctx
    return out


def load_dataset(path: str) -> dict:
    import torch

    if not os.path.isfile(path):
        raise UserError(f"--dataset {path}: no such file (build one with `python -m tunebench dataset build`)")
    return torch.load(path, weights_only=False)


def _tracker(workdir: str):
    from tunebench.harness.tracking import Tracker

    return Tracker(None, "gat-training", workdir)


def cmd_build(args) -> None:
    import torch

    t0 = time.time()
    ds = build_dataset(args.records, args.workdir)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.save(ds, args.out)
    s = ds["summary"]
    print(f"training set {args.out}: {s['samples']} programs of {s['tasks']} tasks ({', '.join(s['models'])}) "
          f"in {time.time() - t0:.0f} s", flush=True)
    tr = _tracker(args.workdir)
    tr.start(run_name="dataset-build", params={"out": args.out, "sources": json.dumps(args.records)}, tags={})
    with open(args.out + ".summary.json", "w") as fh:
        json.dump(s, fh, indent=1)
    tr.artifact(args.out + ".summary.json")
    tr.end()


def cmd_train(args) -> None:
    from tunebench.methods.gat_model import GATCostModel

    ds = load_dataset(args.dataset)
    m = GATCostModel(variant=args.variant, graph_layer=args.graph_layer, lr=args.lr, epochs=args.epochs,
                     batch_size=args.batch_size, seed=args.seed)
    tr = _tracker(args.workdir)
    tr.start(run_name=f"gat-train-{args.variant}-{args.graph_layer}",
             params={"dataset": args.dataset, "variant": args.variant, "graph_layer": args.graph_layer,
                     "lr": args.lr, "epochs": args.epochs, "batch_size": args.batch_size}, tags={})
    t0 = time.time()

    def progress(ep, loss):
        tr.metric("train_mse", loss, ep)
        if ep % 10 == 0 or ep == args.epochs - 1:
            print(f"epoch {ep + 1}/{args.epochs}: mse {loss:.4f} ({time.time() - t0:.0f} s)", flush=True)

    m.fit(ds["stats"], ds["graphs"], ds["latency_s"], progress=progress)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    m.save(args.out)
    with open(args.out + ".summary.json", "w") as fh:
        json.dump(ds["summary"], fh, indent=1)
    tr.artifact(args.out)
    tr.artifact(args.out + ".summary.json")
    tr.end()
    print(f"model {args.out} (use method.pretrained={os.path.abspath(args.out)})", flush=True)


def add_build_options(p) -> None:
    p.add_argument("action", choices=["build"])
    p.add_argument("--records", nargs="+", required=True, help="record folders, records.jsonl files or run ids")
    p.add_argument("--out", required=True, help="training-set file to write (.pt)")
    p.add_argument("--workdir", default=".", help="where records/ and mlflow.db live")


def add_train_options(p) -> None:
    p.add_argument("action", choices=["train"])
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", required=True, help="checkpoint to write (.pt)")
    p.add_argument("--variant", default="gat", choices=["gat", "mhsa", "gnn_mlp"])
    p.add_argument("--graph-layer", default="graphconv", choices=["graphconv", "gcn", "gat", "sage"])
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=".")
