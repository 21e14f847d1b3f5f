"""``python -m tunebench glimpse train``: Glimpse's training set from recorded runs (and, optionally, static
validity labels of GPU configs under TVM's GPU tags), its three parts trained, one model file written, the
training logged as an MLflow run (``track``, which the command line gives:
:func:`tunebench.harness.commands.cli.command_tracking`)."""

from __future__ import annotations

import argparse
import json
import os
import time

from tunebench.config.arguments import check_out, count
from tunebench.errors import UserError


def cmd_train(args, track) -> None:
    from tunebench.methods.tensor_programs.glimpse.dataset import groups_from_runs, summary
    from tunebench.methods.tensor_programs.glimpse.train import TrainSettings, train

    check_out(args.out)
    t0 = time.time()
    groups = groups_from_runs(args.records, args.workdir) if args.records else []
    if args.gpu_static_tags:
        from tunebench.methods.tensor_programs.glimpse.gpu_data import static_groups

        groups += static_groups(args.gpu_static_tags, args.gpu_static_configs, seed=args.seed)
    if not groups:
        raise UserError("glimpse train: nothing to train on (give --records and/or --gpu-static-tags)")
    s = TrainSettings(dims=args.dims, blueprint_mode="constant" if args.constant_blueprint else "spec",
                      seed=args.seed, acq_batches=args.acq_batches, prior_epochs=args.prior_epochs,
                      acq_prior=args.acquisition_prior)
    info = summary(groups)
    print(f"training set: {info['groups']} (task, hardware) groups, {info['configs']} configs "
          f"({info['invalid']} invalid) on {', '.join(info['hardware'])}", flush=True)
    params = {"records": json.dumps(args.records), "dims": s.dims, "blueprint": s.blueprint_mode, "seed": s.seed}
    with track("glimpse-training", f"glimpse-train-{s.blueprint_mode}", params, "glimpse train") as tr:
        def progress(part, step, value):
            tr.metric(f"{part}_progress", value, step)
            print(f"  {part} {step}: {value:.4f} ({time.time() - t0:.0f} s)", flush=True)

        model = train(groups, s, progress)
        model.info["training_set"] = info
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        model.save(args.out)
        tr.artifact(args.out)
    print(f"model {args.out} in {time.time() - t0:.0f} s (use method.pretrained={os.path.abspath(args.out)})",
          flush=True)


def _epochs(text: str) -> int | None:
    if text == "auto":
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r}: a positive number of epochs, or auto")


def add_options(p) -> None:
    p.add_argument("action", choices=["train"])
    p.add_argument("--records", nargs="*", default=[], help="record folders, records.jsonl files or run ids of "
                                                            "target=llvm runs (the training hardware)")
    p.add_argument("--out", required=True, help="model file to write (.pt)")
    p.add_argument("--dims", type=count(1, 64), default=4, help="Blueprint dimensions (PCA components), 1-64")
    p.add_argument("--constant-blueprint", action="store_true", help="the ablation: Θ = 0 in training and tuning")
    p.add_argument("--gpu-static-tags", type=count(0, 1000), default=0, help="add static validity labels of CUDA configs "
                                                                  "under this many TVM GPU tags")
    p.add_argument("--gpu-static-configs", type=count(1, 100_000), default=200, help="configs per task and tag")
    p.add_argument("--acq-batches", type=count(1, 100_000), default=300, help="REINFORCE batches of the acquisition")
    p.add_argument("--prior-epochs", type=_epochs, default=None, metavar="N|auto",
                   help="epochs of the prior generator H; auto (the default): chosen by leave-one-hardware-out "
                        "validation over the measured hardware, up to 300")
    p.add_argument("--acquisition-prior", choices=["held-out", "in-sample"], default="held-out",
                   help="the prior the acquisition's training episodes see: held-out (the default): for each "
                        "hardware, H trained without it; in-sample: H trained on all (fit to every episode's "
                        "best configs)")
    p.add_argument("--seed", type=count(0, 2**32 - 1), default=0, help="seed of the training (numpy, torch)")
    p.add_argument("--workdir", default=".", help="where records/ and mlflow.db live")
