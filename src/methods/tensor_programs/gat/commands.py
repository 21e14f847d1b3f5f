"""``python -m tunebench dataset build`` and ``gat train``: build a GAT training set from recorded
runs and train the GAT cost model on it (each logged as an MLflow run: ``track``, which the command line gives,
:func:`tunebench.harness.commands.cli.command_tracking`)."""

from __future__ import annotations

import argparse
import json
import os
import time

from tunebench.config.arguments import check_out, count
from tunebench.methods.tensor_programs.gat.dataset import build_dataset, load_dataset, save_dataset

EXPERIMENT = "gat-training"  # the MLflow experiment of both commands


def cmd_build(args, track) -> None:
    check_out(args.out)
    t0 = time.time()
    ds = build_dataset(args.records, args.workdir)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_dataset(ds, args.out)
    s = ds["summary"]
    print(f"training set {args.out}: {s['samples']} programs of {s['tasks']} tasks ({', '.join(s['models'])}) "
          f"in {time.time() - t0:.0f} s", flush=True)
    with track(EXPERIMENT, "dataset-build", {"out": args.out, "sources": json.dumps(args.records)},
               "dataset build") as tr:
        with open(args.out + ".summary.json", "w") as fh:
            json.dump(s, fh, indent=1)
        tr.artifact(args.out + ".summary.json")


def cmd_train(args, track) -> None:
    from tunebench.methods.tensor_programs.gat.model import GATCostModel

    check_out(args.out)
    ds = load_dataset(args.dataset)
    m = GATCostModel(variant=args.variant, graph_layer=args.graph_layer, lr=args.lr, epochs=args.epochs,
                     batch_size=args.batch_size, seed=args.seed)
    params = {"dataset": args.dataset, "variant": args.variant, "graph_layer": args.graph_layer, "lr": args.lr,
              "epochs": args.epochs, "batch_size": args.batch_size}
    t0 = time.time()
    with track(EXPERIMENT, f"gat-train-{args.variant}-{args.graph_layer}", params, "gat train") as tr:
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
    print(f"model {args.out} (use method.pretrained={os.path.abspath(args.out)})", flush=True)


def _learning_rate(text: str) -> float:
    """An argparse type: a finite number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number in (0, 1]")
    return value


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
    p.add_argument("--lr", type=_learning_rate, default=1e-4)
    p.add_argument("--epochs", type=count(1, 100_000), default=300)
    p.add_argument("--batch-size", type=count(1, 1_000_000), default=512)
    p.add_argument("--seed", type=count(0, 2**32 - 1), default=0)
    p.add_argument("--workdir", default=".")
