"""``python -m tunebench suite {cpu,gpu,all} | --spaces FILE... [--methods random,autotvm] [--seeds N]
[--budget B] [--jobs J]``: every method on every measured space of a set, ``N`` seeds at a fixed budget of
``B`` evaluations, replayed (``target=replay model=measured``), scored with [Willemsen-FGCS24]'s
methodology score per space and aggregated, with 95 % intervals and the pairwise differences
(:mod:`tunebench.report.suite_score`).

Each (space, method, seed) is one ordinary tracked run (MLflow experiment ``--experiment``, records under
``records/`` of the working folder), so the leaderboard shows the suite as its ``measured``/``replay``
group with the score columns. Everything is checked before the first run: the set or files (each read,
checksummed where shipped; one with no numeric objective is refused), the methods (each composed and
validated on every space, as ``run.py`` would), the seeds, the budget (at most the smallest space's
configurations: past that the score is undefined) and ``--out``. A line per finished run shows progress
and the time left; at the end the summary is printed and written to ``--out`` (``suite.md``,
``suite.json`` with every run id, ``suite.png``), whole or not at all.

dgp transfers from autotvm's seed-0 runs on the other spaces of its group, with its deep GP pre-trained
once per space before its seeds run, on no seed's clock; it is not run on a space with no source, and the
summary says which and why (:mod:`tunebench.report.suite_dgp`).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from tunebench.errors import RunStopped, UserError
from tunebench.report import suite_dgp

DEFAULT_METHODS = "random,autotvm"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("set", nargs="?", default=None, help="the shipped spaces: cpu, gpu or all")
    parser.add_argument("--spaces", nargs="+", metavar="FILE", default=None,
                        help="space files or Kernel Tuner caches instead of a set")
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help="comma-separated: registered methods or plug-ins package.module:Class")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 of every method on every space")
    parser.add_argument("--budget", type=int, default=100, help="evaluations per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs side by side (processes)")
    parser.add_argument("--out", default="suite", help="folder of suite.md, suite.json, suite.png")
    parser.add_argument("--experiment", default="suite", help="MLflow experiment of the runs")


def _spaces(args) -> dict[str, str]:
    """name (the file name without its extensions) -> absolute path, of the set or ``--spaces``."""
    from tunebench.datasets.measured import resolve
    from tunebench.datasets.shipped import space_set

    if (args.set is None) == (args.spaces is None):
        raise UserError("give a set (cpu, gpu, all) or --spaces FILE..., not both and not neither")
    paths = space_set(args.set) if args.set is not None else [os.path.abspath(resolve(p)) for p in args.spaces]
    out = {}
    for p in paths:
        name = os.path.basename(p).split(".json")[0]
        if name in out:
            raise UserError(f"--spaces {p}: two spaces named {name}; rename one")
        out[name] = p
    return out


def _check_numbers(args) -> None:
    for flag, value in (("--seeds", args.seeds), ("--budget", args.budget), ("--jobs", args.jobs)):
        if value < 1:
            raise UserError(f"{flag}={value}: must be a whole number >= 1")


def _read_spaces(paths: dict[str, str], budget: int) -> dict:
    """Every space read (bad files: their reader's one line) and checked to be scorable at ``budget``."""
    from tunebench.datasets.space_file import read_measured

    measured = {name: read_measured(path) for name, path in paths.items()}  # one with no latency: refused there
    small = min(measured, key=lambda n: measured[n].space.size)
    if budget > measured[small].space.size:
        raise UserError(f"--budget={budget}: larger than space {small} ({measured[small].space.size} configs); the "
                        "score is undefined past a space's size: give at most that")
    return measured


def _method_data(method: str) -> dict:
    """The method group of a registered method name or a plug-in class path."""
    from tunebench.config.plugins import is_import_path

    if is_import_path(method):
        return {"cls": method}
    if ":" in method:
        raise UserError(f"--methods {method}: a plug-in is package.module:Class")
    return {"name": method}


def compose_units(args, paths: dict[str, str]) -> dict[tuple[str, str], dict]:
    """(space, method) -> the composed run config as plain data (seed 0), each loaded and validated as
    ``run.py`` would (an unknown method, one the replay target refuses: one line)."""
    from omegaconf import OmegaConf

    from tunebench.harness.setup.load import load_experiment
    from tunebench.harness.setup.preflight import compose
    from tunebench.harness.setup.validate import validate_config

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise UserError(f"--methods={args.methods!r}: name at least one method")
    if len(set(methods)) != len(methods):
        raise UserError(f"--methods={args.methods}: a method is named twice")
    base = ["target=replay", "model=measured", f"budget.trials_per_task={args.budget}", "check_correctness=false",
            "progress=false", f"experiment={args.experiment}", f"workdir={os.getcwd()}"]
    units, composed = {}, OmegaConf.to_container(compose(base), resolve=True)
    composed["budget"]["method_overrides"] = {}  # every method at its own defaults, not a preset's scaling
    for name, path in paths.items():
        plain = {**composed, "model": {**composed["model"], "path": path}}  # any path, no override quoting
        for method in methods:
            data = {**plain, "method": _method_data(method)}
            try:
                cfg = load_experiment(data)
                validate_config(cfg)
            except UserError as exc:
                raise UserError(f"--methods {method}: {exc}") from None
            units[(name, method)] = {**data, "method": {**data["method"], "name": cfg.method.name}}
    names = [_label(units[(next(iter(paths)), m)]) for m in methods]
    if len(set(names)) != len(names):
        raise UserError(f"--methods={args.methods}: two of them are the same method ({', '.join(names)})")
    return units


def _label(data: dict) -> str:
    """The method's name (a plug-in's: its settings' name), as its runs are tagged."""
    return data["method"]["name"]


def run_one(data: dict, seed: int) -> tuple[str, list[dict], str]:
    """One run of the suite: the run id, its records and its record file."""
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.load import load_experiment
    from tunebench.record_file import read_records

    found = {}
    run_id = run_experiment(load_experiment({**data, "seed": seed}),
                            on_start=[lambda rid, records: found.update(records=records)])
    return run_id, read_records(found["records"]), found["records"]


class Progress:
    """A line per finished run: how many are done, the time so far and an estimate of what is left; a
    line per preparation (dgp's pre-training: on no run's clock)."""

    def __init__(self, total: int):
        self.total, self.done, self.t0 = total, 0, time.time()

    def step(self, space: str, method: str, seed: int, best_s: float) -> None:
        self.done += 1
        spent = time.time() - self.t0
        left = spent / self.done * (self.total - self.done)
        print(f"[{self.done}/{self.total}] {space} {method} seed {seed}: best {best_s * 1e3:.4g} ms; "
              f"{spent:.0f} s so far, ~{left:.0f} s left", flush=True)

    def prepared(self, space: str, info: dict) -> None:
        print(f"[prepare] {space} dgp: deep GP pre-trained on {info['records']} records of "
              f"{len(info['history'])} source run(s) in {info['fit_s']:.1f} s ({info['seconds']:.1f} s in all; "
              f"a preparation, on no seed's clock); {time.time() - self.t0:.0f} s so far", flush=True)


def run_units(units: dict, seeds: int, jobs: int, progress: Progress, dgp=None) -> tuple[dict, dict]:
    """Every unit's seeds, ``jobs`` at a time, and dgp's preparations before its seeds
    (:class:`~tunebench.report.suite_dgp.Schedule`): ``(space, method, seed) -> (run id, records, record
    file)`` of every run (dgp's extra source runs too) and ``space -> preparation``."""
    from tunebench.report.suite_dgp import Schedule

    sched, out, prepared = Schedule(units, seeds, dgp, run_one), {}, {}

    def finished(job, result):
        sched.done(job, result)
        if job[0] == "prepare":
            prepared[job[1]] = result
            progress.prepared(job[1], result)
            return
        out[(*job[1], job[2])] = result
        if job[1] not in units:  # run only as dgp's source
            print(f"[source] {job[1][0]} {job[1][1]} seed {job[2]}: dgp's source history", flush=True)
            return
        valid = [r["latency_s"] for r in result[1] if r.get("valid") and r.get("latency_s") is not None]
        progress.step(job[1][0], _label(units[job[1]]), job[2], min(valid) if valid else float("nan"))

    if jobs == 1:
        while (job := sched.pop()) is not None:
            fn, *call = sched.call(job)
            finished(job, fn(*call))
        return out, prepared
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=share_cores, initargs=(ctx.Value("i", 0), jobs)) as pool:
        running = {}
        while True:
            while len(running) < jobs and (job := sched.pop()) is not None:
                running[pool.submit(*sched.call(job))] = job
            if not running:
                return out, prepared
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in ended:
                finished(running.pop(f), f.result())


def share_cores(counter, jobs: int) -> None:
    """A worker's share of this process's cores: worker ``i`` of ``jobs`` keeps every ``jobs``-th core from
    the ``i``-th, so that the methods' thread pools (XGBoost, PyTorch) do not oversubscribe the machine."""
    with counter.get_lock():
        i = counter.value
        counter.value += 1
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    mine = cores[i % jobs::jobs] if len(cores) >= jobs else []
    if mine:
        os.sched_setaffinity(0, mine)
        import torch

        torch.set_num_threads(len(mine))


def _check_out(out: str) -> None:
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"--out={out}: is a file; give a folder")
    above = os.path.abspath(out)
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.access(above, os.W_OK | os.X_OK):
        raise UserError(f"--out={out}: cannot be written ({above} is not a writable folder)")


def write_summary(out: str, result: dict, fig) -> list[str]:
    """suite.json, suite.md and suite.png in ``out``, each written whole (a temporary file renamed)."""
    import io

    from tunebench.safe_files import atomic_write_bytes

    os.makedirs(out, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    files = {"suite.json": json.dumps(result, indent=1, default=float).encode(),
             "suite.md": (result["markdown"] + "\n").encode(), "suite.png": png.getvalue()}
    for name, data in files.items():
        atomic_write_bytes(os.path.join(out, name), data, mode=0o644)
    return [os.path.join(out, n) for n in files]


def cmd_suite(args: argparse.Namespace) -> None:
    """Check everything, run every (space, method, seed), score, print and write the summary."""
    import logging

    from tunebench.harness.commands.cli import setup_logging
    from tunebench.harness.run_folder import git_commit
    from tunebench.report.suite_score import figure, markdown, seed_curve, suite_scores

    _check_numbers(args)
    _check_out(args.out)
    paths = _spaces(args)
    measured = _read_spaces(paths, args.budget)
    units = compose_units(args, paths)
    dgp = suite_dgp.plan(units, paths, lambda m, some: compose_units(argparse.Namespace(**{**vars(args), "methods": m}),
                                                                     some))
    setup_logging()
    logging.getLogger().setLevel(logging.WARNING)  # the progress lines, not every run's log
    methods = list(dict.fromkeys(_label(d) for d in units.values()))
    print(f"suite: {len(paths)} spaces x {len(methods)} methods x {args.seeds} seeds = "
          f"{len(units) * args.seeds} runs of {args.budget} evaluations", flush=True)
    for n, why in (dgp.skipped if dgp else {}).items():
        print(f"suite: dgp is not run on {n}: {why}", flush=True)
    t0, commit, progress = time.time(), git_commit(), Progress(len(units) * args.seeds)  # the code that runs
    try:
        done, prepared = run_units(units, args.seeds, args.jobs, progress, dgp)
    except RunStopped as exc:  # Ctrl-C, SIGTERM: the finished runs stay tracked; no summary is written
        from tunebench.harness.commands.cli import stopped

        stopped(RunStopped(exc.signum, f"suite stopped by {exc.signal_name} after {progress.done} of "
                                       f"{progress.total} runs (they stay in MLflow); no summary written",
                           exc.run_id))
    runs = {m: {n: [seed_curve(done[(n, key_m, s)][1]) for s in range(args.seeds)]
                for (n, key_m), d in units.items() if _label(d) == m} for m in methods}
    spaces = {n: m.stats() for n, m in measured.items()}
    result = {"spaces": list(paths), "paths": paths, "methods": methods, "seeds": args.seeds, "budget": args.budget,
              "experiment": args.experiment, "space_info": {n: {"configs": m.space.size, "valid": m.n_valid,
                                                                "device": m.device, "sha256_12": m.digest}
                                                            for n, m in measured.items()},
              "scores": suite_scores(runs, spaces, args.budget),
              "run_ids": {f"{n}|{_label(units[(n, km)])}|{s}": r[0] for (n, km, s), r in done.items()
                          if (n, km) in units},
              "not_run": {dgp.method: dgp.skipped} if dgp and dgp.skipped else {},
              "dgp": suite_dgp.summary(dgp, prepared, done) if dgp else None,
              "wall_s": time.time() - t0, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
              "commit": commit}
    result["markdown"] = markdown(result)
    print(result["markdown"], flush=True)
    for path in write_summary(args.out, result, figure(result)):
        print(path, flush=True)
