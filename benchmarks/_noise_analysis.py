"""The analysis of ``noise_marks.py``'s timings: each signal's distribution per condition, and each
policy's marks against the ratios that moved.

A *ratio row* is one timing of one layer: PyTorch / tuned, the geometric mean of the per-round ratios
with its 95 % interval, recomputed from the saved rounds as the harness computes it now (a Student-t
interval of the mean log ratio). It *moved* when the interval misses its layer's quiet median (on the
log scale: further from it than the interval's half-width). The interval constructions themselves are
compared in :mod:`_interval_analysis`. A *policy* marks a row from its recorded signals; the policies compared are the shipped
one against three calibration references (the user's cached one, the fastest clean calibration of
the run, the run's first calibration), and the same without the slowdown signal (``run_*``: the thresholds the timings were made with), and the
defaults now (``default_ratio``, ``default_absolute``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _quantiles(values: list[float]) -> dict:
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return {"n": 0}
    pick = {f"p{int(q * 100)}": vals[min(len(vals) - 1, int(q * (len(vals) - 1) + 0.5))] for q in QUANTILES}
    return {"n": len(vals), **pick, "max": vals[-1]}


def signals(t: dict, refs: dict[str, float | None]) -> dict[str, float | None]:
    """Every signal of timing ``t``: the rows' largest robust CV, foreign CPU, drift and the slowdown
    of the slower calibration against each reference in ``refs``."""
    c = t["calib"]
    slow = max(c["s_pre"], c["s_post"])
    out = {"rcv": max(r["rcv"] for r in t["rows"].values()), "foreign_cpu": t["foreign_cpu"], "drift": t["drift"],
           "calib_foreign": max((v for v in (c["foreign_pre"], c["foreign_post"]) if v is not None), default=None)}
    for name, ref in refs.items():
        out[f"slowdown_{name}"] = slow / ref if ref else None
    return out


def references(result: dict) -> dict[str, float | None]:
    """The calibration references compared: ``cached`` (the user's cache before the run: the shipped
    rule, the fastest clean calibration ever seen on this machine key), ``run_min`` (the fastest
    calibration of this run's quiet blocks), ``run_start`` (the median of the run's first quiet block's
    calibrations: a reference refreshed when a run starts)."""
    quiet = [t for t in result["timings"] if t["condition"] == "quiet"]
    calibs = [t["calib"]["s_pre"] for t in quiet]
    first = [t["calib"]["s_pre"] for t in quiet if t["block"] == quiet[0]["block"]] if quiet else []
    return {"cached": result.get("user_cached_reference_s"), "run_min": min(calibs) if calibs else None,
            "run_start": statistics.median(first) if first else None}


def moved(timings: list[dict]) -> list[bool | None]:
    """Per timing: its ratio left its layer's quiet median by more than its interval's half-width on the log
    scale, i.e. the interval the harness computes now (from the saved rounds) misses the quiet median (None
    where the interval is unknown)."""
    from _interval_analysis import covers, student_t

    return [None if c is None else not c for c in covers(timings, [student_t(t) for t in timings])]


def threshold_policy(limits: dict[str, float]) -> Callable[[dict], list[str]]:
    """A policy: the signals (of :func:`signals`) above their limit (drift both ways)."""
    def fired(sig: dict) -> list[str]:
        out = []
        for name, limit in limits.items():
            v = sig.get(name)
            if v is None:
                continue
            v = abs(v) if name == "drift" else v
            if not math.isfinite(v) or v > limit:
                out.append(name)
        return out
    return fired


def policies(p: dict) -> dict[str, Callable[[dict], list[str]]]:
    """The policies compared: the thresholds the run was made with (``p``, ``NoisePolicy`` as a dict; e2e rows
    judged by ``cv_max``, as before ``rounds_cv_max`` existed) against each reference and without the slowdown;
    and tunebench's defaults now, for a ratio (the ratio's signals) and for an absolute time (with the slowdown
    against the run's reference)."""
    from tunebench.protocol.noise import NoisePolicy

    base = {"rcv": p["cv_max"], "foreign_cpu": p["foreign_cpu_max"], "drift": p["drift_max"]}
    now = NoisePolicy()
    ratio = {"rcv": now.rounds_cv_max, "foreign_cpu": now.foreign_cpu_max, "drift": now.drift_max}
    return {"run_cached_ref": threshold_policy({**base, "slowdown_cached": p["slowdown_max"]}),
            "run_run_min_ref": threshold_policy({**base, "slowdown_run_min": p["slowdown_max"]}),
            "run_run_start_ref": threshold_policy({**base, "slowdown_run_start": p["slowdown_max"]}),
            "run_no_slowdown": threshold_policy(base),
            "default_ratio": threshold_policy(ratio),
            "default_absolute": threshold_policy({**ratio, "slowdown_run_start": now.slowdown_max})}


def evaluate(timings: list[dict], sigs: list[dict], mv: list, fired: Callable[[dict], list[str]]) -> dict:
    """One policy's marks: share per condition, P(moved | marked) vs P(moved | unmarked), error rates,
    and which signal fired how often."""
    marks = [fired(s) for s in sigs]
    out: dict = {"marked_share": {}, "fired": {}}
    for cond in dict.fromkeys(t["condition"] for t in timings):
        idx = [i for i, t in enumerate(timings) if t["condition"] == cond]
        out["marked_share"][cond] = sum(bool(marks[i]) for i in idx) / len(idx)
    for m in marks:
        for name in m:
            out["fired"][name] = out["fired"].get(name, 0) + 1
    known = [(bool(m), v) for m, v in zip(marks, mv) if v is not None]
    mk = [v for m, v in known if m]
    um = [v for m, v in known if not m]
    out["p_moved_marked"] = sum(mk) / len(mk) if mk else None
    out["p_moved_unmarked"] = sum(um) / len(um) if um else None
    pm, pu = out["p_moved_marked"], out["p_moved_unmarked"]
    out["lift"] = pm / pu if pm is not None and pu else None
    still = [m for m, v in known if not v]
    went = [m for m, v in known if v]
    out["false_positive_rate"] = sum(still) / len(still) if still else None  # marked, ratio did not move
    out["false_negative_rate"] = sum(not m for m in went) / len(went) if went else None  # moved, not marked
    out["n_marked"], out["n_rows"] = len(mk), len(known)
    return out


def fit_limits(timings: list[dict], sigs: list[dict], names: tuple[str, ...], q: float = 0.975) -> dict[str, float]:
    """Limits from data: each signal's ``q`` quantile over the quiet timings (two significant digits, rounded
    up; drift by magnitude)."""
    out = {}
    for name in names:
        vals = sorted(abs(s[name]) if name == "drift" else s[name] for s, t in zip(sigs, timings)
                      if t["condition"] == "quiet" and s.get(name) is not None and math.isfinite(s[name]))
        if vals:
            v = vals[min(len(vals) - 1, math.ceil(q * (len(vals) - 1)))]
            scale = 10 ** (math.floor(math.log10(v)) - 1) if v > 0 else 1.0
            out[name] = math.ceil(v / scale) * scale
    return out


def fitted(timings: list[dict], sigs: list[dict], mv: list, names: tuple[str, ...]) -> dict:
    """Limits fitted on the even cycles of blocks (a cycle: one block of each condition), evaluated on the
    odd ones (held out) and on all."""
    cycle = [t["block"] // len({x["condition"] for x in timings}) for t in timings]
    fit = [i for i, c in enumerate(cycle) if c % 2 == 0]
    held = [i for i, c in enumerate(cycle) if c % 2 == 1]
    limits = fit_limits([timings[i] for i in fit], [sigs[i] for i in fit], names)
    policy = threshold_policy(limits)
    return {"limits": limits, "held_out": evaluate([timings[i] for i in held], [sigs[i] for i in held],
                                                   [mv[i] for i in held], policy),
            "all": evaluate(timings, sigs, mv, policy)}


def intervals(timings: list[dict], sigs: list[dict], fired: Callable[[dict], list[str]]) -> dict:
    """The interval constructions compared (:mod:`_interval_analysis`), with the lift of the marks of
    ``fired`` (the default policy for a ratio) and of the oracle that marks exactly the loaded blocks."""
    from _interval_analysis import compare, more_rounds

    marks = {"default_ratio": [bool(fired(s)) for s in sigs], "oracle": [t["condition"] != "quiet" for t in timings]}
    return {"constructions": compare(timings, marks), "more_rounds": more_rounds(timings, marks["default_ratio"])}


def speedup_groups(result: dict) -> list[list[dict]]:
    """The timings of each published speedup, in order (a result saved before ``--timings``: one timing each)."""
    groups: dict = {}
    for i, t in enumerate(result["timings"]):
        groups.setdefault(t.get("speedup", f"t{i}"), []).append(t)
    return list(groups.values())


def published(result: dict, refs: dict, fired: Callable[[dict], list[str]]) -> dict:
    """The speedups as the harness publishes them: each the geometric mean of its timings' ratios with the
    interval over them (:func:`tunebench.protocol.stats.timings_ratio_ci`, recomputed from the saved rounds).
    A speedup *moved* when its interval misses its layer's quiet median (the median of the quiet blocks'
    published ratios); it is *marked* (``fired``: the default marks) when any of its timings is (its signals
    at their worst over the timings). Its coverage and median width factor per condition, the marks' shares,
    P(moved | marked), P(moved | unmarked), lift and error rates (:func:`evaluate`), and speedups per minute."""
    from _interval_analysis import covers

    from tunebench.protocol.stats import timings_ratio_ci
    from tunebench.targets.tvm.e2e.pooled import worst_signals

    groups = speedup_groups(result)
    iv = [timings_ratio_ci([t["rows"]["torch"]["round_medians_ms"] for t in g],
                           [t["rows"]["tuned"]["round_medians_ms"] for t in g]) for g in groups]
    heads = [g[0] for g in groups]
    cov = covers(heads, iv)
    mv = [None if c is None else not c for c in cov]
    sigs = [worst_signals([signals(t, refs) for t in g]) for g in groups]  # fires when it fires on any timing
    conds = list(dict.fromkeys(t["condition"] for t in heads))
    width = {c: _median([math.sqrt(h / lo) for (_, lo, h), t in zip(iv, heads) if t["condition"] == c
                         and lo > 0 and math.isfinite(h)]) for c in conds}
    blocks_s = result.get("blocks_s") or 60 * (result.get("minutes") or 0)
    return {"timings_per_speedup": max(len(g) for g in groups) if groups else None, "n_speedups": len(groups),
            "speedups_per_minute": len(groups) / (blocks_s / 60) if blocks_s else None,
            "coverage": {c: _share([v for v, t in zip(cov, heads) if t["condition"] == c]) for c in conds},
            "width_factor": width, "default_marks": evaluate(heads, sigs, mv, fired)}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def analyse(result: dict) -> dict:
    timings = result["timings"]
    refs = references(result)
    sigs = [signals(t, refs) for t in timings]
    mv = moved(timings)
    pols = policies(result["policy"])
    dist = {}
    for name in sigs[0] if sigs else ():
        dist[name] = {cond: _quantiles([s[name] for s, t in zip(sigs, timings) if t["condition"] == cond])
                      for cond in dict.fromkeys(t["condition"] for t in timings)}
    ratios = {}
    for layer in dict.fromkeys(t["layer"] for t in timings):
        ratios[layer] = {cond: _quantiles([t["ratio"]["g"] for t in timings if t["layer"] == layer
                                           and t["condition"] == cond])
                         for cond in dict.fromkeys(t["condition"] for t in timings)}
    moved_share = {cond: _share([v for v, t in zip(mv, timings) if t["condition"] == cond])
                   for cond in dict.fromkeys(t["condition"] for t in timings)}
    return {"published": published(result, refs, pols["default_ratio"]), "references_s": refs, "signals": dist, "ratios": ratios, "moved_share": moved_share,
            "policies": {name: evaluate(timings, sigs, mv, f) for name, f in pols.items()},
            "oracle_loaded": evaluate(timings, [{"loaded": float(t["condition"] != "quiet")} for t in timings], mv,
                                      threshold_policy({"loaded": 0.5})),
            "intervals": intervals(timings, sigs, pols["default_ratio"]),
            "fitted": {"ratio": fitted(timings, sigs, mv, ("rcv", "foreign_cpu", "drift")),
                       "absolute": fitted(timings, sigs, mv, ("rcv", "foreign_cpu", "drift", "slowdown_run_start"))}}


def _share(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _fmt(v, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}g}"


def print_report(result: dict) -> None:
    from _interval_analysis import print_intervals

    a = result["analysis"]
    print(f"\nnoise marks: {len(result['timings'])} timings, {result.get('date')}, {result.get('git_commit')}; "
          f"references (s): " + ", ".join(f"{k} {_fmt(v)}" for k, v in a["references_s"].items()))
    print("\n| signal | condition | n | p5 | p50 | p95 | max |\n|---|---|---|---|---|---|---|")
    for name, per in a["signals"].items():
        for cond, q in per.items():
            print(f"| {name} | {cond} | {q['n']} | {_fmt(q.get('p5'))} | {_fmt(q.get('p50'))} | {_fmt(q.get('p95'))} "
                  f"| {_fmt(q.get('max'))} |")
    print("\n| layer | condition | ratio p5 | p50 | p95 |\n|---|---|---|---|---|")
    for layer, per in a["ratios"].items():
        for cond, q in per.items():
            print(f"| {layer} | {cond} | {_fmt(q.get('p5'))} | {_fmt(q.get('p50'))} | {_fmt(q.get('p95'))} |")
    print("\nmoved share per condition: " + ", ".join(f"{c} {_fmt(v, 2)}" for c, v in a["moved_share"].items()))
    p = a.get("published")
    if p:
        e, ms = p["default_marks"], p["default_marks"]["marked_share"]
        print(f"\nspeedups as published: {p['n_speedups']} of {p['timings_per_speedup']} timing(s) each, "
              f"{_fmt(p['speedups_per_minute'], 3)} per minute; the interval (Student t over the timings; one "
              "timing: over its rounds) covers the quiet median: "
              + ", ".join(f"{c} {_fmt(v, 2)}" for c, v in p["coverage"].items()) + "; width ÷/× "
              + ", ".join(f"{c} {_fmt(v, 3)}" for c, v in p["width_factor"].items()))
        print("\n| default marks, published speedups | marked quiet | yes1 | yes2 | P(moved|marked) | P(moved|unmarked) "
              "| lift | FP rate | FN rate | n |\n|---|---|---|---|---|---|---|---|---|---|")
        print(f"| default_ratio | {_fmt(ms.get('quiet'), 2)} | {_fmt(ms.get('yes1'), 2)} | {_fmt(ms.get('yes2'), 2)} "
              f"| {_fmt(e['p_moved_marked'], 2)} | {_fmt(e['p_moved_unmarked'], 2)} | {_fmt(e['lift'], 2)} "
              f"| {_fmt(e['false_positive_rate'], 2)} | {_fmt(e['false_negative_rate'], 2)} | {e['n_rows']} |")
    print_intervals(a["intervals"])
    rows = dict(a["policies"])
    rows["oracle_loaded (marks exactly the loaded blocks)"] = a["oracle_loaded"]
    for kind, f in a.get("fitted", {}).items():
        print(f"\nfitted limits ({kind}, quiet 97.5th percentile of the even cycles): "
              + ", ".join(f"{k} {v:g}" for k, v in f["limits"].items()))
        rows[f"fitted_{kind}_held_out"], rows[f"fitted_{kind}_all"] = f["held_out"], f["all"]
    print("\n| policy | marked quiet | yes1 | yes2 | P(moved|marked) | P(moved|unmarked) | lift | FP rate | FN rate "
          "| fired |\n|---|---|---|---|---|---|---|---|---|---|")
    for name, e in rows.items():
        ms = e["marked_share"]
        print(f"| {name} | {_fmt(ms.get('quiet'), 2)} | {_fmt(ms.get('yes1'), 2)} | {_fmt(ms.get('yes2'), 2)} "
              f"| {_fmt(e['p_moved_marked'], 2)} | {_fmt(e['p_moved_unmarked'], 2)} | {_fmt(e['lift'], 2)} "
              f"| {_fmt(e['false_positive_rate'], 2)} | {_fmt(e['false_negative_rate'], 2)} "
              f"| {', '.join(f'{k} {v}' for k, v in e['fired'].items())} |")
