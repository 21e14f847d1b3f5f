"""The best kernels of finished runs, each timed in several fresh processes: how much a kernel's
latency depends on the process it happens to run in.

The measurement protocol judges a latency by its spread *within* one worker process (robust CV over
repeats, calibration drift). Some schedules are fast in one process and up to 2x slower in the next,
steadily within each (where the address-space layout puts their buffers matters), which no spread
within a process shows. This script rebuilds each task's best schedule as the tuning built it
(weights taken packed), then times it in ``--processes`` fresh processes, one after the other, each
with the run's thread count and TVM's time evaluator (the run's ``repeat``, ``number``,
``min_repeat_ms``): per process the median of the repeats and its robust CV, and over processes the
min, median and max of those medians with ``max/min``. ``spread_vs_noise`` compares the spread
across processes (max/min - 1) with the largest within-process robust CV.

    python benchmarks/process_spread.py records/<run id> [records/<run id> ...] [--cases c2d_1,c2d_8]
        [--processes 5] [--out PATH | --publish]

Time it on a quiet machine (nothing else of the project running); it prints the load before it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, machine_info, out_path, provenance, usage_error, write_json

from tunebench.protocol.stats import summarize

# one fresh process: load the library, time it, print the repeats (seconds) as JSON
_CHILD = """
import json, sys, numpy as np, tvm
lib_path, specs, number, repeat, min_ms = json.loads(sys.argv[1])
dev = tvm.cpu(0)
rng = np.random.default_rng(0)
args = [tvm.runtime.tensor(rng.uniform(-1, 1, size=s).astype(d), dev) for s, d in specs[:-1]]
args.append(tvm.runtime.tensor(np.zeros(specs[-1][0], dtype=specs[-1][1]), dev))
lib = tvm.runtime.load_module(lib_path)
res = lib.time_evaluator("main", dev, number=number, repeat=repeat, min_repeat_ms=min_ms)(*args)
print(json.dumps([float(r) for r in res.results]))
"""


def best_schedules(run_dir: str, cases: set[str] | None):
    """``(config, [(task name, scheduled IRModule, best latency ms)])`` of a finished TVM run."""
    from tunebench.config.load import SavedRun
    from tunebench.search_space import TraceConfig
    from tunebench.targets.tvm.scheduling import schedule
    from tunebench.targets.tvm.templates import get_template
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    with open(os.path.join(run_dir, "config.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    with open(os.path.join(run_dir, "tasks.json")) as fh:
        done = {t["id"]: t for t in json.load(fh)}
    run = SavedRun.read(cfg)
    kind = run.target_kind
    tasks = model_tasks(run.model_config, kind)[0]
    out = []
    for task in tasks:
        rec = done.get(task.id)
        if rec is None or rec.get("best_config") is None or (cases and task.name not in cases):
            continue
        if "trace" in rec["best_config"]:
            config = TraceConfig(index=rec["best_index"], trace=json.dumps(rec["best_config"]["trace"]))
        else:
            config = get_template(task.kind, kind, rec["template"]).make_space(task.mod).get(rec["best_index"])
        out.append((task.name, schedule(task.mod, task.kind, kind, config, variant=rec["template"]),
                    rec["best_latency_ms"]))
    return cfg, out


def time_in_processes(lib_path: str, specs, runner: dict, threads: int, processes: int) -> list[list[float]]:
    """The repeats (ms) of ``processes`` fresh processes timing the library, one after the other."""
    env = {**os.environ, "TVM_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    arg = json.dumps([lib_path, specs, runner["number"], runner["repeat"], runner["min_repeat_ms"]])
    out = []
    for _ in range(processes):
        res = subprocess.run([sys.executable, "-c", _CHILD, arg], env=env, capture_output=True, text=True,
                             timeout=600)
        if res.returncode:
            raise RuntimeError(f"timing process failed: {res.stderr.strip().splitlines()[-1:]}")
        out.append([1e3 * s for s in json.loads(res.stdout.strip().splitlines()[-1])])
    return out


def rcv(values) -> float:
    """Robust CV: 1.4826 * MAD / median (the measurement protocol's, :func:`summarize`)."""
    return summarize(values).rcv


def spread_row(name: str, repeats: list[list[float]], tuned_ms: float) -> dict:
    per_process = [summarize(r) for r in repeats]
    medians = [p.median for p in per_process]
    within = max(p.rcv for p in per_process)
    ratio = max(medians) / min(medians)
    return {"task": name, "tuned_ms": tuned_ms, "process_medians_ms": medians, "within_rcv_max": within,
            "min_ms": min(medians), "median_ms": float(np.median(medians)), "max_ms": max(medians),
            "max_over_min": ratio, "spread_vs_noise": (ratio - 1) / within if within > 0 else float("inf")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folders (<records_dir>/<run id>) of finished TVM runs")
    ap.add_argument("--cases", default=None, help="comma-separated task names (default: every task)")
    ap.add_argument("--processes", type=int, default=5, help="fresh processes per kernel (default 5)")
    add_out_args(ap, "process_spread")
    a = ap.parse_args()
    path = out_path(ap, a, "process_spread")
    if a.processes < 2:
        usage_error(f"--processes {a.processes}: must be at least 2")
    for run in a.runs:
        if not all(os.path.exists(os.path.join(run, f)) for f in ("config.yaml", "tasks.json")):
            usage_error(f"{run!r} is not a finished run folder (config.yaml + tasks.json)")
        with open(os.path.join(run, "config.yaml")) as fh:
            target = yaml.safe_load(fh)["target"]
        if target["kind"] != "llvm" or (target.get("rpc") or {}).get("tracker"):
            usage_error(f"{run!r}: target {target['kind']!r}{' over RPC' if target['kind'] == 'llvm' else ''}; "
                        "valid: a run on this machine's CPU (llvm)")
    cases = set(a.cases.split(",")) if a.cases else None
    print(f"load before: {loadavg()}", flush=True)
    import tvm

    from tunebench.targets.tvm.templates.fused import prepacked
    from tunebench.targets.tvm.worker import arg_specs

    result = {**provenance(), "machine": machine_info(), "loadavg_before": loadavg(), "processes": a.processes,
              "runs": []}
    with tempfile.TemporaryDirectory(prefix="tunebench-spread-") as tmp:
        for run in a.runs:
            cfg, scheds = best_schedules(run, cases)
            runner, threads = cfg["target"]["runner"], cfg["target"].get("num_cores") or os.cpu_count()
            rows = []
            for name, sched, tuned_ms in scheds:
                timed, lib_path = prepacked(sched), os.path.join(tmp, f"{name}.so")
                tvm.compile(timed, target=_host_target(cfg, threads)).export_library(lib_path)
                rows.append(spread_row(name, time_in_processes(lib_path, arg_specs(timed), runner, threads,
                                                               a.processes), tuned_ms))
                r = rows[-1]
                print(f"{os.path.basename(run)} {cfg['method']['name']} {name}: tuned {tuned_ms:.4g} ms; per process "
                      f"{', '.join(f'{m:.4g}' for m in r['process_medians_ms'])} ms; max/min {r['max_over_min']:.2f} "
                      f"(within-process rcv <= {r['within_rcv_max']:.3f})", flush=True)
            result["runs"].append({"run": os.path.basename(os.path.normpath(run)), "method": cfg["method"]["name"],
                                   "template": cfg["target"].get("template"), "seed": cfg.get("seed"), "tasks": rows})
    result["loadavg_after"] = loadavg()
    write_json(path, result)
    print(f"wrote {path}")


def _host_target(cfg: dict, threads: int):
    """The run's LLVM target on this machine: its ``mcpu`` (``native``: this CPU's) and ``threads``."""
    import tvm

    from tunebench.targets.tvm.llvm import llvm_cpu

    return tvm.target.Target({"kind": "llvm", "mcpu": llvm_cpu(cfg["target"].get("mcpu") or "native"),
                              "num-cores": threads})


if __name__ == "__main__":
    main()
