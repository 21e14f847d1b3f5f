"""Trials per minute and harness overhead for one ResNet-18 layer on `llvm`.

Tunes ResNet-18's 3x3 conv of the 56x56 stage (64 -> 64, pad 1, bias + ReLU fused) with
`method=random` through the full harness (worker processes, records, MLflow in a temporary
embedded store, the measurement protocol of docs/MEASUREMENT.md; the end-to-end step is off) and
reports, from the run's own metrics, as shares of the run's wall time (`wall_s`):

- the build phase (template + compile, in parallel workers) and the run phase (timing on the
  device), the output check, and the protocol (`protocol_s`: the calibration kernel around the
  task and the final re-timing of its best configs; the machine's peak is measured before the
  clock, once per machine, and is in neither);
- the harness overhead: wall minus all of the above and minus the time spent waiting for another
  run's device lock (`lock_wait_s`, reported separately): method ask/tell, records, MLflow, process
  communication;
- trials per minute of tuning wall time (wall minus check and protocol; worker start-up excluded);
- `accounted_share`: build + run + check + protocol + lock wait; above 100 % the phases would
  overlap and the overhead (clipped at 0) be understated: a warning line says so;
- the noise evidence: noisy tasks and measurements, the largest calibration slowdown, the seconds
  spent waiting for another run's device lock, the load average before and after.

Exit codes:
  0  harness overhead at most 10 % of wall time;
  1  DEFECT: overhead above 10 % on a clean run (no noise evidence);
  3  overhead above 10 % on a noisy machine (noisy tasks or measurements, calibration slowdown
     above `measure.noise.slowdown_max`, or more than 1 % of wall time waiting for another run's
     device lock): the figure is no verdict on the harness; run it again on a quiet machine;
  2  bad arguments (argparse) or bad input (tunebench's one-line `error: ...`);
  4  the benchmark itself failed (a traceback: build, worker or tracking error).

Usage: python benchmarks/harness_overhead.py [--trials 64] [--seed 0] [--out PATH | --publish]
  default output: benchmarks/results/local/harness_overhead.json (untracked);
  --publish: benchmarks/results/harness_overhead.json (tracked, cited by docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from _common import add_out_args, loadavg, machine_info, out_path, provenance, run_main, write_json

LAYER = {"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1}
NAME = "harness_overhead"
OVERHEAD_MAX = 0.10  # harness overhead above this share of wall time is a defect (on a clean run)
LOCK_WAIT_MAX = 0.01  # waiting longer than this share of wall time for another run's lock: a busy machine


def tune(trials: int, seed: int) -> tuple[dict, dict, float]:
    """One `method=random` run on LAYER in a temporary work folder: ``(config, run metrics, command s)``."""
    from mlflow.tracking import MlflowClient

    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config, layers_override

    with tempfile.TemporaryDirectory() as work:
        cfg = compose_config([f"workdir={work}", "experiment=bench", "progress=false", f"seed={seed}",
                              "method=random", f"budget.trials_per_task={trials}", "e2e.enabled=false",
                              layers_override([LAYER])])
        t0 = time.perf_counter()
        run_id = run_experiment(cfg)
        total = time.perf_counter() - t0
        metrics = MlflowClient(f"sqlite:///{work}/mlflow.db").get_run(run_id).data.metrics
    return cfg, metrics, total


def report(m: dict, total: float) -> dict:
    """The benchmark's figures from the run metrics ``m`` (shares of the run's wall time)."""
    wall = m["wall_s"]
    tuning = wall - m["check_s"] - m["protocol_s"]

    def share(x: float) -> float:
        return round(x / wall, 4) if wall > 0 else float("nan")

    return {
        "trials": int(m["n_measurements"]), "invalid": int(m["n_invalid"]),
        "wall_s": round(wall, 2), "tuning_wall_s": round(tuning, 2),
        "build_phase_s": round(m["build_phase_s"], 2), "run_phase_s": round(m["run_phase_s"], 2),
        "check_s": round(m["check_s"], 2), "protocol_s": round(m["protocol_s"], 2),
        "lock_wait_s": round(m.get("lock_wait_s", 0.0), 2),
        "trials_per_minute": round(m["n_measurements"] / tuning * 60, 1) if tuning > 0 else None,
        "build_share": share(m["build_phase_s"]), "run_share": share(m["run_phase_s"]),
        "check_share": share(m["check_s"]), "protocol_share": share(m["protocol_s"]),
        "lock_wait_share": share(m.get("lock_wait_s", 0.0)),
        "accounted_share": share(m["build_phase_s"] + m["run_phase_s"] + m["check_s"] + m["protocol_s"]
                                 + m.get("lock_wait_s", 0.0)),
        "harness_overhead_share": round(m["harness_overhead_share"], 4),
        "peak_gflops": round(m["peak_gflops"], 1) if "peak_gflops" in m else None,
        "whole_command_s": round(total, 1),
    }


def noise_evidence(m: dict, policy, lock_wait_share: float) -> tuple[dict, list[str]]:
    """The run's noise signals and the reasons (empty: a clean run) they give to distrust its timing."""
    ev = {"n_noisy_tasks": int(m.get("n_noisy_tasks", 0)),
          "n_noisy_measurements": int(m.get("n_noisy_measurements", 0)),
          "calib_max_slowdown": round(m.get("calib_max_slowdown", 0.0), 3),
          "slowdown_max": policy.slowdown_max}
    reasons = []
    if ev["n_noisy_tasks"]:
        reasons.append(f"{ev['n_noisy_tasks']} noisy task(s)")
    if ev["n_noisy_measurements"]:
        reasons.append(f"{ev['n_noisy_measurements']} noisy measurement(s)")
    if ev["calib_max_slowdown"] > policy.slowdown_max:
        reasons.append(f"calibration slowdown {ev['calib_max_slowdown']:.2f} > {policy.slowdown_max:g}")
    if lock_wait_share > LOCK_WAIT_MAX:
        reasons.append(f"{lock_wait_share:.1%} of wall time waiting for another run's device lock")
    return ev, reasons


def verdict(out: dict, reasons: list[str]) -> int:
    """Print the verdict line(s); returns the exit code (module docstring)."""
    share = out["harness_overhead_share"]
    print(f"harness overhead {share:.2%} of wall time (limit {OVERHEAD_MAX:.0%}); protocol {out['protocol_share']:.1%}, "
          f"build {out['build_share']:.1%}, run {out['run_share']:.1%}, check {out['check_share']:.1%}; "
          f"{out['trials_per_minute']} trials/min; load average {out['loadavg_before']} -> {out['loadavg_after']}")
    if out["accounted_share"] > 1.0:
        print(f"warning: build + run + check + protocol + lock wait add up to {out['accounted_share']:.1%} of wall "
              "time: some phases overlap, so the overhead is understated (clipped at 0)", file=sys.stderr)
    if share <= OVERHEAD_MAX:
        if reasons:
            print(f"note: the machine was noisy ({'; '.join(reasons)}); the timings of this run are marked")
        return 0
    if reasons:
        print(f"NOISY MACHINE: harness overhead {share:.1%} of wall time is above {OVERHEAD_MAX:.0%}, but the run "
              f"shows noise ({'; '.join(reasons)}; load average {out['loadavg_before']} -> {out['loadavg_after']}): "
              "this figure is no verdict on the harness; run it again on a quiet machine", file=sys.stderr)
        return 3
    print(f"DEFECT: harness overhead {share:.1%} of wall time is above {OVERHEAD_MAX:.0%} on a clean run",
          file=sys.stderr)
    return 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    add_out_args(ap, NAME)
    args = ap.parse_args()
    path = out_path(ap, args, NAME)

    import json

    from tunebench.harness.commands.cli import setup_logging
    from tunebench.protocol.noise import NoisePolicy

    setup_logging()
    load_before = loadavg()
    cfg, metrics, total = tune(args.trials, args.seed)
    out = {"machine": machine_info(), "threads": cfg.target.num_cores or os.cpu_count(),
           "precision": "float32", "layer": LAYER, "seed": args.seed, **report(metrics, total),
           "loadavg_before": load_before, "loadavg_after": loadavg(), **provenance()}
    evidence, reasons = noise_evidence(metrics, NoisePolicy.from_settings(cfg.measure.noise),
                                       out["lock_wait_share"])
    out.update(noise=evidence, noisy=bool(reasons), noise_reasons=reasons)
    print(json.dumps(out, indent=1))
    write_json(path, out)
    print(f"written: {os.path.relpath(path)}")
    return verdict(out, reasons)


if __name__ == "__main__":
    raise SystemExit(run_main(main))
