"""Remote measurement against local: the same run timed on this CPU directly and through TVM RPC.

Three runs of ``python run.py method=random seed=0`` on two ResNet-18 conv layers (llvm,
``--trials`` per task, ``torch.compile`` off), one after another: **local A**, **rpc** (a tracker
and one RPC server on 127.0.0.1, :class:`tunebench.harness.rpc_fleet.LocalFleet`:
``target.rpc.tracker=... target.rpc.key=cpu``) and **local B**. The same seed draws the same
configs, so every config is timed three times; local B measures how much two local runs of the same
configs differ, the yardstick for rpc against local A.

Reported, for the configs no run marked noisy: per-config ratios rpc/A and B/A (geometric mean, median
and 90th percentile of |ratio - 1|, the share within the noise protocol's ``cv_max``), each task's
re-timed best (interleaved rounds) and the whole model's tuned latency (median of the e2e rounds) in
the three runs. The verdict ``equal`` holds when rpc/A's geometric mean and its median |ratio - 1|
are both within ``cv_max`` (5 %): rpc timings are local timings within the protocol's noise bound.

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
from _common import CRASH, add_out_args, loadavg, machine_info, out_path, provenance, run_main, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = [{"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1},
          {"in_channels": 128, "height": 28, "width": 28, "out_channels": 128, "kernel": 3, "stride": 1,
           "padding": 1}]
CV_MAX = 0.05  # measure.noise.cv_max, the protocol's bound on a clean timing's spread


def run(work: str, trials: int, extra: list[str]) -> dict:
    """One run in ``work``; its records, re-timed bests and run metrics."""
    from mlflow.tracking import MlflowClient

    from tunebench.harness.cli import layers_override

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


def compare(a: dict, rpc: dict, b: dict) -> dict:
    ta, tr, tb = _timings(a), _timings(rpc), _timings(b)
    e2e = {name: {k: r["metrics"].get(k) for k in ("e2e_latency_ms", "e2e_latency_cv", "e2e_noisy",
                                                   "tvm_default_latency_ms")}
           for name, r in (("local_a", a), ("rpc", rpc), ("local_b", b))}
    bests = {name: _bests(r) for name, r in (("local_a", a), ("rpc", rpc), ("local_b", b))}
    out = {"rpc_vs_a": _ratios(tr, ta), "b_vs_a": _ratios(tb, ta),
           "noisy": {n: sum(m["noisy"] for m in r["records"]) for n, r in (("local_a", a), ("rpc", rpc), ("local_b", b))},
           "invalid": {n: sum(not m["valid"] for m in r["records"]) for n, r in (("local_a", a), ("rpc", rpc),
                                                                              ("local_b", b))},
           "best": bests, "e2e": e2e}
    ra = out["rpc_vs_a"]
    out["equal"] = abs(ra["geomean"] - 1.0) <= CV_MAX and ra["median_abs_dev"] <= CV_MAX
    return out


def main() -> int:
    from tunebench.harness.rpc_fleet import LocalFleet

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32, help="trials per task (default 32)")
    add_out_args(ap, "rpc_vs_local")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error(f"--trials={args.trials}: must be >= 1")
    path = out_path(ap, args, "rpc_vs_local")
    before = loadavg()
    with tempfile.TemporaryDirectory(prefix="rpc-vs-local-") as tmp:
        try:
            a = run(os.path.join(tmp, "a"), args.trials, [])
            with LocalFleet(1, key="cpu", log_dir=tmp) as fleet:
                rpc = run(os.path.join(tmp, "rpc"), args.trials, [f"target.rpc.tracker={fleet.tracker}",
                                                                   "target.rpc.key=cpu"])
            b = run(os.path.join(tmp, "b"), args.trials, [])
        except RuntimeError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return CRASH
    result = {"benchmark": "rpc_vs_local", **provenance(), "machine": machine_info(), "load_before": before,
              "load_after": loadavg(), "layers": LAYERS, "trials_per_task": args.trials, "cv_max": CV_MAX,
              "wall_s": {"local_a": a["wall_s"], "rpc": rpc["wall_s"], "local_b": b["wall_s"]},
              "rpc_devices": rpc["devices"], **compare(a, rpc, b)}
    write_json(path, result)
    ra, ba = result["rpc_vs_a"], result["b_vs_a"]
    print(f"rpc/local: geomean {ra['geomean']:.3f}, median |dev| {ra['median_abs_dev']:.1%}, p90 {ra['p90_abs_dev']:.1%},"
          f" {ra['share_within_cv_max']:.0%} within {CV_MAX:.0%} ({ra['n']} configs); local B/A: geomean "
          f"{ba['geomean']:.3f}, median |dev| {ba['median_abs_dev']:.1%}, p90 {ba['p90_abs_dev']:.1%}; "
          f"equal within the noise protocol: {result['equal']}; load {before} -> {result['load_after']}; {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
