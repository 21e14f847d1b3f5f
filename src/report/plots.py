"""Leaderboard plots (matplotlib): per (model, target) group the model-level best-so-far curves and
the fraction of the optimum reached, as PNG files beside the tables and as SVG text for the HTML page.

Each seed is a thin line; the thick line is the median over seeds (best so far) or their mean
(fraction of the optimum); the curve math is in :mod:`tunebench.report.curves`. FPGA groups get no
PNGs (their curves are the MLflow ADRS / hypervolume histories); for the HTML page
:mod:`tunebench.report.fpga_plots` draws their ADRS/hypervolume histories and Pareto fronts.
"""

from __future__ import annotations

import io
import os
import re
import tempfile

import pandas as pd

from tunebench.report.curves import group_fractions, median_curve, model_curve, noisy_optima
from tunebench.report.figure import Plot
from tunebench.report.query import RunFiles

DPI = 110


def safe_name(name: str) -> str:
    """``name`` with every run of characters other than letters, digits, ``_.-`` turned into ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def svg_text(figure) -> str:
    """The figure as an ``<svg>`` element to put inline in HTML: text drawn as paths (no fonts needed
    where it is shown), without the XML prolog, the metadata block and comments."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path"}):
        figure.savefig(buf, format="svg", dpi=DPI)
    text = buf.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def best_so_far_figure(model: str, target: str, curves: dict[str, list[pd.DataFrame]]):
    """Best-so-far model latency vs cumulative trials (left) and search time (right)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    hours = max(c["seconds"].iloc[-1] for cs in curves.values() for c in cs) > 7200
    colors = [f"C{i % 10}" for i in range(len(curves))]
    for color, (method, runs) in zip(colors, sorted(curves.items())):
        for ax, col in zip(axes, ("trials", "seconds")):
            scale = 3600.0 if col == "seconds" and hours else 1.0
            series = [(c[col].to_numpy() / scale, c["latency_ms"].to_numpy()) for c in runs]
            for x, y in series:
                ax.plot(x, y, color=color, lw=0.9, alpha=0.45, drawstyle="steps-post")
            x, y = median_curve(series)
            ax.plot(x, y, color=color, lw=2.0, drawstyle="steps-post", label=f"{method} (median of {len(runs)})")
    axes[0].set_xlabel("cumulative trials")
    axes[1].set_xlabel(f"cumulative search time [{'h' if hours else 's'}]")
    axes[0].set_ylabel("Σ weight × best latency so far [ms]")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{model} on {target}: model-level best so far (thin: seeds, thick: median)")
    return fig


def optimum_figure(title: str, grid, fractions: dict):
    """Fraction of the optimum vs per-task search time: per method thin lines per seed, thick mean."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for i, (method, curves) in enumerate(sorted(fractions.items())):
        color = f"C{i % 10}"
        for y in curves:
            ax.plot(grid, y, color=color, lw=0.9, alpha=0.45, drawstyle="steps-post")
        ax.plot(grid, curves.mean(axis=0), color=color, lw=2.0, drawstyle="steps-post",
                label=f"{method} (mean of {len(curves)})")
    ax.set_xlabel("search time per task [s]")
    ax.set_ylabel("fraction of the optimum (mean over tasks)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return fig


def optimum_plot(model: str, target: str, records_by_method: dict[str, list[list[dict]]], shown: set[str] | None):
    """The figure of the methods in ``shown`` (None: all) with optima over every method given, and the
    tasks whose optimum comes only from noisy measurements."""
    grid, fractions, optima = group_fractions(records_by_method)
    runs = [records for method_runs in records_by_method.values() for records in method_runs]
    noisy = noisy_optima(runs, optima)
    title = (f"{model} on {target}: fraction of the optimum reached, mean over {len(optima)} tasks "
             "(thin: seeds, thick: mean)")
    if noisy:
        title += f"\noptimum of {len(noisy)} task(s) from measurements marked noisy"
    shown_fractions = {m: f for m, f in fractions.items() if shown is None or m in shown}
    return optimum_figure(title, grid, shown_fractions), noisy


def write_optimum_plot(model: str, target: str, records_by_method: dict[str, list[list[dict]]],
                       shown: set[str] | None, path: str) -> list[str]:
    """:func:`optimum_plot` saved as a PNG at ``path``; returns the tasks with noisy optima."""
    fig, noisy = optimum_plot(model, target, records_by_method, shown)
    fig.savefig(path, dpi=DPI)
    return noisy


def make_plots(client, runs: pd.DataFrame, methods, notes: dict, fpga: bool = False,
               trusted: list[str] | None = None) -> dict[tuple, list[Plot]]:
    """The figures of every (model, target) group: {(model, target): [Plot, ...]}. ``fpga``: FPGA groups
    get their HTML-only figures too (else none). Notes on missing curves go to ``notes``. ``trusted``: the
    folders whose record files are read in place (:class:`~tunebench.report.query.RunFiles`)."""
    from tunebench.report.fpga_plots import fpga_group_plots

    plots = {}
    with tempfile.TemporaryDirectory(prefix="tunebench-lb-") as tmp:
        files = RunFiles(client, tmp, trusted)
        for (model, target), group in runs.groupby(["model", "target"], sort=True):
            if group["hypervolume"].notna().any():
                if fpga:
                    plots[(model, target)] = fpga_group_plots(client, model, target, group, files, methods)
                continue
            if group["peak_bytes"].notna().any():
                continue  # memory groups (target=memory): one schedule per task, no search curve to draw
            plots[(model, target)] = _group_plots(model, target, group, files, methods,
                                                  notes.setdefault((model, target), []))
    return plots


def _load_group(group: pd.DataFrame, files: RunFiles, methods, notes: list[str]):
    """Per method the best-so-far curves of the shown runs, and per method the records of every run."""
    curves: dict[str, list[pd.DataFrame]] = {}
    records: dict[str, list[list[dict]]] = {}
    for run in group.to_dict("records"):
        loaded = files.load(run)
        if loaded is not None:
            records.setdefault(run["method"], []).append(loaded[0])
        if methods and run["method"] not in methods:
            continue
        curve = model_curve(*loaded) if loaded else None
        if curve is None:
            why = "records not available" if loaded is None else "a task without a valid measurement"
            notes.append(f"no curve for `{run['method']}` seed {run['seed']} (run {run['run_id'][:8]}): {why}")
            continue
        curves.setdefault(run["method"], []).append(curve)
    return curves, records


def _group_plots(model, target, group: pd.DataFrame, files: RunFiles, methods, notes: list[str]) -> list[Plot]:
    """The best-so-far and fraction-of-optimum figures of one group (rows: ``methods``, None: all;
    every method's records count towards the optima). Accelerator groups (energy per MAC): the fraction
    of the optimum of each task's objective only (a sum over layers of energy per MAC is no quantity)."""
    curves, records = _load_group(group, files, methods, notes)
    made, stem = [], f"{safe_name(model)}_{safe_name(target)}.png"
    if group["energy_pj_per_mac"].notna().any():  # accelerator groups: latency is no objective of theirs
        curves = {}
    if curves:
        made.append(Plot("best-so-far curves", f"curves_{stem}", best_so_far_figure(model, target, curves)))
    shown = set(methods) if methods else None
    if any(shown is None or m in shown for m in records):
        fig, noisy = optimum_plot(model, target, records, shown)
        made.append(Plot("fraction of the optimum reached", f"optimum_{stem}", fig))
        if noisy:
            notes.append(f"fraction of optimum: the optimum of {len(noisy)} task(s) comes only from measurements "
                         f"marked noisy ({', '.join(noisy)})")
    return made


def write_pngs(plots: dict[tuple, list[Plot]], out: str) -> dict[tuple, list[tuple[str, str]]]:
    """Save every plot that has a file name into ``out``; returns {(model, target): [(caption, file)]}."""
    written = {}
    for key, group_plots in plots.items():
        for plot in group_plots:
            if plot.file:
                plot.figure.savefig(os.path.join(out, plot.file), dpi=DPI)
                written.setdefault(key, []).append((plot.caption, plot.file))
    return written
