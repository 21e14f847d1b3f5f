"""How well a single timing's speedup interval covers the speedup of a quiet machine: interval
constructions compared on ``noise_marks.py``'s saved timings (no new timings).

Each timing gives, per round, the median of the baseline (PyTorch) and of the tuned model; a
construction turns those 5 pairs into ``(point, low, high)`` of baseline / tuned. The truth a timing's
interval should contain is its layer's *quiet median* (the median of the construction's point over the
layer's quiet timings). Per construction: the share of timings whose interval contains it (per
condition), the interval's median width (the factor ``sqrt(high / low)``: the interval is
``point ÷/× factor``) and the lift of a set of marks -- P(moved | marked) / P(moved | unmarked), a
timing *moved* when its interval misses the quiet median (the log ratio left the quiet median's by
more than the interval's half-width on the log scale).

Constructions: ``bootstrap`` (percentile bootstrap of the geometric mean over the rounds, the harness's
interval until 2026-11-29; resampling rounds, the independent units), ``bca`` (the same resamples,
bias-corrected and accelerated), ``student_t`` (Student-t interval of the mean log ratio: the harness's
interval now, :func:`tunebench.protocol.stats.paired_ratio_ci`), ``fieller`` (Fieller's interval of
the ratio of the two rows' mean times, paired), ``t_plus_drift`` (``student_t`` widened by the run's
calibration drift: log half-width + ``|log(1 + drift)|``), ``min_max`` (the smallest and largest round
ratio: 1 - 2/2^5 = 94 % for the median round ratio).

More rounds (:func:`more_rounds`): consecutive timings of one layer in one quiet block stand in for
a longer timing. ``pooled``: their rounds as one timing of 5k rounds (``student_t``); ``timings``: each
timing's geometric mean as one unit (Student t over k timings) -- the rounds of one timing share its
state (a baseline in a slower mode stays there for the whole timing), k timings need not.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

LEVEL = 0.95
N_BOOT = 2000


def _logs(t: dict) -> np.ndarray:
    a = np.asarray(t["rows"]["torch"]["round_medians_ms"], dtype=float)
    b = np.asarray(t["rows"]["tuned"]["round_medians_ms"], dtype=float)
    k = min(a.size, b.size)
    return np.log(a[:k] / b[:k])


def bootstrap(t: dict) -> tuple[float, float, float]:
    from tunebench.protocol.stats import bootstrap_ci, geomean

    r = np.exp(_logs(t))
    lo, hi = bootstrap_ci(r, geomean, LEVEL, N_BOOT, 0)
    return geomean(r), lo, hi


def bca(t: dict) -> tuple[float, float, float]:
    """BCa over the rounds (Efron's bias correction ``z0`` and jackknife acceleration)."""
    from scipy.stats import norm

    r = _logs(t)
    m = float(np.mean(r))
    boots = r[np.random.default_rng(0).integers(0, r.size, size=(N_BOOT, r.size))].mean(axis=1)
    z0 = norm.ppf(min(max(float(np.mean(boots < m)), 1e-6), 1 - 1e-6))
    jack = np.array([np.delete(r, i).mean() for i in range(r.size)])
    d = jack.mean() - jack
    den = 6 * float(np.sum(d ** 2)) ** 1.5
    acc = float(np.sum(d ** 3)) / den if den > 0 else 0.0
    ends = []
    for q in ((1 - LEVEL) / 2, (1 + LEVEL) / 2):
        z = norm.ppf(q)
        ends.append(float(np.quantile(boots, norm.cdf(z0 + (z0 + z) / (1 - acc * (z0 + z))))))
    return math.exp(m), math.exp(ends[0]), math.exp(ends[1])


def student_t(t: dict) -> tuple[float, float, float]:
    from tunebench.protocol.stats import paired_ratio_ci

    return paired_ratio_ci(t["rows"]["torch"]["round_medians_ms"], t["rows"]["tuned"]["round_medians_ms"])


def fieller(t: dict) -> tuple[float, float, float]:
    """Fieller's interval of mean(baseline) / mean(tuned), the rounds paired (their covariance kept);
    unbounded when the tuned mean is not clearly above 0."""
    from scipy.stats import t as student

    a = np.asarray(t["rows"]["torch"]["round_medians_ms"], dtype=float)
    b = np.asarray(t["rows"]["tuned"]["round_medians_ms"], dtype=float)
    n = min(a.size, b.size)
    a, b = a[:n], b[:n]
    c = np.cov(a, b, ddof=1) / n
    q = float(student.ppf((1 + LEVEL) / 2, n - 1)) ** 2
    ma, mb = float(a.mean()), float(b.mean())
    qa, qb, qc = mb ** 2 - q * c[1, 1], -2 * (ma * mb - q * c[0, 1]), ma ** 2 - q * c[0, 0]
    disc = qb * qb - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return ma / mb, 0.0, math.inf
    return ma / mb, max((-qb - math.sqrt(disc)) / (2 * qa), 0.0), (-qb + math.sqrt(disc)) / (2 * qa)


def t_plus_drift(t: dict) -> tuple[float, float, float]:
    g, lo, hi = student_t(t)
    d = t.get("drift")
    w = abs(math.log1p(d)) if d is not None and d > -1 else 0.0
    return g, lo * math.exp(-w), hi * math.exp(w)


def min_max(t: dict) -> tuple[float, float, float]:
    r = np.exp(_logs(t))
    return float(np.median(r)), float(r.min()), float(r.max())


CONSTRUCTIONS = {"bootstrap": bootstrap, "bca": bca, "student_t": student_t, "fieller": fieller,
                 "t_plus_drift": t_plus_drift, "min_max": min_max}


def quiet_medians(timings: list[dict], points: list[float]) -> dict[str, float]:
    """Per layer: the median of ``points`` over its quiet timings."""
    out = {}
    for layer in dict.fromkeys(t["layer"] for t in timings):
        vals = [p for p, t in zip(points, timings) if t["layer"] == layer and t["condition"] == "quiet"
                and math.isfinite(p)]
        if vals:
            out[layer] = statistics.median(vals)
    return out


def covers(timings: list[dict], intervals: list[tuple[float, float, float]]) -> list[bool | None]:
    """Per timing: its interval contains its layer's quiet median (None: no interval, or no quiet median)."""
    med = quiet_medians(timings, [g for g, _, _ in intervals])
    out: list[bool | None] = []
    for t, (_, lo, hi) in zip(timings, intervals):
        ref = med.get(t["layer"])
        out.append(None if ref is None or math.isnan(lo) or math.isnan(hi) else lo <= ref <= hi)
    return out


def lift(marked: list[bool], moved: list[bool | None]) -> float | None:
    """P(moved | marked) / P(moved | unmarked)."""
    mk = [v for m, v in zip(marked, moved) if v is not None and m]
    um = [v for m, v in zip(marked, moved) if v is not None and not m]
    if not mk or not um or not sum(um):
        return None
    return (sum(mk) / len(mk)) / (sum(um) / len(um))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _share(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def compare(timings: list[dict], marks: dict[str, list[bool]]) -> dict:
    """Per construction: coverage and median width factor per condition, and the lift of each of ``marks``."""
    out = {}
    for name, make in CONSTRUCTIONS.items():
        iv = [make(t) for t in timings]
        cov = covers(timings, iv)
        moved = [None if c is None else not c for c in cov]
        row: dict = {"coverage": {}, "width_factor": {}, "lift": {m: lift(v, moved) for m, v in marks.items()}}
        for cond in dict.fromkeys(t["condition"] for t in timings):
            idx = [i for i, t in enumerate(timings) if t["condition"] == cond]
            row["coverage"][cond] = _share(cov[i] for i in idx)
            w = [math.sqrt(iv[i][2] / iv[i][1]) for i in idx if iv[i][1] > 0 and math.isfinite(iv[i][2])]
            row["width_factor"][cond] = statistics.median(w) if w else None
        out[name] = row
    return out


def _t_interval(values: np.ndarray) -> tuple[float, float]:
    from tunebench.protocol.stats import student_t_ci

    return student_t_ci(values, LEVEL)


def _groups(timings: list[dict], k: int) -> list[list[dict]]:
    """Non-overlapping runs of k consecutive timings of one layer in one block."""
    out = []
    for key in dict.fromkeys((t["layer"], t["block"]) for t in timings):
        bt = [t for t in timings if (t["layer"], t["block"]) == key]
        out += [bt[s:s + k] for s in range(0, len(bt) - k + 1, k)]
    return out


def _group_interval(g: list[dict], kind: str) -> tuple[float, float]:
    """The log interval of a group of timings: ``pooled`` (Student t over all their rounds), ``timings`` (over
    the timings' mean logs) or ``floored`` (as the harness takes it: :func:`tunebench.protocol.stats.timings_ratio_ci`,
    the timings' variance floored at what their rounds give)."""
    if kind == "floored":
        from tunebench.protocol.stats import timings_ratio_ci

        _, lo, hi = timings_ratio_ci([t["rows"]["torch"]["round_medians_ms"] for t in g],
                                     [t["rows"]["tuned"]["round_medians_ms"] for t in g], LEVEL)
        return math.log(lo), math.log(hi)
    x = np.concatenate([_logs(t) for t in g]) if kind == "pooled" else np.array([float(np.mean(_logs(t))) for t in g])
    return _t_interval(x)


def _timing_s(a: dict, b: dict) -> float | None:
    """Seconds per timing of ``a``'s layer: from the start of ``a``'s speedup to the next record's, over the
    speedup's timings (all of a speedup's timings carry its start; None: ``b`` is in the same speedup)."""
    if "speedup" in a and a["speedup"] == b.get("speedup"):
        return None
    return (b["t_s"] - a["t_s"]) / (a.get("timing", 0) + 1)


def more_rounds(timings: list[dict], marked: list[bool], ks: tuple[int, ...] = (1, 2, 3, 4, 6)) -> dict:
    """Per k and kind (``pooled``: the k timings' rounds as one timing of 5k rounds; ``timings``: the k
    timings' geometric means as the units, from k = 2; ``floored``: as ``timings``, the variance at least the
    rounds' within-timing one, as the harness publishes), groups of k consecutive timings of one layer in
    one block: the share whose Student-t interval contains the layer's quiet median of the timings' geometric
    means, per condition and per layer on quiet blocks, the median width factor on quiet blocks, the lift
    of ``marked`` (a group is marked when any of its timings is) and of the oracle, and the cost: k times the
    median seconds of one timing of the layer (its start to the next timing's start)."""
    pos = {id(t): i for i, t in enumerate(timings)}
    ref = {layer: statistics.median(float(np.mean(_logs(t))) for t in timings
                                    if t["layer"] == layer and t["condition"] == "quiet")
           for layer in dict.fromkeys(t["layer"] for t in timings if t["condition"] == "quiet")}
    step = {layer: _median([x for a, b in zip(timings, timings[1:]) if a["layer"] == layer and a["block"] == b["block"]
                            and (x := _timing_s(a, b)) is not None]) for layer in ref}
    out: dict = {}
    for k in ks:
        groups = [g for g in _groups(timings, k) if g[0]["layer"] in ref]
        for kind in ("pooled", "timings", "floored") if k > 1 else ("pooled",):
            rows = []
            for g in groups:
                lo, hi = _group_interval(g, kind)
                rows.append((g[0], lo <= ref[g[0]["layer"]] <= hi, math.exp((hi - lo) / 2),
                             any(marked[pos[id(t)]] for t in g)))
            cov = {c: _share(r[1] for r in rows if r[0]["condition"] == c) for c in dict.fromkeys(t["condition"] for t in timings)}
            per_layer = {layer: _share(r[1] for r in rows if r[0]["condition"] == "quiet" and r[0]["layer"] == layer)
                         for layer in ref}
            moved = [not r[1] for r in rows]
            out[f"{kind} {5 * k}"] = {
                "k": k, "kind": kind, "rounds": 5 * k, "coverage": cov, "quiet_coverage_per_layer": per_layer,
                "width_factor": _median([r[2] for r in rows if r[0]["condition"] == "quiet"]),
                "lift": {"default_ratio": lift([r[3] for r in rows], moved),
                         "oracle": lift([r[0]["condition"] != "quiet" for r in rows], moved)},
                "seconds": {layer: None if v is None else k * v for layer, v in step.items()}, "groups": len(rows)}
    return out


def _fmt(v, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}g}"


def print_intervals(a: dict) -> None:
    """The tables of :func:`compare` and :func:`more_rounds` (``a``: the analysis' ``intervals``)."""
    marks = list(next(iter(a["constructions"].values()))["lift"])
    print("\n| interval (5 rounds) | covers quiet median: quiet | yes1 | yes2 | width ÷/× quiet | "
          + " | ".join(f"lift {m}" for m in marks) + " |\n|---|---|---|---|---|" + "---|" * len(marks))
    for name, row in a["constructions"].items():
        c = row["coverage"]
        print(f"| {name} | {_fmt(c.get('quiet'), 2)} | {_fmt(c.get('yes1'), 2)} | {_fmt(c.get('yes2'), 2)} "
              f"| {_fmt(row['width_factor'].get('quiet'), 3)} | " + " | ".join(_fmt(row['lift'][m], 2) for m in marks)
              + " |")
    layers = list(next(iter(a["more_rounds"].values()))["quiet_coverage_per_layer"])
    print("\n| more rounds | rounds | covers: quiet | " + " | ".join(f"quiet {x}" for x in layers)
          + " | yes1 | yes2 | width ÷/× quiet | lift default_ratio | lift oracle | seconds per layer | groups |\n"
          + "|---|---|---|" + "---|" * len(layers) + "---|---|---|---|---|---|---|")
    for r in a["more_rounds"].values():
        c, pl = r["coverage"], r["quiet_coverage_per_layer"]
        kinds = {"pooled": "rounds pooled", "timings": "timings as units", "floored": "timings as units, floored"}
        name = "one timing" if r["k"] == 1 else f"{r['k']} timings, {kinds[r['kind']]}"
        print(f"| {name} | {r['rounds']} | {_fmt(c.get('quiet'), 2)} | " + " | ".join(_fmt(pl[x], 2) for x in layers)
              + f" | {_fmt(c.get('yes1'), 2)} | {_fmt(c.get('yes2'), 2)} | {_fmt(r['width_factor'], 3)} "
              f"| {_fmt(r['lift']['default_ratio'], 2)} | {_fmt(r['lift']['oracle'], 2)} "
              f"| {', '.join(_fmt(v, 2) for v in r['seconds'].values())} | {r['groups']} |")
