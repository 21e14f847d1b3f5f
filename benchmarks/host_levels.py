"""Does a quiet machine have levels, and which probe sees them: a memory-bound PyTorch kernel and two probes
timed in turn in one process.

The kernel is the one whose speedup over tuned code showed two levels on a quiet VM (docs/MEASUREMENT.md §How
wide a speedup's interval is): PyTorch's 1x1 stride-2 convolution 128 -> 256 channels at 28x28, batch 1. The
probes: a 256^3 float32 matmul (compute-bound, as the protocol's calibration kernel) and a 32 MiB copy
(memory-bound). Each cycle times the three one after another (median of ``--repeat`` calls each, the copy a
third as many), with ``--threads`` PyTorch threads, for ``--seconds``. The kernel's samples are split into
two levels at the largest gap of their sorted values (when it is wider than 5 % of the median); per probe the
report gives its median per level and how well a threshold on it (the best of its values) tells the levels
apart. Nothing else should run on the machine meanwhile.

Usage: python benchmarks/host_levels.py [--seconds 480] [--threads 2] [--repeat 60] [--out PATH | --publish]
  default output: benchmarks/results/local/host_levels.json (untracked).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, machine_info, out_path, provenance, run_main, usage_error, write_json

NAME = "host_levels"
PROBES = ("matmul", "copy")


def _median_ms(fn, n: int) -> float:
    s = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        s.append(time.perf_counter() - t0)
    return float(np.median(s)) * 1e3


def collect(seconds: float, threads: int, repeat: int) -> list[dict]:
    """One row per cycle: its time (s since the start) and the median ms of the kernel and each probe."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.randn(1, 128, 28, 28)
    conv = torch.nn.Conv2d(128, 256, 1, stride=2, bias=False).eval()
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    src = torch.randn(8 * 1024 * 1024)
    dst = torch.empty_like(src)
    calls = {"kernel": (lambda: conv(x), repeat), "matmul": (lambda: torch.mm(a, b), repeat),
             "copy": (lambda: dst.copy_(src), max(1, repeat // 3))}
    rows, start = [], time.perf_counter()
    with torch.no_grad():
        for _ in range(20):
            conv(x)
        while time.perf_counter() - start < seconds:
            row = {"t_s": time.perf_counter() - start}
            row.update({k: _median_ms(fn, n) for k, (fn, n) in calls.items()})
            rows.append(row)
    return rows


def levels(values: np.ndarray) -> np.ndarray | None:
    """The slow level's mask: the values above the largest gap of the sorted values, when that gap is wider
    than 5 % of the median and each side holds at least 5 % of the values; else None (one level)."""
    v = np.sort(values)
    lo, hi = int(0.05 * v.size), int(0.95 * v.size)
    if hi - lo < 2:
        return None
    gaps = np.diff(v[lo:hi])
    i = int(np.argmax(gaps))
    if gaps[i] <= 0.05 * float(np.median(v)):
        return None
    return values > v[lo + i]


def separation(probe: np.ndarray, slow: np.ndarray) -> dict:
    """The probe's median per level, their ratio, and the best accuracy of one threshold on the probe (either
    direction) in telling the levels apart."""
    best = 0.0
    for thr in np.unique(probe):
        above = probe >= thr
        best = max(best, float(np.mean(above == slow)), float(np.mean(above != slow)))
    m_slow, m_fast = float(np.median(probe[slow])), float(np.median(probe[~slow]))
    return {"median_ms_slow": m_slow, "median_ms_fast": m_fast, "slow_over_fast": m_slow / m_fast,
            "threshold_accuracy": best}


def analyse(rows: list[dict]) -> dict:
    k = np.array([r["kernel"] for r in rows])
    slow = levels(k)
    out: dict = {"cycles": len(rows), "kernel_ms_p5_p50_p95": np.percentile(k, [5, 50, 95]).tolist() if k.size else []}
    if slow is None:
        return {**out, "levels": 1}
    t = np.array([r["t_s"] for r in rows])
    switches = np.flatnonzero(np.diff(slow.astype(int)))
    spans = np.diff(np.concatenate([[t[0]], t[switches + 1], [t[-1]]]))
    return {**out, "levels": 2, "slow_share": float(slow.mean()),
            "kernel_ms_slow": float(np.median(k[slow])), "kernel_ms_fast": float(np.median(k[~slow])),
            "level_spans_s_median_max": [float(np.median(spans)), float(spans.max())],
            "probes": {p: separation(np.array([r[p] for r in rows]), slow) for p in PROBES}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=480.0)
    ap.add_argument("--threads", type=int, default=2, help="PyTorch threads (default 2)")
    ap.add_argument("--repeat", type=int, default=60, help="calls per median (default 60)")
    add_out_args(ap, NAME)
    args = ap.parse_args()
    for name in ("seconds", "threads", "repeat"):
        if getattr(args, name) <= 0:
            usage_error(f"--{name} {getattr(args, name)}: must be positive")
    path = out_path(ap, args, NAME)
    load0 = loadavg()
    rows = collect(args.seconds, args.threads, args.repeat)
    a = analyse(rows)
    print(f"{a['cycles']} cycles; kernel ms p5/p50/p95 {np.round(a['kernel_ms_p5_p50_p95'], 4).tolist()}; "
          f"levels: {a['levels']}")
    if a["levels"] == 2:
        print(f"slow share {a['slow_share']:.2f}: kernel {a['kernel_ms_slow']:.4f} vs {a['kernel_ms_fast']:.4f} ms")
        for p, s in a["probes"].items():
            print(f"  {p}: {s['median_ms_slow']:.4f} vs {s['median_ms_fast']:.4f} ms (x{s['slow_over_fast']:.3f}), "
                  f"one threshold tells the levels apart on {100 * s['threshold_accuracy']:.1f} % of cycles")
    write_json(path, {**provenance(), "machine": {**machine_info(), "load_before": load0, "load_after": loadavg()},
                      "args": vars(args), "analysis": a, "cycles": rows})
    print(f"written: {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
