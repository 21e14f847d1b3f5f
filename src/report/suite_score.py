"""The scores of a suite (``python -m tunebench suite``): [Willemsen-FGCS24]'s methodology score
(:mod:`tunebench.protocol.methodology`) of each method per space and aggregated over the spaces, over
evaluations and over replayed search time, with 95 % bootstrap intervals over seeds, and every pairwise
difference of the aggregate with its interval; the summary as Markdown and a figure.

Ranges: evaluations 1..budget; time, per space, 100 points from one mean evaluation of the space to
``budget`` of them (the seconds random search needs on average for the budget), so that spaces whose
configurations cost milliseconds and ones that cost seconds weigh alike. Aggregate: each seed's
standardised curves averaged over the spaces (the paper's aggregate), seeds matched by seed number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tunebench.protocol.methodology import (
    SpaceStats,
    baseline_over_fevals,
    baseline_over_time,
    curve_on_fevals,
    curve_on_time,
    score,
)

TIME_POINTS = 100
BOOT = 4000


@dataclass
class SeedCurve:
    """One run: its best-so-far objective per evaluation (seconds, +inf before the first valid one) and
    the replay clock at each evaluation."""

    best: np.ndarray
    clock: np.ndarray


def seed_curve(records: list[dict]) -> SeedCurve:
    """The best-so-far curve of one run's records (one task), in trial order."""
    recs = sorted(records, key=lambda r: r["trial"])
    values = [float(r["latency_s"]) if r.get("valid") and r.get("latency_s") is not None else math.inf
              for r in recs]
    return SeedCurve(np.minimum.accumulate(np.asarray(values, dtype=np.float64)) if values else np.zeros(0),
                     np.asarray([float(r.get("search_s") or 0.0) for r in recs]))


def time_grid(space: SpaceStats, budget: int) -> np.ndarray | None:
    """The time range of ``space``: one mean evaluation to ``budget`` of them (None: no recorded seconds)."""
    tpf = space.time_per_feval
    if not math.isfinite(tpf) or tpf <= 0 or budget < 2:
        return None
    return np.linspace(tpf, budget * tpf, TIME_POINTS)


def _interval(s) -> dict:
    return {"mean": s.mean, "ci": [s.ci_low, s.ci_high], "per_seed": list(s.per_seed)}


def method_score(runs: dict[str, list[SeedCurve]], spaces: dict[str, SpaceStats], budget: int,
                 over: str = "evals") -> dict | None:
    """The score of one method over the spaces of ``runs`` (space -> its seeds' curves, seed i of every
    space matched), over evaluations or over time; None where a space has no time range."""
    names = list(runs)
    seeds = min(len(runs[n]) for n in names)
    if over == "evals":
        bases = [baseline_over_fevals(spaces[n], np.arange(1, budget + 1)) for n in names]
        curves = [[curve_on_fevals(runs[n][s].best, budget) for n in names] for s in range(seeds)]
    else:
        grids = {n: time_grid(spaces[n], budget) for n in names}
        if any(g is None for g in grids.values()):
            return None
        bases = [baseline_over_time(spaces[n], grids[n]) for n in names]
        curves = [[curve_on_time(runs[n][s].clock, runs[n][s].best, grids[n]) for n in names] for s in range(seeds)]
    return _interval(score(curves, bases, [spaces[n] for n in names]))


def differences(agg: dict[str, dict], seed: int = 0) -> list[dict]:
    """Every pair of methods: the difference of their aggregate scores with a 95 % bootstrap interval
    (seeds resampled independently per method); ``survives``: the interval excludes 0."""
    rng, out, names = np.random.default_rng(seed), [], [m for m in agg if agg[m]]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            x = np.array([v for v in agg[a]["per_seed"] if math.isfinite(v)])
            y = np.array([v for v in agg[b]["per_seed"] if math.isfinite(v)])
            if len(x) < 2 or len(y) < 2:
                out.append({"a": a, "b": b, "diff": float(x.mean() - y.mean()) if len(x) and len(y) else math.nan,
                            "ci": [math.nan, math.nan], "survives": False})
                continue
            boot = rng.choice(x, size=(BOOT, len(x))).mean(axis=1) - rng.choice(y, size=(BOOT, len(y))).mean(axis=1)
            low, high = np.percentile(boot, [2.5, 97.5])
            out.append({"a": a, "b": b, "diff": float(x.mean() - y.mean()), "ci": [float(low), float(high)],
                        "survives": bool(low > 0 or high < 0)})
    return out


def suite_scores(runs: dict[str, dict[str, list[SeedCurve]]], spaces: dict[str, SpaceStats], budget: int) -> dict:
    """Per space and aggregated: each method's score over evaluations and over time; the pairwise
    differences of the aggregate over evaluations (``runs``: method -> space -> seed curves). A method run
    on some of the spaces only (dgp: the spaces with a source) is aggregated over those, and ``subsets``
    holds, for each such set of spaces, every method's aggregate over it and their differences."""
    per_space = {n: {m: {"evals": method_score({n: by[n]}, spaces, budget),
                         "time": method_score({n: by[n]}, spaces, budget, "time")} for m, by in runs.items() if n in by}
                 for n in spaces}
    agg = {m: _aggregate(by, spaces, budget) for m, by in runs.items()}
    full = [m for m, by in runs.items() if set(by) == set(spaces)]
    subsets = []
    for names in dict.fromkeys(tuple(n for n in spaces if n in by) for by in runs.values()):
        if set(names) != set(spaces):
            sub = {m: _aggregate({n: by[n] for n in names}, spaces, budget)
                   for m, by in runs.items() if set(names) <= set(by)}
            on = [m for m, by in runs.items() if set(by) == set(names)]
            subsets.append({"spaces": list(names), "methods_on": on, "aggregate": sub, **_differences(sub)})
    return {"per_space": per_space, "aggregate": agg, **_differences({m: agg[m] for m in full}),
            "subsets": subsets}


def _aggregate(by: dict[str, list[SeedCurve]], spaces: dict[str, SpaceStats], budget: int) -> dict:
    return {"evals": method_score(by, spaces, budget), "time": method_score(by, spaces, budget, "time"),
            "spaces": len(by)}


def _differences(agg: dict[str, dict]) -> dict:
    return {"differences": differences({m: a["evals"] for m, a in agg.items()}),
            "differences_time": differences({m: a["time"] for m, a in agg.items() if a["time"]})}


def _cell(s: dict | None, digits: int = 3) -> str:
    if not s or not math.isfinite(s["mean"]):
        return "n/a"
    lo, hi = s["ci"]
    ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if math.isfinite(lo) else ""
    return f"{s['mean']:.{digits}f}{ci}"


def _short(commit) -> str:
    commit = str(commit or "?")
    return commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")


def markdown(result: dict) -> str:
    """The summary: the aggregate per method, the per-space scores, the pairwise differences; the spaces a
    method was not run on and why, and every method's aggregate over the spaces it was run on."""
    sc, names = result["scores"], result["spaces"]
    lines = [f"Suite: {len(names)} spaces, methods {', '.join(result['methods'])}, {result['seeds']} seeds, "
             f"budget {result['budget']} evaluations; [Willemsen-FGCS24] methodology score (0 = random "
             "search's calculated baseline, 1 = the optimum), mean over seeds [95 % bootstrap interval]. "
             f"{result.get('date', '')}, commit {_short(result.get('commit'))}.", ""]
    lines += _aggregate_table(sc["aggregate"], len(names))
    for method, skipped in (result.get("not_run") or {}).items():
        lines += ["", f"{method} was not run on {len(skipped)} of the {len(names)} spaces:", ""]
        lines += [f"- {n}: {why}" for n, why in skipped.items()]
    lines += ["", "Per space, score over evaluations:", "",
              "| space | configs | valid | " + " | ".join(result["methods"]) + " |",
              "|---|---|---|" + "---|" * len(result["methods"])]
    for n in names:
        info = result["space_info"][n]
        lines.append(f"| {n} | {info['configs']} | {info['valid']} | "
                     + " | ".join(_cell(sc["per_space"][n][m]["evals"], 2) if m in sc["per_space"][n] else "not run"
                                  for m in result["methods"]) + " |")
    lines += _difference_tables(sc, "the aggregate score")
    for sub in sc.get("subsets", []):
        lines += ["", f"On the {len(sub['spaces'])} spaces {', '.join(sub['methods_on'])} ran on "
                  f"({', '.join(sub['spaces'])}):", ""]
        lines += _aggregate_table(sub["aggregate"], len(sub["spaces"]))
        lines += _difference_tables(sub, "the score on these spaces")
    return "\n".join(lines)


def _aggregate_table(agg: dict, n: int) -> list[str]:
    lines = ["| method | score over evaluations | score over time | spaces |", "|---|---|---|---|"]
    return lines + [f"| {m} | {_cell(a['evals'])} | {_cell(a['time'])} | {a.get('spaces', n)} of {n} |"
                    for m, a in agg.items()]


def _difference_tables(sc: dict, what: str) -> list[str]:
    lines = []
    for title, key in (("over evaluations", "differences"), ("over time", "differences_time")):
        if sc.get(key):
            lines += ["", f"Pairwise differences of {what} {title}:", "",
                      "| pair | difference [95 % CI] | interval excludes 0 |", "|---|---|---|"]
            lines += [f"| {d['a']} − {d['b']} | {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] | "
                      f"{'yes' if d['survives'] else 'no'} |" for d in sc[key]]
    return lines


def figure(result: dict):
    """The aggregate score of each method with its 95 % interval, over evaluations and over time."""
    from matplotlib.figure import Figure

    agg, methods = result["scores"]["aggregate"], result["methods"]
    fig = Figure(figsize=(1.6 + 1.1 * len(methods), 4.0), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(methods))
    for shift, axis, color in ((-0.15, "evals", "C0"), (0.15, "time", "C1")):
        mean = np.array([(agg[m][axis] or {}).get("mean", math.nan) for m in methods], dtype=float)
        ci = np.array([(agg[m][axis] or {}).get("ci", [math.nan, math.nan]) for m in methods], dtype=float)
        err = np.abs(np.vstack([mean - ci[:, 0], ci[:, 1] - mean]))
        ax.errorbar(x + shift, mean, yerr=np.nan_to_num(err), fmt="o", color=color, capsize=4,
                    label=f"over {'evaluations' if axis == 'evals' else 'replayed time'}")
    ax.axhline(0.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(x, methods)
    ax.set_ylabel("methodology score (0 random, 1 optimum)")
    ax.set_title(f"{len(result['spaces'])} spaces, {result['seeds']} seeds, budget {result['budget']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
