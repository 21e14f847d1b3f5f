"""What the noise signals measure on this machine, quiet and loaded, and whether a mark predicts a ratio that moved.

The same small set of timings is taken over and over, in alternating blocks of three conditions:
``quiet`` (nothing else started), ``yes1`` (one ``yes > /dev/null`` loader) and ``yes2`` (two). The set:
two tuned single-layer models (tuned once at the start, ``--method`` with ``--trials``) each timed
against PyTorch eager, exactly as the end-to-end step times them (``measure``/``e2e`` defaults, every
row in its own worker with the target's threads): a *speedup* is ``--timings K`` (default ``e2e.timings``)
separate timings -- each the calibration kernel, ``e2e.rounds`` interleaved rounds, the calibration kernel
again, taken again while it has a noisy row (``measure.noise.remeasure``) -- taken as one result by the
harness's own functions (:func:`tunebench.targets.tvm.e2e.timing.take_timings`,
:func:`tunebench.targets.tvm.e2e.pooled.pooled`): the geometric mean of the K per-timing ratios PyTorch /
tuned with its Student-t interval over them (as published). Every kept timing records every signal the
measurement protocol judges (docs/MEASUREMENT.md): each row's robust CV, the foreign CPU during the rounds,
the calibration kernel's time before and after (so its slowdown against any reference, and its drift),
the per-round medians, and its own ratio with the interval over its rounds. Results saved before
``--timings`` existed hold one timing per speedup.

The analysis (:mod:`_noise_analysis`; ``--analyse FILE`` re-runs it on a saved result) reports for the
speedups as published how often their interval contains their layer's quiet median and how the default
marks (a speedup marked when any of its timings is) predict one that moved; per signal and condition
the distribution and the share of timings it marks, under the shipped policy and under candidate
policies; for each policy how often a marked timing's ratio moved (left the quiet median of its layer
by more than its interval's half-width) against an unmarked one; and how often a single timing's
interval, built in several ways, contains the quiet median (:mod:`_interval_analysis`).

The workers and the loaders are started once; the loaders are stopped on exit (also on Ctrl-C). The
benchmark's calibration reference lives in a temporary cache (the user's cached reference is read,
never written, and recorded for comparison).

Usage: python benchmarks/noise_marks.py [--minutes 30] [--block-s 60] [--timings K] [--method autotvm]
    [--trials 16] [--seed 0] [--out PATH | --publish]
       python benchmarks/noise_marks.py --analyse FILE [--out PATH | --publish]   (analysis again; written when asked)
Runtime: the tuning (~1 min) plus ``--minutes``. Exit codes: 0 done; 2 bad arguments; 4 a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import add_out_args, loadavg, machine_info, out_path, provenance, run_main, usage_error, write_json
from _layers import best_config, label, layer_task, tune_layers

NAME = "noise_marks"
CONDITIONS = {"quiet": 0, "yes1": 1, "yes2": 2}  # condition -> loaders
#: two small layers (ResNet-18's last 3x3 convolution and a 1x1 projection): ~1-3 ms each on 2 cores
LAYERS = [
    {"in_channels": 256, "height": 14, "width": 14, "out_channels": 256, "kernel": 3, "stride": 1, "padding": 1},
    {"in_channels": 128, "height": 28, "width": 28, "out_channels": 256, "kernel": 1, "stride": 2, "padding": 0},
]


class Loaders:
    """``yes > /dev/null`` processes, as many as asked; all stopped by :meth:`set` (0) and on exit."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def set(self, n: int) -> None:
        while len(self.procs) > n:
            p = self.procs.pop()
            p.kill()
            p.wait()
        while len(self.procs) < n:
            self.procs.append(subprocess.Popen(["yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.set(0)


@dataclasses.dataclass
class Subject:
    """One layer's rows (tuned, torch), loaded once in their workers."""

    label: str
    rows: list


def prepare(target, entries: dict, settings, workdir: str) -> list[Subject]:
    """Build and load every layer's rows (outputs checked against PyTorch) in their own workers."""
    from tunebench.targets.tvm.e2e.build import flat_numpy
    from tunebench.targets.tvm.e2e.timing import _build_rows, _load_rows
    from tunebench.targets.tvm.scheduling import schedule

    out = []
    for layer in LAYERS:
        task, tasks, imported = layer_task(layer, target.kind, target.template)
        entry = entries.get(task.id)
        if entry is None or entry.get("best_config") is None:
            raise RuntimeError(f"layer {label(layer)}: the tuning run has no output-checked best config")
        sched = schedule(task.mod, task.kind, target.kind, best_config(entry, task), variant=task.template)
        rows = _build_rows(imported, tasks, {task.id: sched}, target, settings, workdir, label(layer))
        for row in rows:
            row.worker.start()
        out.append(Subject(label(layer), _load_rows(rows, flat_numpy(imported.reference_output()),
                                                    settings.tolerance, label(layer))))
    return out


def _record(subject: Subject, timing: dict) -> dict:
    """One timing (a kept one of :func:`~tunebench.targets.tvm.e2e.timing.take_timings`), every signal."""
    from tunebench.protocol.stats import timings_ratio_ci

    pre, post = timing["calibration"]
    judged = timing["rows"]
    g, lo, hi = timings_ratio_ci([judged["torch"]["round_medians"]], [judged["tuned"]["round_medians"]])
    rows = {name: {"median_ms": r["stats"].median, "rcv": r["stats"].rcv, "cv": r["stats"].cv,
                   "round_medians_ms": r["round_medians"], "noisy": r["verdict"].noisy,
                   "reasons": r["verdict"].reasons} for name, r in judged.items()}
    calib = {f"{k}_{w}": c[key] for w, c in (("pre", pre), ("post", post))
             for k, key in (("s", "median_s"), ("cv", "cv"), ("foreign", "foreign_cpu"))}
    return {"layer": subject.label, "loadavg": timing["loadavg"], "foreign_cpu": timing["foreign_cpu"],
            "drift": timing["drift"], "slowdown_run": timing["slowdown"], "calib": calib, "rows": rows,
            "ratio": {"g": g, "lo": lo, "hi": hi}}


def one_speedup(subject: Subject, settings, target) -> tuple[dict, list[dict]]:
    """One speedup of ``subject`` as the end-to-end step takes it: ``e2e.timings`` timings (each retaken while
    noisy, :func:`~tunebench.targets.tvm.e2e.timing.take_timings`) taken as one result
    (:func:`~tunebench.targets.tvm.e2e.pooled.pooled`). ``(the speedup, its kept timings' records)``."""
    from tunebench.protocol.noise import CpuMonitor
    from tunebench.targets.tvm.e2e.pooled import pooled
    from tunebench.targets.tvm.e2e.timing import take_timings

    monitor = CpuMonitor(lambda: [r.worker.pid for r in subject.rows if r.worker.pid] + target.worker_pids())
    kept, tries = take_timings(subject.rows, settings, target, monitor)
    res = pooled(kept, target.policy)
    g, lo, hi = res["speedups"]["torch"]
    verdict = res["speedup_verdicts"]["torch"]
    return ({"layer": subject.label, "g": g, "lo": lo, "hi": hi, "timing_ratios": res["timing_speedups"]["torch"],
             "tries": tries, "noisy": verdict.noisy, "reasons": verdict.reasons},
            [_record(subject, t) for t in kept])


def run_blocks(args, subjects: list[Subject], settings, target) -> tuple[list[dict], list[dict], float]:
    """Alternating blocks of the conditions for ``--minutes``: ``(every kept timing with its block, condition
    and speedup index, every speedup with its block and condition, seconds of the blocks)``."""
    timings: list[dict] = []
    speedups: list[dict] = []
    t0 = time.monotonic()
    names = list(CONDITIONS)
    with Loaders() as loaders:
        block = 0
        while time.monotonic() - t0 < args.minutes * 60:
            cond = names[block % len(names)]
            loaders.set(CONDITIONS[cond])
            time.sleep(args.settle_s)  # let the load build up (or die away)
            end = time.monotonic() + args.block_s
            n0 = len(speedups)
            while time.monotonic() < end:
                for subject in subjects:
                    where = {"block": block, "condition": cond, "t_s": time.monotonic() - t0}
                    speedup, kept = one_speedup(subject, settings, target)
                    timings += [{**where, "speedup": len(speedups), "timing": i, **t} for i, t in enumerate(kept)]
                    speedups.append({**where, **speedup, "s": time.monotonic() - t0 - where["t_s"]})
            print(f"block {block:3d} {cond:5s}: {len(speedups) - n0} speedups of {settings.timings} timing(s); "
                  f"{(time.monotonic() - t0) / 60:5.1f} of {args.minutes} min; load {os.getloadavg()[0]:.2f}",
                  flush=True)
            block += 1
    return timings, speedups, time.monotonic() - t0


def collect(args) -> dict:
    """Tune the layers, then time them in the blocks; the result without its analysis."""
    from tunebench.harness.commands.cli import setup_logging
    from tunebench.protocol.machine import MachineCache
    from tunebench.protocol.noise import NoisePolicy
    from tunebench.targets import make_target

    setup_logging()
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "cache")
        cfg, entries, _ = tune_layers(args.method, work, args.trials, args.seed, LAYERS,
                                      ["target=llvm", f"measure.cache_dir={cache}", "measure.peak=false"])
        settings = dataclasses.replace(cfg.e2e, torch_compile=False, default_n_runs=0,
                                       timings=args.timings or cfg.e2e.timings)
        policy = NoisePolicy.from_settings(cfg.measure.noise)
        target = make_target(cfg.target, cfg.measure)
        with target:
            user_ref = MachineCache(target.machine.key).calibration_reference()
            subjects = prepare(target, entries, settings, work)
            try:
                timings, speedups, blocks_s = run_blocks(args, subjects, settings, target)
            finally:
                for s in subjects:
                    for row in s.rows:
                        row.worker.close()
            desc = target.describe()
    return {"method": args.method, "trials_per_layer": args.trials, "seed": args.seed, "minutes": args.minutes,
            "block_s": args.block_s, "layers": [label(x) for x in LAYERS], "e2e_settings": dataclasses.asdict(settings),
            "policy": dataclasses.asdict(policy), "user_cached_reference_s": user_ref, "machine": machine_info(),
            "device": desc, "loadavg_before": load_before, "loadavg_after": loadavg(), "timings_per_speedup":
            settings.timings, "blocks_s": blocks_s, "speedups": speedups, "timings": timings,
            **provenance()}


def parse_args():
    from tunebench.config.experiment import E2ESettings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="length of the blocks' part (default 30)")
    ap.add_argument("--block-s", type=float, default=60.0, help="seconds of timings per block (default 60)")
    ap.add_argument("--settle-s", type=float, default=5.0, help="seconds after a condition changes before timing")
    ap.add_argument("--method", default="autotvm")
    ap.add_argument("--trials", type=int, default=16, help="tuning trials per layer (default 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timings", type=int, default=None, metavar="K",
                    help="timings per speedup, as the end-to-end step takes them (default: e2e.timings, "
                         f"{E2ESettings().timings})")
    ap.add_argument("--analyse", default=None, metavar="FILE", help="only analyse a saved result")
    add_out_args(ap, NAME)
    args = ap.parse_args()
    if args.timings is not None and not 1 <= args.timings <= 100:
        usage_error(f"--timings {args.timings}: must be 1..100 (as e2e.timings)")
    for name in ("minutes", "block_s", "trials"):
        if getattr(args, name) <= 0:
            usage_error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be positive")
    if args.settle_s < 0:
        usage_error(f"--settle-s {args.settle_s}: must be >= 0")
    if args.analyse and not os.path.isfile(args.analyse):
        usage_error(f"--analyse {args.analyse}: no such file")
    args.path = out_path(ap, args, NAME)
    return args


def main() -> int:
    from _noise_analysis import analyse, print_report

    args = parse_args()
    if args.analyse:
        with open(args.analyse) as fh:
            out = json.load(fh)
    else:
        out = collect(args)
    out["analysis"] = {**analyse(out), "analysed": provenance()}
    print_report(out)
    if not args.analyse or args.out or args.publish:
        write_json(args.path, out)
        print(f"written: {os.path.relpath(args.path)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
