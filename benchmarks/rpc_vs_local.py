"""Remote measurement against local: the same run timed on this CPU directly and through TVM RPC.

Four runs of ``python run.py method=random seed=0`` on two ResNet-18 conv layers (llvm,
``--trials`` per task, ``torch.compile`` off), one after another: **local A**, **rpc 1** (a tracker
and one RPC server on 127.0.0.1, :class:`tunebench.targets.tvm.rpc_fleet.LocalFleet`:
``target.rpc.tracker=... target.rpc.key=cpu``), **local B**, **rpc 2**. The same seed draws the same
configs, so every config is timed four times; A against B and rpc 1 against rpc 2 measure how much
two runs of the same configs differ on the same path, the yardstick for rpc against local.

Reported, for the configs no run marked noisy: per-config ratios rpc/local (each side the geometric
mean of its two runs), B/A and rpc 2/rpc 1: geometric mean, median and 90th percentile of
|ratio - 1|, the share within the noise protocol's ``cv_max``; each task's re-timed best
(interleaved rounds) and the whole model's tuned latency in the four runs; every config's four
latencies. The verdict ``equal`` holds when rpc/local's geometric mean is within ``cv_max`` (5 %) of
1 and its median |ratio - 1| is no larger than ``cv_max`` or than the larger of the two same-path
medians: rpc timings are local timings within the protocol's noise bound.

Exit codes: 0 measured (verdict in the JSON), 2 bad arguments, 4 a run failed.

Usage: python benchmarks/rpc_vs_local.py [--trials 32] [--out PATH | --publish]
  default output: benchmarks/results/local/rpc_vs_local.json (untracked).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import CRASH, add_out_args, loadavg, machine_info, out_path, provenance, run_main, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = [{"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1},
          {"in_channels": 128, "height": 28, "width": 28, "out_channels": 128, "kernel": 3, "stride": 1,
           "padding": 1}]
CV_MAX = 0.05  # measure.noise.cv_max, the protocol's bound on a clean timing's spread


def run(work: str, trials: int, extra: list[str]) -> dict:
    """One run in ``work``; its records, re-timed bests and run metrics."""
    from mlflow.tracking import MlflowClient

    from tunebench.harness.setup.compose import layers_override

    os.makedirs(work)
    cmd = [sys.executable, os.path.join(ROOT, "run.py"), f"workdir={work}", "method=random", "seed=0",
           f"budget.trials_per_task={trials}", layers_override(LAYERS), "e2e.torch_compile=false",
           "progress=false", "experiment=rpc_vs_local", *extra]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-3000:] + res.stderr[-3000:])
        raise RuntimeError(f"run {' '.join(extra) or 'local'} failed (exit {res.returncode})")
    folder = glob.glob(os.path.join(work, "records", "*"))[0]
    with open(os.path.join(folder, "records.jsonl")) as fh:
        recs = [json.loads(line) for line in fh]
    with open(os.path.join(folder, "retimed.jsonl")) as fh:
        retimed = [json.loads(line) for line in fh]
    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    metrics = client.search_runs([client.get_experiment_by_name("rpc_vs_local").experiment_id])[0].data.metrics
    return {"wall_s": time.perf_counter() - t0, "records": recs, "retimed": retimed, "metrics": metrics,
            "devices": sorted({r.get("device", "") for r in recs})}


def _timings(r: dict) -> dict:
    """(task, config index) -> search latency (s) of the valid, clean measurements."""
    return {(m["task_id"], m["index"]): m["latency_s"] for m in r["records"] if m["valid"] and not m["noisy"]}


def _ratios(num: dict, den: dict) -> dict:
    keys = sorted(set(num) & set(den))
    ratios = [num[k] / den[k] for k in keys]
    dev = sorted(abs(x - 1.0) for x in ratios)
    return {"n": len(ratios), "geomean": math.exp(statistics.fmean(math.log(x) for x in ratios)),
            "median_abs_dev": statistics.median(dev), "p90_abs_dev": dev[int(0.9 * (len(dev) - 1))],
            "max_abs_dev": dev[-1], "share_within_cv_max": sum(d <= CV_MAX for d in dev) / len(dev)}


def _bests(r: dict) -> dict:
    """task -> the chosen config's re-timed median (ms) and its re-timed CV."""
    return {x["task_id"]: {"index": x["index"], "ms": x["latency_s"] * 1e3, "cv": x["cv"], "noisy": x["noisy"]}
            for x in r["retimed"] if x.get("chosen")}


def _geo(x: float, y: float) -> float:
    return math.sqrt(x * y)


def compare(runs: dict) -> dict:
    """Ratios, bests, e2e and per-config latencies of the runs ``local_a``, ``rpc_1``, ``local_b``, ``rpc_2``."""
    t = {name: _timings(r) for name, r in runs.items()}
    keys = sorted(set.intersection(*(set(x) for x in t.values())))
    local = {k: _geo(t["local_a"][k], t["local_b"][k]) for k in keys}
    rpc = {k: _geo(t["rpc_1"][k], t["rpc_2"][k]) for k in keys}
    out = {"rpc_vs_local": _ratios(rpc, local), "b_vs_a": _ratios(t["local_b"], t["local_a"]),
           "rpc2_vs_rpc1": _ratios(t["rpc_2"], t["rpc_1"]),
           "noisy": {n: sum(m["noisy"] for m in r["records"]) for n, r in runs.items()},
           "invalid": {n: sum(not m["valid"] for m in r["records"]) for n, r in runs.items()},
           "best": {n: _bests(r) for n, r in runs.items()},
           "e2e": {n: {k: r["metrics"].get(k) for k in ("e2e_latency_ms", "e2e_latency_cv", "e2e_noisy",
                                                        "tvm_default_latency_ms")} for n, r in runs.items()},
           "configs": [{"task_id": k[0], "index": k[1], **{n: t[n][k] for n in runs}} for k in keys]}
    rl = out["rpc_vs_local"]
    same_path = max(out["b_vs_a"]["median_abs_dev"], out["rpc2_vs_rpc1"]["median_abs_dev"])
    out["equal"] = abs(rl["geomean"] - 1.0) <= CV_MAX and rl["median_abs_dev"] <= max(CV_MAX, same_path)
    return out


def main() -> int:
    from tunebench.targets.tvm.rpc_fleet import LocalFleet

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32, help="trials per task (default 32)")
    add_out_args(ap, "rpc_vs_local")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error(f"--trials={args.trials}: must be >= 1")
    path = out_path(ap, args, "rpc_vs_local")
    before = loadavg()
    runs = {}
    with tempfile.TemporaryDirectory(prefix="rpc-vs-local-") as tmp:
        try:
            with LocalFleet(1, key="cpu", log_dir=tmp) as fleet:  # idle between its runs
                remote = [f"target.rpc.tracker={fleet.tracker}", "target.rpc.key=cpu"]
                for name, extra in (("local_a", []), ("rpc_1", remote), ("local_b", []), ("rpc_2", remote)):
                    runs[name] = run(os.path.join(tmp, name), args.trials, extra)
        except RuntimeError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return CRASH
    result = {"benchmark": "rpc_vs_local", **provenance(), "machine": machine_info(), "load_before": before,
              "load_after": loadavg(), "layers": LAYERS, "trials_per_task": args.trials, "cv_max": CV_MAX,
              "wall_s": {n: r["wall_s"] for n, r in runs.items()},
              "rpc_devices": sorted({d for n in ("rpc_1", "rpc_2") for d in runs[n]["devices"]}), **compare(runs)}
    write_json(path, result)
    rl, ba, rr = result["rpc_vs_local"], result["b_vs_a"], result["rpc2_vs_rpc1"]
    print(f"rpc/local: geomean {rl['geomean']:.3f}, median |dev| {rl['median_abs_dev']:.1%}, p90 "
          f"{rl['p90_abs_dev']:.1%}, {rl['share_within_cv_max']:.0%} within {CV_MAX:.0%} ({rl['n']} configs); "
          f"local B/A: geomean {ba['geomean']:.3f}, median |dev| {ba['median_abs_dev']:.1%}; rpc 2/1: geomean "
          f"{rr['geomean']:.3f}, median |dev| {rr['median_abs_dev']:.1%}; equal within the noise protocol: "
          f"{result['equal']}; load {before} -> {result['load_after']}; {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
