"""``python -m tunebench dataset build`` and ``gat train``: build a GAT training set from recorded
runs and train the GAT cost model on it (each logged as an MLflow run)."""

from __future__ import annotations

import json
import os
import time

from tunebench.harness.commands.cli import check_out
from tunebench.methods.gat.dataset import build_dataset, load_dataset, save_dataset


def _tracker(workdir: str):
    from tunebench.harness.tracking.tracker import Tracker

    return Tracker(None, "gat-training", workdir)


def cmd_build(args) -> None:
    check_out(args.out)
    t0 = time.time()
    ds = build_dataset(args.records, args.workdir)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_dataset(ds, args.out)
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
    from tunebench.methods.gat.model import GATCostModel

    check_out(args.out)
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
