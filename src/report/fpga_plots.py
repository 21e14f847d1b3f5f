"""HTML-only figures of FPGA (multi-objective) groups: ADRS and hypervolume so far, and Pareto fronts.

ADRS and hypervolume so far: the run metrics ``<task id>.adrs`` and ``<task id>.hypervolume`` (step =
trial) that the harness logs after every batch, vs trials; one thin line per run and task, the thick
line the median per method (:func:`tunebench.report.curves.median_curve`). Pareto fronts: per task
the designs on each run's front (``pareto_<task>.json``) in the plane of the first two objectives,
one colour per method, with the true front of the shipped table (black) when there is one.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from tunebench.report.curves import median_curve
from tunebench.report.figure import Plot
from tunebench.report.query import RunFiles

HISTORIES = (("adrs", "ADRS so far (lower is better)"), ("hypervolume", "normalized hypervolume so far"))


def _history(client, run_id: str, key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(trials so far, value) of a run metric's history; None when the run did not log it."""
    try:
        points = sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
    except Exception:
        return None
    if not points:
        return None
    steps, values = np.asarray(points, dtype=float).T
    return steps + 1, values


def _shown_runs(group: pd.DataFrame, methods, files: RunFiles) -> list[tuple[dict, list[dict]]]:
    """The shown runs (``methods``, None: all) with their ``tasks.json`` (empty when unreadable)."""
    out = []
    for run in group.to_dict("records"):
        if methods and run["method"] not in methods:
            continue
        loaded = files.load(run)
        tasks = loaded[1] if loaded else []
        if loaded and not tasks:  # no tasks.json: the record file's task ids
            tasks = [{"id": tid, "name": tid} for tid in dict.fromkeys(r["task_id"] for r in loaded[0])]
        out.append((run, tasks))
    return out


def history_figure(model: str, target: str, client, runs: list[tuple[dict, list[dict]]]):
    """ADRS (left) and hypervolume (right) vs trials; None when no run logged either."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5), layout="constrained")
    axes = fig.subplots(1, 2)
    methods = sorted({run["method"] for run, _ in runs})
    drawn = False
    for ax, (key, label) in zip(axes, HISTORIES):
        for i, method in enumerate(methods):
            series = [h for run, tasks in runs if run["method"] == method for t in tasks
                      if (h := _history(client, run["run_id"], f"{t['id']}.{key}")) is not None]
            for x, y in series:
                ax.plot(x, y, color=f"C{i % 10}", lw=0.9, alpha=0.45, drawstyle="steps-post")
            if series:
                x, y = median_curve(series)
                ax.plot(x, y, color=f"C{i % 10}", lw=2.0, drawstyle="steps-post",
                        label=f"{method} (median of {len(series)})")
                drawn = True
        ax.set_xlabel("trials")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"{model} on {target}: ADRS and hypervolume so far (thin: runs, thick: median)")
    return fig if drawn else None


def _scaled(name: str) -> tuple[float, str]:
    """Scale and axis label of an objective: seconds shown in µs."""
    return (1e6, f"{name[:-2]} [µs]") if name.endswith("_s") else (1.0, name)


def _fronts(runs, files: RunFiles) -> dict[str, list[dict]]:
    """Per task name: the ``pareto_<task>.json`` documents of the runs, each with its ``method``."""
    out: dict[str, list[dict]] = {}
    for run, tasks in runs:
        for task in tasks:
            path = files.path(run, f"pareto_{task['name']}.json")
            if path:
                with open(path) as fh:
                    out.setdefault(task["name"], []).append({**json.load(fh), "method": run["method"]})
    return out


def pareto_figure(model: str, target: str, task: str, docs: list[dict]):
    """The runs' Pareto designs of one task in the plane of the first two objectives; None with fewer."""
    from matplotlib.figure import Figure

    names = docs[0].get("objectives") or []
    if len(names) < 2:
        return None
    (sx, xlabel), (sy, ylabel) = _scaled(names[0]), _scaled(names[1])
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    true = next((d["true_front"] for d in docs if d.get("true_front")), None)
    if true:
        t = np.asarray(true, dtype=float)
        ax.scatter(t[:, 0] * sx, t[:, 1] * sy, s=40, facecolors="none", edgecolors="k", lw=0.8,
                   label=f"true front ({len(t)} designs)")
    for i, method in enumerate(sorted({d["method"] for d in docs})):
        pts = [(p["objectives"][names[0]] * sx, p["objectives"][names[1]] * sy)
               for d in docs if d["method"] == method for p in d.get("front") or []]
        if pts:
            x, y = np.asarray(pts, dtype=float).T
            ax.scatter(x, y, color=f"C{i % 10}", s=22, alpha=0.7, label=f"{method} ({len(pts)} designs)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{model} on {target}, task {task}: Pareto designs found (all seeds)", fontsize=9)
    return fig


def fpga_group_plots(client, model: str, target: str, group: pd.DataFrame, files: RunFiles, methods) -> list:
    """The HTML-only figures of one FPGA group (no PNG files)."""
    runs = _shown_runs(group, methods, files)
    made = []
    fig = history_figure(model, target, client, runs)
    if fig is not None:
        made.append(Plot("ADRS and hypervolume so far", None, fig))
    for task, docs in sorted(_fronts(runs, files).items()):
        fig = pareto_figure(model, target, task, docs)
        if fig is not None:
            made.append(Plot(f"Pareto designs of task {task}", None, fig))
    return made
