"""What transfers between GPUs (Glimpse's premise, [Ahn-DAC22]): on the benchmark hub's brute-force caches
(convolution_milo and dedispersion_milo on an A100, A4000, MI250X, W6600; data/kernel_tuner/README.md),
for each kernel and each ordered pair of GPUs (A, B): A's best configuration run on B, and the best on B
of A's k best, each as B's time over B's optimum (or why it has none: failed on B, or not in B's
cache); and Spearman's rank correlation of the configurations' times on A and on B over the
configurations valid on both. A failed entry (an error name such as ``RuntimeFailedConfig`` in place of
a time) is an invalid measurement, never a number: it is left out of the correlation and of A's ranking.

    python benchmarks/gpu_transfer.py [--top 10] [--publish]

Reads the shipped caches with tunebench's reader (checksums verified), nothing is timed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_args, loadavg, out_path, provenance, write_json
from _common import spearman as rank_correlation

KERNELS = ("convolution_milo", "dedispersion_milo")
GPUS = ("A100", "A4000", "MI250X", "W6600")


def measured(path: str) -> dict[tuple, float | str]:
    """A Kernel Tuner cache as configuration (parameter values in ``tune_params_keys`` order) -> time in
    ms, or the error name of a failed configuration (tunebench's cache reader, :mod:`tunebench.datasets.kt_cache`)."""
    from tunebench.datasets.kt_cache import read_cache
    from tunebench.datasets.measured import resolve

    ms = read_cache(resolve(path))
    knobs = ms.space.knobs
    out = {}
    for i, row in enumerate(ms.rows):
        key = tuple(k.values[d] for k, d in zip(knobs, ms.space.digits(i)))
        out[key] = row.latency_s * 1e3 if row.latency_s is not None else (row.error or "failed")
    return out


def _valid(x) -> bool:
    return isinstance(x, float) and math.isfinite(x)


def ranked(times: dict) -> list[tuple]:
    """The valid configurations, fastest first (ties by configuration, for a stable order)."""
    return sorted((c for c, t in times.items() if _valid(t)), key=lambda c: (times[c], str(c)))


def on_target(config: tuple, dst: dict, best: float) -> dict:
    """What ``config`` gives on the target: its time over the target's optimum ``best``, or why none."""
    if config not in dst:
        return {"status": "missing", "ratio": None}
    t = dst[config]
    if not _valid(t):
        return {"status": f"invalid ({t})", "ratio": None}
    return {"status": "valid", "ratio": t / best, "ms": t}


def spearman(src: dict, dst: dict) -> tuple[float | None, int]:
    """Spearman's rho of the times on source and target over the configurations valid on both (average
    ranks for ties), and how many there are; None for fewer than 3 or a constant side."""
    common = [c for c in src if c in dst and _valid(src[c]) and _valid(dst[c])]
    rho = rank_correlation([src[c] for c in common], [dst[c] for c in common], min_n=3)
    return (None if math.isnan(rho) else rho), len(common)


def transfer(src: dict, dst: dict, top: int) -> dict:
    """A's best on B, the best on B of A's ``top`` best (and how many of them fail on B or are missing),
    B's rank of A's best among B's valid configurations, and the rank correlation."""
    order, dst_order = ranked(src), ranked(dst)
    best_b = dst[dst_order[0]]
    first = on_target(order[0], dst, best_b)
    if first["status"] == "valid":
        first["rank_on_target"] = dst_order.index(order[0]) + 1
    outcomes = [on_target(c, dst, best_b) for c in order[:top]]
    ratios = [o["ratio"] for o in outcomes if o["ratio"] is not None]
    rho, n = spearman(src, dst)
    return {"best": first, "top": top, "top_best_ratio": min(ratios) if ratios else None,
            "top_not_valid": sum(o["ratio"] is None for o in outcomes), "spearman": rho, "common_valid": n,
            "target_valid": len(dst_order), "target_optimum_ms": best_b}


def table(results: list[dict], top: int) -> str:
    lines = [f"| kernel | A → B | A's best on B (× B's optimum) | best of A's top {top} on B | A's best: rank on B "
             "| Spearman ρ (common valid) |", "|---|---|---|---|---|---|"]
    for r in results:
        b = r["best"]
        first = f"{b['ratio']:.3f}" if b["ratio"] is not None else b["status"]
        rank = f"{b['rank_on_target']} of {r['target_valid']}" if "rank_on_target" in b else "—"
        topc = f"{r['top_best_ratio']:.3f}" if r["top_best_ratio"] is not None else "none valid"
        if r["top_not_valid"]:
            topc += f" ({r['top_not_valid']} of {top} not valid on B)"
        rho = f"{r['spearman']:.3f} ({r['common_valid']})" if r["spearman"] is not None else f"— ({r['common_valid']})"
        lines.append(f"| {r['kernel']} | {r['source']} → {r['target']} | {first} | {topc} | {rank} | {rho} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10, help="k: A's k best configurations are tried on B")
    add_out_args(ap, "gpu_transfer")
    args = ap.parse_args()
    if args.top < 1:
        ap.error(f"--top {args.top}: must be >= 1")
    t0, load0 = time.time(), loadavg()
    results = []
    for kernel in KERNELS:
        caches = {g: measured(f"kernel_tuner/{kernel}_{g}.json.gz") for g in GPUS}
        for a in GPUS:
            for b in GPUS:
                if a != b:
                    results.append({"kernel": kernel, "source": a, "target": b,
                                    **transfer(caches[a], caches[b], args.top)})
    md = table(results, args.top)
    write_json(out_path(ap, args, "gpu_transfer"), {"top": args.top, "results": results, "markdown": md,
                                                    "wall_s": time.time() - t0, "loadavg": [load0, loadavg()],
                                                    **provenance()})
    print(md)


if __name__ == "__main__":
    main()
