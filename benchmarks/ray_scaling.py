"""Sweep scaling on Ray: the same 4-run sweep with 1 and with 2 local Ray workers.

Runs ``python run.py -m hydra/launcher=tunebench_ray hydra.launcher.num_cpus=W method=random
seed=0,1,2,3`` on one ResNet-18 layer (llvm, ``--trials`` per run, end-to-end step off) for W = 1
and 2. Every job is limited to one core: one Ray CPU per job, ``target.num_cores=1`` (TVM's
kernels and the calibration kernel run one thread), ``target.builder.n_parallel=1`` (one build
process). Reports each sweep's wall time (from the driver's start to its exit), the speed-up
(ideal 2x) and, from the four runs' record files, whether any two measurements overlapped on the
CPU (a measurement was timed during ``[timestamp - run_s, timestamp]``; the device lock must keep
them apart across jobs), the seconds spent under the device lock (timing, the protocol's
calibration and re-timing, output checks: the serial part of the sweep, which bounds the speed-up
by Amdahl's law: ``amdahl_bound``), the seconds jobs waited for the lock, and the measurements the
noise protocol marked noisy (a job's builds share the cores with the other job's timing).

Each sweep runs in a network namespace of its own whose only interface is the loopback where
``unshare -n`` works (root), since a local Ray instance listens on every interface; ``--no-netns``
runs it in the machine's namespace.

Exit codes: 0 measured (the verdict is in the JSON: ``overlaps`` must be 0); 1 measurements
overlapped; 2 bad arguments; 4 a sweep failed.

Usage: python benchmarks/ray_scaling.py [--trials 24] [--out PATH | --publish] [--no-netns]
  default output: benchmarks/results/local/ray_scaling.json (untracked).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import CRASH, add_out_args, loadavg, machine_info, out_path, provenance, run_main, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYER = {"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1}


def sweep_command(workers: int, trials: int) -> list[str]:
    from tunebench.harness.setup.compose import layers_override

    return [sys.executable, os.path.join(ROOT, "run.py"), "-m", "hydra/launcher=tunebench_ray",
            f"hydra.launcher.num_cpus={workers}", "hydra.launcher.num_cpus_per_job=1", "method=random",
            "seed=0,1,2,3", f"budget.trials_per_task={trials}", layers_override([LAYER]), "target.num_cores=1",
            "target.builder.n_parallel=1", "e2e.enabled=false", "progress=false", "experiment=ray_scaling"]


def in_netns(cmd: list[str]) -> list[str]:
    """``cmd`` in a fresh network namespace with only the loopback up."""
    script = 'ip link set lo up && exec "$@"'
    return ["unshare", "-n", "sh", "-c", script, "sh", *cmd]


def run_sweep(workers: int, trials: int, work: str, netns: bool) -> dict:
    os.makedirs(work)
    cmd = sweep_command(workers, trials)
    t0 = time.perf_counter()
    res = subprocess.run(in_netns(cmd) if netns else cmd, cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-3000:] + res.stderr[-3000:])
        raise RuntimeError(f"the {workers}-worker sweep failed (exit {res.returncode})")
    return {"workers": workers, "wall_s": wall, **records_summary(work)}


def records_summary(work: str) -> dict:
    from tunebench.record_file import read_records

    files = sorted(glob.glob(os.path.join(work, "records", "*", "records.jsonl")))
    spans, held = [], 0.0
    for path in files:
        recs = read_records(path)
        spans += [(r["timestamp"] - r["run_s"], r["timestamp"]) for r in recs if r["run_s"] > 0]
        held += sum(r["run_s"] for r in recs)
    spans.sort()
    overlaps = sum(1 for (_, e1), (s2, _) in zip(spans, spans[1:]) if e1 > s2 + 0.01)
    return {"runs": len(files), "measurements": len(spans), "overlaps": overlaps, "device_s": held,
            **run_metrics(work)}


def run_metrics(work: str) -> dict:
    """Sums over the sweep's MLflow runs: seconds under the device lock (timing, the protocol's
    calibration and re-timing, output checks), builds, waiting for the lock, noisy measurements and tasks."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    total = {k: sum(float(r.data.metrics.get(k, 0.0)) for r in runs)
             for k in ("run_phase_s", "protocol_s", "check_s", "build_phase_s", "lock_wait_s", "n_noisy_measurements",
                       "n_noisy_tasks")}
    total["locked_s"] = total["run_phase_s"] + total["protocol_s"] + total["check_s"]
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=24, help="trials per run (default 24)")
    ap.add_argument("--no-netns", action="store_true", help="run the sweeps in this machine's network namespace")
    add_out_args(ap, "ray_scaling")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error(f"--trials={args.trials}: must be >= 1")
    path = out_path(ap, args, "ray_scaling")
    netns = not args.no_netns and shutil.which("unshare") is not None
    before = loadavg()
    with tempfile.TemporaryDirectory(prefix="ray-scaling-") as tmp:
        try:
            sweeps = [run_sweep(w, args.trials, os.path.join(tmp, f"w{w}"), netns) for w in (1, 2)]
        except RuntimeError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return CRASH
    one, two = sweeps
    serial = one["locked_s"]  # Amdahl: what holds the device lock cannot run in parallel on one device
    bound = one["wall_s"] / (serial + (one["wall_s"] - serial) / 2)
    result = {"benchmark": "ray_scaling", **provenance(), "machine": machine_info(), "load_before": before,
              "load_after": loadavg(), "layer": LAYER, "trials_per_run": args.trials, "netns": netns,
              "sweeps": sweeps, "speedup": one["wall_s"] / two["wall_s"], "amdahl_bound": bound,
              "overlaps": sum(s["overlaps"] for s in sweeps)}
    write_json(path, result)
    print(f"1 worker {one['wall_s']:.1f} s, 2 workers {two['wall_s']:.1f} s: speed-up {result['speedup']:.2f}x "
          f"(ideal 2x; {bound:.2f}x with the 1-worker sweep's {serial:.1f} s under the device lock serial); "
          f"lock waits {two['lock_wait_s']:.1f} s; noisy measurements {one['n_noisy_measurements']:.0f} -> "
          f"{two['n_noisy_measurements']:.0f}; "
          f"overlapping measurements: {result['overlaps']}; load {before} -> {result['load_after']}; {path}")
    return 1 if result["overlaps"] else 0


if __name__ == "__main__":
    sys.exit(run_main(main))
