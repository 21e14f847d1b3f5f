"""``python -m tunebench space measure --out DIR [--sample N] [--max-factor F] [--part K/N] [overrides ...]``:
measure every task's space (or the part of it ``--max-factor`` bounds, or a uniform ``--sample``; ``--part``: one
of N disjoint parts of those, for sittings that ``space merge`` joins) under the
measurement protocol and write one versioned space file per task (:mod:`tunebench.datasets.space_file`)
for ``target=replay``. ``space merge`` joins the files of one space measured in several sittings
(:mod:`tunebench.harness.commands.space_merge`); ``space migrate`` gives files measured before the template
code digest existed that digest (:mod:`tunebench.harness.commands.space_migrate`).

The measuring is one ordinary tuning run with ``method=exhaustive`` (its MLflow run and records folder
in the working directory, the device lock, noise marks, the best config's output check). ``DIR`` holds
``.measuring.json`` while it runs: run the same command again after a stop and it resumes that run, on
the same machine only (a space's timings come from one machine). The files are written when every
task is measured; the state file is then removed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import time

from tunebench.config.arguments import check_out, parse_part
from tunebench.config.experiment import MAX_TRIALS
from tunebench.errors import UserError
from tunebench.harness.commands.space_merge import add_merge_parser, cmd_merge
from tunebench.harness.commands.space_migrate import add_migrate_parser, cmd_migrate

log = logging.getLogger(__name__)
STATE = ".measuring.json"
LOCK = ".measuring.lock"
#: what a space file's header records of the task's template (TVMTarget.space_facts)
TEMPLATE_FACTS = ("template", "template_file", "template_sha256", "template_code_sha256")
#: overrides the command sets itself
OWN = ("method", "budget.trials_per_task", "resume", "e2e.enabled")


def add_options(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="action", required=True, parser_class=type(parser))
    parser = sub.add_parser("measure", help="measure the spaces of a model's tasks",
                            description="measure the spaces of a model's tasks into versioned files (target=replay)")
    parser.add_argument("--out", required=True, help="folder for the space files (one per task, .jsonl)")
    parser.add_argument("--sample", type=int, default=None,
                        help="a uniform sample of this many configs per task (drawn with seed=); default: all")
    parser.add_argument("--max-factor", type=int, default=None,
                        help="only configs whose split factors after the outermost are <= this; default: all")
    parser.add_argument("--part", default="1/1", metavar="K/N",
                        help="measure the K-th of N disjoint parts of the configs chosen (same seed= and --sample "
                             "in every sitting; join the files with space merge); default: 1/1, all of them")
    parser.add_argument("--gzip", action="store_true", help="write .jsonl.gz instead of .jsonl")
    parser.add_argument("overrides", nargs="*", help="run.py overrides: model=..., target=..., seed=, measure.*")
    add_merge_parser(sub)
    add_migrate_parser(sub)


def machine() -> dict:
    """The machine a space is measured on: CPU model, logical CPUs, host name."""
    from tunebench.targets.tvm.llvm import cpu_model_name

    return {"cpu": cpu_model_name(), "cores": os.cpu_count(), "host": platform.node()}


def _check_args(args: argparse.Namespace) -> None:
    for name, value in (("--sample", args.sample), ("--max-factor", args.max_factor)):
        if value is not None and value < 1:
            raise UserError(f"{name}={value}: must be a whole number >= 1")
    if parse_part(args.part) is None:
        raise UserError(f"--part={args.part}: must be K/N with whole numbers 1 <= K <= N (e.g. 1/2)")
    for item in args.overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        if key in OWN or key.startswith("method."):
            raise UserError(f"override {item!r}: space measure sets {key} itself (method=exhaustive, every "
                            "config); give model=, target=, seed= and measure.* overrides")


def _state(out: str, here: dict, overrides: list[str]) -> dict | None:
    """The run being measured into ``out`` (its state file), checked to be this machine's and these
    overrides'; None when nothing is being measured there."""
    path = os.path.join(out, STATE)
    if not os.path.exists(path):
        return None
    try:
        state = json.load(open(path))
        run_id, was, before = state["run_id"], state["machine"], state["overrides"]
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"{path}: not a readable measuring state; remove it to start over") from None
    if was != here:
        raise UserError(f"--out {out}: run {run_id} there is being measured on {was}; this machine is {here}: a "
                        f"space's timings come from one machine (remove {path} to start over here)")
    if before != overrides:
        raise UserError(f"--out {out}: run {run_id} there was started with overrides {before}; resume it with the "
                        f"same ones, or remove {path} to start over")
    return state


def cmd_measure(args: argparse.Namespace) -> None:
    """Measure (or resume measuring) the spaces, then write the files; one ``space measure`` per folder
    (``space merge``: :func:`~tunebench.harness.commands.space_merge.cmd_merge`; ``space migrate``:
    :func:`~tunebench.harness.commands.space_migrate.cmd_migrate`)."""
    from tunebench.harness.commands.cli import setup_logging

    if args.action in ("merge", "migrate"):
        (cmd_merge if args.action == "merge" else cmd_migrate)(args)
        return
    _check_args(args)
    check_out(args.out, "--out", folder=True)
    setup_logging()  # the run's log lines (a task's trials, noise verdicts), as run.py shows them
    with _out_lock(args.out):
        _measure(args, os.path.abspath(args.out))


@contextlib.contextmanager
def _out_lock(given: str):
    """Hold the folder's lock (``.measuring.lock``) while measuring into it: a second ``space measure`` into
    it is refused with one line naming the first one's pid. A folder this call created is removed again
    when nothing was written into it (a refused run leaves no empty folder)."""
    from tunebench.targets.devicelock import holder_of, lock_now

    out = os.path.abspath(given)
    created = not os.path.exists(out)
    try:
        os.makedirs(out, exist_ok=True)
        lock = os.path.join(out, LOCK)
        fh = lock_now(lock)
    except OSError as exc:
        raise UserError(f"--out={given}: cannot be written ({exc.strerror or exc})") from None
    if fh is None:
        if created:
            os.rmdir(out)
        raise UserError(f"--out={given}: another space measure is measuring into it ({holder_of(lock)}); wait for "
                        "it to end, or give another --out")
    try:
        yield
    finally:
        os.remove(lock)
        fh.close()
        if created and not os.listdir(out):
            os.rmdir(out)


def _measure(args: argparse.Namespace, out: str) -> None:
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.run_folder import git_commit
    from tunebench.harness.setup.compose import compose_config
    from tunebench.targets import target_class
    from tunebench.targets.capabilities import MeasuresSpaces

    here = machine()
    state = _state(out, here, list(args.overrides))
    method = ["method=exhaustive", "method.part={}/{}".format(*parse_part(args.part))] + [
        f"method.{k}={v}" for k, v in (("sample", args.sample), ("max_factor", args.max_factor)) if v]
    overrides = [*method, f"budget.trials_per_task={MAX_TRIALS}", "e2e.enabled=false", *args.overrides]
    if state:
        overrides.append(f"resume={state['run_id']}")
    cfg = compose_config([f"workdir={os.getcwd()}", *overrides])
    if not issubclass(target_class(cfg.target.kind), MeasuresSpaces):
        raise UserError(f"target={cfg.target.name}: only TVM targets (llvm, cuda) measure spaces for target=replay")
    started = {}

    def remember(run_id: str, record_path: str) -> None:
        started.update(run_id=run_id, records=record_path, commit=(state or {}).get("commit") or git_commit())
        with open(os.path.join(out, STATE), "w") as fh:
            json.dump({**started, "machine": here, "overrides": list(args.overrides)}, fh, indent=1)

    run_id = run_experiment(cfg, overrides=overrides, on_start=[remember])
    started = started or state
    written = export_spaces(cfg, run_id, started["records"], out, {"machine": here, "commit": started["commit"]},
                            gz=args.gzip)
    os.remove(os.path.join(out, STATE))
    for path in written:
        print(path, flush=True)


def export_spaces(cfg, run_id: str, record_path: str, out: str, where: dict, gz: bool = False) -> list[str]:
    """One space file per task of the run's records (module docstring); returns their paths. ``where``:
    the machine and the commit the run started at."""
    from tunebench.datasets.space_file import write_space_file
    from tunebench.harness.run_folder import read_tasks_json
    from tunebench.record_file import read_records
    from tunebench.targets import make_target

    target = make_target(cfg.target, cfg.measure)
    try:
        tasks, _ = target.load_tasks(cfg.model)
        by_task: dict[str, dict[int, dict]] = {}
        for rec in read_records(record_path):
            by_task.setdefault(rec["task_id"], {})[int(rec["index"])] = rec
        common = {**where, "device": target.device_facts(), "date": _utc(min(r["timestamp"] for t in by_task.values() for r in t.values())),
                  **target.space_tools(), "run_id": run_id,
                  "subspace": {"max_factor": cfg.method.max_factor, "sample": cfg.method.sample, "seed": cfg.seed,
                               "part": cfg.method.part}}
        entries = read_tasks_json(os.path.dirname(record_path))
        paths = []
        for task in tasks:
            rows = [_row(task, rec) for _, rec in sorted(by_task.get(task.id, {}).items())]
            if not rows:
                continue
            facts = target.space_facts(task)
            stamps = [r["timestamp"] for r in by_task[task.id].values()]
            header = {"name": f"{cfg.model.name}/{task.name}", **common,
                      "task": {"kind": task.kind, "shape": task.shape, "flops": task.flops,
                               **{k: facts[k] for k in TEMPLATE_FACTS}},
                      "target": {"kind": target.kind, **{k: facts[k] for k in ("tvm_target", "threads", "precision")}},
                      "measured": [_utc(min(stamps)), _utc(max(stamps))],
                      "knobs": task.space.describe(), "space_size": task.space.size,
                      **_task_verdicts(entries.get(task.id) or {})}
            path = os.path.join(out, f"{target.kind}_{space_label(task)}.jsonl" + (".gz" if gz else ""))
            write_space_file(path, header, rows)
            log.info("%s: %d of %d configs", path, len(rows), task.space.size)
            paths.append(path)
        return paths
    finally:
        target.close()


def _utc(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _task_verdicts(entry: dict) -> dict:
    """What the run's ``tasks.json`` says of the task as a whole: the best config's output check, the
    calibration kernel timed before and after the task (how far the machine's speed moved while the space
    was measured) and whether the protocol marked the task's best noisy."""
    check = entry.get("check") or {}
    return {"best_check": {k: check.get(k) for k in ("index", "ok", "status")},
            "calibration": entry.get("calibration"), "best_noisy": entry.get("best_noisy")}


def space_label(task) -> str:
    """A file name for a task's space: its kind and shape (``conv2d_1x128x28x28x128x3x1x1x1``)."""
    return f"{task.kind}_" + "x".join(str(v) for v in task.shape.values())


def _row(task, rec: dict) -> dict:
    """A space file line from a measurement record."""
    valid = bool(rec.get("valid"))
    return {"digits": task.space.digits(int(rec["index"])), "config": rec["config"],
            "latency_s": rec["latency_s"] if valid else None, "latency_std_s": rec.get("latency_std_s") or 0.0,
            "latency_min_s": rec.get("latency_min_s"), "noisy": bool(rec.get("noisy")), "noise": rec.get("noise") or {},
            "build_s": rec.get("build_s") or 0.0, "run_s": rec.get("run_s") or 0.0, "error": rec.get("error") or ""}
