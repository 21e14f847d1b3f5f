"""Every GPU claim of the project re-measured on one GPU: about 24 minutes of caps on an H100, TVM's import included:
more than one 10-minute call of a lent GPU machine, so there it runs in parts (``--only``) joined by ``--merge``.

Parts, in this order, each in its own process with its own time cap (a part past its cap is killed and
recorded as ``timeout``, its log's last lines kept; once the overall budget is spent the remaining parts
are recorded as ``skipped`` with the reason). The measurements come first and the tests last, so that a
short window spends its seconds on numbers:

1. ``peak``: the GPU's measured FP32 FMA throughput and memory bandwidth (the harness's peak
   microbenchmarks, ``TVMTarget.peak``, in a fresh machine cache that the later parts reuse);
   ``trial_rate``: trials per second on ResNet-18's 3×3 convolutions and where a trial's time goes
   (compile, upload, run, protocol, overlap; ``_gpu_rate.py``);
2. ``resnet18_autotvm``, ``resnet18_metaschedule``: ResNet-18 end to end at a small trial count through
   the harness (``run_experiment``): the tuned model (each task the faster of its tuned and TVM's default
   kernel, with both kernels' latencies and which one was taken) against TVM's default build, PyTorch
   FP32 (TF32 off), ``torch.compile`` and PyTorch with TF32, interleaved rounds, 95 % intervals; per task
   the static-invalid fraction when the run reports it (else ``not reported``); ``resnet18_winograd``: the
   autotvm run again with ``target.template=winograd`` (3×3 stride-1 convs by Winograd);
3. ``vgg16_dense``: VGG-16's three dense layers (batch 1, memory-bound; ``direct``'s split-K GEMV template,
   no flag needed) tuned with AutoTVM, each against
   PyTorch as a one-layer model, interleaved; achieved bandwidth against the measured one;
4. ``dgp_vs_autotvm``: a short dgp vs AutoTVM run on VGG-16 conv layers of one group;
5. ``gpu_tests``: ``pytest -m gpu -v`` over the test files that have GPU tests (its output streamed into the
   part's log); pass/fail counts.

Writes one JSON (GPU name, driver, commit, date, every part) and a Markdown table beside it
(``.md``). ``--dry-run`` runs the same code on ``target=llvm`` with tiny layers and budgets (CI catches rot;
a few minutes on 2 cores).

Exit codes: 0 the suite ran (failed or skipped parts are recorded, not fatal); 2 bad arguments; 4 a
failure of the suite itself (traceback).

Usage: python benchmarks/gpu_suite.py [--dry-run] [--budget-s S] [--trials N] [--only PARTS] [--work DIR]
    [--commit SHA] [--out PATH | --publish]
       python benchmarks/gpu_suite.py --merge A.json B.json ... [--out PATH | --publish]
  default output: benchmarks/results/local/gpu_suite.json and .md (untracked); --publish:
  benchmarks/results/gpu_suite.json and .md (tracked; not with --dry-run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from _common import add_out_args, loadavg, out_path, provenance, run_main, write_json
from _gpu_md import markdown
from _gpu_rate import RESNET18_3X3

NAME = "gpu_suite"
CAPS = {"peak": 40, "trial_rate": 200, "resnet18_autotvm": 380, "resnet18_metaschedule": 380, "resnet18_winograd": 380, "vgg16_dense": 170,
        "dgp_vs_autotvm": 150, "gpu_tests": 150}  # seconds per part on the GPU. Measured on an H100 (2026-11-27, commit 24800eb): peak 34 s,
# resnet18_autotvm 363 s (part start 16 s, target start 17 s, 19 tasks' search and protocol 184 s, the kernel choice
# 63 s, the end-to-end rows 68 s), vgg16_dense 158 s; gpu_tests had not finished its first test at 45 s. The trial_rate,
# metaschedule, winograd and dgp caps are estimates (trial_rate: 7 tasks of at most 15 s search clock each, with the
# protocol). Their sum (1850 s) is the default overall budget: more than one 600-s call, so a lent
# GPU machine runs the suite in parts (--only) over calls, joined by --merge (docs/BENCHMARKS.md)
DRY_CAPS = {"peak": 90, "trial_rate": 240, "resnet18_autotvm": 300, "resnet18_metaschedule": 480, "resnet18_winograd": 300, "vgg16_dense": 180,
            "dgp_vs_autotvm": 300, "gpu_tests": 180}  # on a shared 2-core machine (the dry run took 142 s in all on 2026-11-27, load 1.0)
MIN_PART_S = 15.0  # a part is started only with this much of the overall budget left
# A part that ends early leaves its unused seconds to the next parts: each may run to its own cap, or longer as long
# as the caps of the parts after it stay free (Budget.admit).

CONV = {"kernel": 3, "stride": 1, "padding": 1}
VGG_DENSE = [{"in_features": 25088, "out_features": 4096}, {"in_features": 4096, "out_features": 4096},
             {"in_features": 4096, "out_features": 1000}]
VGG_CONV = [{"in_channels": 256, "height": 28, "width": 28, "out_channels": 512, **CONV},
            {"in_channels": 512, "height": 28, "width": 28, "out_channels": 512, **CONV},
            {"in_channels": 512, "height": 14, "width": 14, "out_channels": 512, **CONV}]
TINY_CONV = [{"in_channels": 8, "height": 14, "width": 14, "out_channels": 16, **CONV},
             {"in_channels": 16, "height": 14, "width": 14, "out_channels": 16, **CONV}]



def layers_arg(layers: list[dict]) -> str:
    """The ``model.layers=[...]`` override (as ``tunebench.harness.setup.compose.layers_override``; written
    here so that the suite's own process imports nothing of tunebench's TVM side)."""
    return "model.layers=[" + ",".join("{" + ",".join(f"{k}:{v}" for k, v in L.items()) + "}" for L in layers) + "]"


GPU_PLAN = {
    "target": "cuda", "model": ["model=resnet18"], "trials": 2,
    "target_overrides": ["target.runner.min_repeat_ms=20", "measure.retime.top_k=1", "measure.retime.rounds=3"],
    "e2e": ["e2e.rounds=5", "e2e.n_runs=10", "e2e.default_n_runs=5", "e2e.kernel_repeat=2",
            "e2e.torch_compile_timeout_s=120"],
    "method_overrides": {},
    "winograd_overrides": ["target.template=winograd"],
    "dense_layers": VGG_DENSE, "dense_trials": 8, "dense_rounds": 5,
    "dgp_layers": VGG_CONV[1:], "dgp_trials": 8,
    "rate_layers": RESNET18_3X3, "rate_trials": 64, "rate_seconds": 15, "rate_batch": 16, "rate_overrides": [],
    "dgp_overrides": {"autotvm": ["method.plan_size=8"],
                      "dgp": ["method.tuning_set_size=8", "method.top_k=4", "method.source_tuner.plan_size=8"]},
}
DRY_PLAN = {
    "target": "llvm", "trials": 2,
    "model": ["model=layers", layers_arg([TINY_CONV[0], {"in_features": 64, "out_features": 32}])],
    "target_overrides": ["target.runner.repeat=2", "target.runner.min_repeat_ms=5", "measure.retime.top_k=1",
                         "measure.retime.rounds=2", "measure.retime.repeat=1"],
    "e2e": ["e2e.rounds=2", "e2e.n_runs=2", "e2e.default_n_runs=1", "e2e.kernel_repeat=1", "e2e.min_sample_ms=2",
            "e2e.torch_compile=false"],
    "method_overrides": {"metaschedule": []},
    "winograd_overrides": [],  # llvm has no Winograd template: the dry run checks the part's code path only
    "dense_layers": [{"in_features": 256, "out_features": 128}], "dense_trials": 2, "dense_rounds": 2,
    "dgp_layers": TINY_CONV, "dgp_trials": 4,
    # the build pool and the overlap on llvm (a CPU's default is off: the code path is what the dry run checks)
    "rate_layers": TINY_CONV, "rate_trials": 8, "rate_seconds": 60, "rate_batch": 4,
    "rate_overrides": ["target.builder.overlap=true"],
    "dgp_overrides": {"autotvm": ["method.plan_size=2"],
                      "dgp": ["method.tuning_set_size=2", "method.top_k=2", "method.source_tuner.plan_size=2",
                              "method.pretrain_epochs=5"]},
}


@dataclass
class Budget:
    """The overall time budget: a part starts only with at least ``min_part_s`` left, and runs for at most
    its own cap or what is left, whichever is less."""

    total_s: float
    clock: object = time.monotonic
    min_part_s: float = MIN_PART_S
    start: float = field(default=None)

    def __post_init__(self):
        if self.start is None:
            self.start = self.clock()

    def used(self) -> float:
        return self.clock() - self.start

    def admit(self, cap_s: float, reserved_s: float = 0.0) -> tuple[float | None, str | None]:
        """``(seconds the part may run, None)``, or ``(None, why it is skipped)``. A part may run past its own
        cap into what earlier parts left unused, as long as ``reserved_s`` (the caps of the parts after it)
        stays free."""
        left = self.total_s - self.used()
        if left < self.min_part_s:
            return None, (f"overall budget spent: {max(left, 0.0):.0f} s of {self.total_s:.0f} s left "
                          f"(a part needs {self.min_part_s:.0f} s)")
        return min(max(float(cap_s), left - reserved_s), left), None


def run_part(name: str, plan_file: str, out_file: str, log_file: str, cap_s: float) -> dict:
    """Run one part in its own process group, killed at ``cap_s``; its result with status and wall time."""
    cmd = [sys.executable, os.path.abspath(__file__), "--part", name, "--plan", plan_file, "--part-out", out_file]
    t0 = time.monotonic()
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=cap_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return {"status": "timeout", "reason": f"killed at its cap of {cap_s:.0f} s", "cap_s": cap_s,
                    "wall_s": time.monotonic() - t0, "log_tail": _tail(log_file)}
    res = {"cap_s": cap_s, "wall_s": time.monotonic() - t0}
    if rc != 0 or not os.path.exists(out_file):
        return {**res, "status": "failed", "reason": f"exit code {rc}", "log_tail": _tail(log_file)}
    with open(out_file) as fh:
        data = json.load(fh)
    status = "failed" if data.get("error") else "done"
    return {**res, "status": status, **({"log_tail": _tail(log_file)} if status == "failed" else {}), "result": data}


def _kill_group(proc: subprocess.Popen) -> None:
    """End the part's process group (the part and the workers it started): SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: str, n: int = 20) -> list[str]:
    try:
        with open(path, errors="replace") as fh:
            return fh.read().splitlines()[-n:]
    except OSError:
        return []


def device_info() -> dict:
    """GPU name and driver (``nvidia-smi``); without one, the CPU's model name."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            name, driver, mem = [s.strip() for s in out.stdout.strip().splitlines()[0].split(",")]
            return {"gpu": name, "driver": driver, "gpu_memory": mem}
    except (OSError, subprocess.SubprocessError):
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"gpu": None, "driver": None, "cpu": cpu, "cores": os.cpu_count()}


def run_suite(args, plan: dict, caps: dict, save=None) -> dict:
    """Every part in order under the overall budget; the suite's JSON-ready result. ``save`` (if given) is
    called with the result so far after each part, so that a suite killed from outside keeps what it measured."""
    budget = Budget(args.budget_s)
    plan_file = os.path.join(plan["work"], "plan.json")
    with open(plan_file, "w") as fh:
        json.dump(plan, fh, indent=1)
    parts, load_before = {}, loadavg()
    for i, (name, cap) in enumerate(caps.items()):
        allowed, why = budget.admit(cap, reserved_s=sum(list(caps.values())[i + 1:]))
        if allowed is None:
            parts[name] = {"status": "skipped", "reason": why, "cap_s": cap}
        else:
            print(f"[{budget.used():5.0f} s] {name} (up to {allowed:.0f} s) ...", flush=True)
            parts[name] = run_part(name, plan_file, os.path.join(plan["work"], f"{name}.json"),
                                   os.path.join(plan["work"], f"{name}.log"), allowed)
        print(f"[{budget.used():5.0f} s] {name}: {parts[name]['status']} {parts[name].get('reason', '')}", flush=True)
        if save is not None:
            save(_suite_result(args, plan, caps, budget, load_before, parts))
    return _suite_result(args, plan, caps, budget, load_before, parts)


def _suite_result(args, plan: dict, caps: dict, budget: Budget, load_before, parts: dict) -> dict:
    return {"dry_run": args.dry_run, "target": plan["target"], "budget_s": args.budget_s, "caps_s": caps,
            "wall_s": budget.used(), "device": device_info(), "host": platform.node(), "work": plan["work"],
            "loadavg_before": load_before, "loadavg_after": loadavg(), "plan": plan, "parts": parts, **provenance(),
            **({"git_commit": args.commit} if args.commit else {})}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="target=llvm, tiny layers and budgets (the CI check)")
    ap.add_argument("--budget-s", type=float, default=None, help="overall seconds (default: the sum of the caps)")
    ap.add_argument("--trials", type=int, default=None, help="trials per task of the ResNet-18 runs")
    ap.add_argument("--only", default=None, help="comma-separated parts to run (default: all)")
    ap.add_argument("--work", default=None, help="folder for the runs and logs (default: a new temporary one)")
    ap.add_argument("--commit", default=None,
                    help="the commit to record, for a copied tree without git (default: git rev-parse HEAD)")
    ap.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                    help="run nothing: join the results of suites run part by part (--only) on one machine, "
                         "in the order given, into one JSON and report")
    ap.add_argument("--part", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--part-out", help=argparse.SUPPRESS)
    add_out_args(ap, NAME)
    args = ap.parse_args()
    if args.part:
        return args
    if args.merge:
        args.path = out_path(ap, args, NAME)
        return args
    if args.dry_run and args.publish:
        ap.error("a dry run is not published (--publish writes the GPU results)")
    caps = DRY_CAPS if args.dry_run else CAPS
    only = args.only.split(",") if args.only else list(caps)
    if unknown := [p for p in only if p not in caps]:
        ap.error(f"--only: unknown part(s) {', '.join(unknown)}; valid: {', '.join(caps)}")
    args.caps = {k: v for k, v in caps.items() if k in only}
    args.budget_s = args.budget_s if args.budget_s is not None else float(sum(args.caps.values()))
    if args.trials is not None and args.trials < 1:
        ap.error("--trials must be positive")
    args.path = out_path(ap, args, NAME)
    return args


def part_main(args) -> int:
    """One part, in the process :func:`run_part` started."""
    import traceback

    from _gpu_parts import PARTS

    from tunebench.harness.commands.cli import setup_logging

    setup_logging()
    with open(args.plan) as fh:
        plan = json.load(fh)
    try:
        data = PARTS[args.part](plan)
    except Exception as exc:
        traceback.print_exc()
        data = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    write_json(args.part_out, data)
    return 0


def merge(paths: list[str]) -> dict:
    """The results of suites run part by part (``--only``), in order, as one: the first one's machine and
    plan, every part (a part in two files: the later one; the earlier attempt's status and wall time kept under
    ``superseded``), the walls and budgets summed, the files and their dates named.

    Raises:
        UserError: a file that is not a suite result, a dry run mixed with GPU runs, or two GPUs.
    """
    from tunebench.errors import UserError

    runs = []
    for path in paths:
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            raise UserError(f"--merge: {path}: not readable as JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("parts"), dict):
            raise UserError(f"--merge: {path}: not a gpu_suite result (no parts)")
        runs.append(data)
    kinds = {(r.get("dry_run"), (r.get("device") or {}).get("gpu")) for r in runs}
    if len(kinds) > 1:
        raise UserError(f"--merge: the files come from different runs: {sorted(map(str, kinds))}; valid: one "
                        "machine, all dry runs or none")
    out = dict(runs[0])
    out["parts"], out["superseded"], file_of = {}, [], {}
    for path, r in zip(paths, runs):
        for name, part in r["parts"].items():
            if name in out["parts"]:  # an earlier attempt at the same part stays on record, without its result
                earlier = out["parts"][name]
                out["superseded"].append({"part": name, "status": earlier["status"], "wall_s": earlier.get("wall_s"),
                                          "reason": earlier.get("reason"), "file": file_of[name]})
            out["parts"][name], file_of[name] = part, os.path.basename(path)
    out["caps_s"] = {name: cap for r in runs for name, cap in r.get("caps_s", {}).items()}
    out["wall_s"] = sum(float(r.get("wall_s") or 0.0) for r in runs)
    out["budget_s"] = sum(float(r.get("budget_s") or 0.0) for r in runs)
    out["loadavg_after"] = runs[-1].get("loadavg_after")
    out["merged_from"] = [os.path.basename(p) for p in paths]
    out["dates"] = [r.get("date") for r in runs]
    return out


def write_result(path: str, result: dict) -> str:
    """The result's JSON at ``path`` and its Markdown report beside it; the report's path."""
    md_path = os.path.splitext(path)[0] + ".md"
    write_json(path, result)
    with open(md_path, "w") as fh:
        fh.write(markdown(result))
    return md_path


def main() -> int:
    args = parse_args()
    if args.part:
        return part_main(args)
    if args.merge:
        md_path = write_result(args.path, merge(args.merge))
        print(f"written: {os.path.relpath(args.path)}, {os.path.relpath(md_path)} ({len(args.merge)} files joined)")
        return 0
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="gpu-suite-"))
    os.makedirs(work, exist_ok=True)
    plan = {**(DRY_PLAN if args.dry_run else GPU_PLAN), "work": work, "cache_dir": os.path.join(work, "cache")}
    if args.trials:
        plan["trials"] = args.trials
    print(f"gpu suite{' (dry run, llvm)' if args.dry_run else ''}: work folder {work}; budget {args.budget_s:.0f} s; "
          f"load {loadavg()}", flush=True)
    out = run_suite(args, plan, args.caps, save=lambda result: write_result(args.path, result))
    md_path = write_result(args.path, out)
    print(f"written: {os.path.relpath(args.path)}, {os.path.relpath(md_path)} ({out['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
