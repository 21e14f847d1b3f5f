"""FPGA methods compared at equal tool time: ADRS and hypervolume after a given number of tool hours.

A method that stops early should not be compared with one that ran four times longer, so besides the
final values the paper-tables layout reads each run's trace (``pareto_<kernel>.json``: tool seconds,
ADRS and hypervolume of the top-fidelity designs after every batch, written by the harness) and gives

- :func:`budget_stats`: per (kernel, method) and tool budget (hours), the mean and sample std over seeds
  of the value the run had reached by then (a run that stopped earlier keeps its final value; a run
  with no top-fidelity design by then has no value, and the cell shows how many runs had one);
- :func:`cost_figure`: per kernel, ADRS and hypervolume against tool hours, the mean over seeds and a
  band of ± one std, where every run of the method has a value.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from tunebench.report.paper_tables import by_cell

DEFAULT_BUDGETS_H = (0.25, 0.5, 1.0)
FIGURE = "tool_hours.png"  # the figure's file name beside paper_tables.md
KEYS = (("adrs", "ADRS", "{:.4f}"), ("hypervolume", "normalized hypervolume", "{:.4f}"))


def parse_budgets(text: str) -> tuple[float, ...]:
    """``"0.25,0.5,1"`` -> (0.25, 0.5, 1.0); positive hours, else an ``argparse.ArgumentTypeError``
    naming the value (argparse prints it as a one-line ``error:``)."""
    import argparse
    try:
        values = tuple(float(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(not np.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"tool budgets {text!r}: give positive hours separated by commas, e.g. 0.25,0.5,1")
    return values


def value_at(trace: dict | None, key: str, seconds: float) -> float | None:
    """The run's ``key`` after ``seconds`` of tool time (None: no top-fidelity design by then)."""
    if not trace:
        return None
    times, values = trace.get("tool_s") or [], trace.get(key) or []
    i = bisect_right(times, seconds) - 1
    return None if i < 0 or values[i] is None else float(values[i])


def budget_stats(rows: list[dict], budgets_h=DEFAULT_BUDGETS_H) -> dict:
    """{(model, method, budget_h, key): (mean, std, runs with a value, runs)} over the runs' traces."""
    out = {}
    for (model, method), rs in by_cell(rows).items():
        for b in budgets_h:
            for key, _, _ in KEYS:
                vals = [v for r in rs if (v := value_at(r.get("trace"), key, b * 3600.0)) is not None]
                out[(model, method, b, key)] = (float(np.mean(vals)) if vals else np.nan,
                                                float(np.std(vals, ddof=1)) if len(vals) > 1 else np.nan,
                                                len(vals), len(rs))
    return out


def _cell(stat, fmt: str) -> str:
    mean, std, n_ok, n = stat
    if not n_ok:
        return "—"
    text = fmt.format(mean) + ("" if np.isnan(std) else " ± " + fmt.format(std))
    return text if n_ok == n else f"{text} ({n_ok}/{n} runs)"


def budget_tables(models, methods, stats: dict, budgets_h=DEFAULT_BUDGETS_H) -> list[tuple[str, list[str], list]]:
    """One table per metric: a row per (kernel, tool budget), a cell per method (mean ± std over seeds)."""
    tables = []
    for key, label, fmt in KEYS:
        rows = [[f"{model} @ {b:g} h", *(_cell(stats[(model, m, b, key)], fmt) if (model, m, b, key) in stats
                                         else "—" for m in methods)]
                for model in models for b in budgets_h]
        title = (f"{label} at equal tool time (mean ± std over seeds after the given tool hours; a run that "
                 "stopped earlier keeps its final value)")
        tables.append((title, ["kernel @ tool budget", *methods], rows))
    return tables


def curve(runs: list[dict], key: str, grid_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over ``runs`` of ``key`` on ``grid_s`` (NaN where some run has no value yet)."""
    vals = np.array([[np.nan if (v := value_at(r.get("trace"), key, t)) is None else v for t in grid_s]
                     for r in runs], dtype=float)
    mean = vals.mean(axis=0)  # NaN wherever a run has no value yet
    return mean, (vals.std(axis=0, ddof=1) if len(runs) > 1 else 0.0 * mean)


def cost_figure(rows: list[dict], methods, points: int = 200):
    """ADRS (top) and hypervolume (bottom) against tool hours per kernel (columns); None without traces."""
    from matplotlib.figure import Figure

    by = by_cell([r for r in rows if r.get("trace")])
    models = sorted({m for m, _ in by})
    if not models:
        return None
    fig = Figure(figsize=(5 * len(models), 8), layout="constrained")
    axes = np.atleast_2d(fig.subplots(2, len(models), squeeze=False))
    for j, model in enumerate(models):
        end = max(max(r["trace"]["tool_s"] or [0]) for (mo, _), rs in by.items() if mo == model for r in rs)
        grid = np.linspace(0, end, points)
        hv_means = []
        for i, method in enumerate(methods):
            runs = by.get((model, method))
            if not runs:
                continue
            for ax, (key, label, _) in zip(axes[:, j], KEYS):
                mean, std = curve(runs, key, grid)
                hi = 1.0 if key == "hypervolume" else np.inf  # ADRS >= 0, hypervolume in [0, 1]
                ax.plot(grid / 3600, mean, color=f"C{i % 10}", lw=1.6, drawstyle="steps-post",
                        label=f"{method} ({len(runs)} runs)")
                ax.fill_between(grid / 3600, np.clip(mean - std, 0, hi), np.clip(mean + std, 0, hi),
                                color=f"C{i % 10}", alpha=0.12, step="post")
                ax.set_ylabel(label)
                if key == "hypervolume":
                    hv_means.append(mean)
        axes[0, j].set_yscale("symlog", linthresh=0.01)  # ADRS spans 0 to ~1: the late differences matter
        if hv_means and np.isfinite(np.concatenate(hv_means)).any():
            allhv = np.concatenate(hv_means)
            axes[1, j].set_ylim(np.nanpercentile(allhv, 10), min(1.0, np.nanmax(allhv) + 0.01))
        for ax in axes[:, j]:
            ax.set_xlabel("tool hours")
            ax.grid(alpha=0.3)
            ax.set_title(model)
        axes[0, j].legend(fontsize=7)
    fig.suptitle("At equal tool time: mean over seeds, band = ± 1 std (drawn where every run has a value)")
    return fig
