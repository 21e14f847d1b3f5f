"""The ``paper-tables`` layout: FPGA design-space exploration in the layout of [Sun-PhD] Tables 3.2-3.4
(docs/REFERENCES.md), per kernel (model) and method over seeds.

- normalized ADRS: the mean over seeds and its standard deviation, each divided by the ``norm``
  method's (default ``ann`` = 1.00), on every design measured at the top fidelity (Omega for every
  method), and again in [Sun-PhD]'s reading for the baselines with a distinct learned front (ann,
  bt, dac19: their predicted Pareto designs only; the other methods' cells are their Omega values);
- raw ADRS, normalized hypervolume, algorithm hours and tool (FPGA) hours (means over seeds);
- overall hours (algorithm + tool), evaluations at all fidelities and at the top fidelity;
- with :mod:`tunebench.report.tool_budget`: ADRS and hypervolume at equal tool hours.

Each run gives one row per ``pareto_<kernel>.json`` (written by the harness's FPGA metrics) with its
``config.yaml``; runs on other targets than ``table``, ``fpga_open`` and ``vivado`` are left out.
:func:`rows_from_store` reads the FINISHED runs of the tracking store (through
:mod:`tunebench.run_lookup`), :func:`rows_from_folder` a records folder (``benchmarks/fpga_tables.py``).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
from collections import defaultdict

import numpy as np
import yaml

from tunebench.config.load import SavedRun
from tunebench.report.markdown import md_table

PARETO = "pareto_*.json"


def run_rows(saved: dict, pareto_docs: list[dict]) -> list[dict]:
    """One row per kernel of a multi-objective run: its ``config.yaml`` and ``pareto_<kernel>.json``
    documents (a run without Pareto documents has no row)."""
    run = SavedRun.read(saved)
    return [{"method": run.method, "model": run.model, "seed": run.seed,
             "target": run.target, "adrs": d.get("adrs"), "hv": d.get("hypervolume"),
             "learned": "adrs_learned" in d,
             "adrs_paper": d["adrs_learned"] if d.get("adrs_learned") is not None else d.get("adrs"),
             "tool_s": d.get("tool_s", 0.0), "alg_s": d.get("algorithm_s", 0.0),
             "n_top": d.get("n_top_fidelity"), "per_fidelity": d.get("per_fidelity", {}),
             "trace": d.get("trace")} for d in pareto_docs]


def _read(path: str, loader=json.load):
    with open(path) as fh:
        return loader(fh)


def rows_from_folder(records_dir: str) -> list[dict]:
    """The rows of every run folder ``<records_dir>/<run>/`` holding a ``config.yaml``."""
    rows = []
    for cfg_path in glob.glob(os.path.join(records_dir, "*", "config.yaml")):
        docs = [_read(p) for p in glob.glob(os.path.join(os.path.dirname(cfg_path), PARETO))]
        rows += run_rows(_read(cfg_path, yaml.safe_load), docs)
    return rows


def _pareto_paths(client, run: dict, files) -> list[str]:
    """The run's ``pareto_*.json`` files: beside its record file in a trusted folder
    (:meth:`~tunebench.report.query.RunFiles.folder`), else its artifacts (downloaded)."""
    folder = files.folder(run)
    if folder and os.path.isdir(folder):
        return sorted(glob.glob(os.path.join(folder, PARETO)))
    try:
        names = [a.path for a in client.list_artifacts(run["run_id"]) if fnmatch.fnmatch(a.path, PARETO)]
    except Exception:
        return []
    return [p for p in (files.path(run, name) for name in names) if p]


def rows_from_store(client, runs, files) -> list[dict]:
    """The rows of the runs (a frame of :func:`tunebench.report.query.load_runs`); ``files``: a
    :class:`tunebench.report.query.RunFiles`. Runs without a readable ``config.yaml`` are left out."""
    rows = []
    for run in runs.to_dict("records"):
        cfg_path = files.path(run, "config.yaml")
        if cfg_path:
            rows += run_rows(_read(cfg_path, yaml.safe_load), [_read(p) for p in _pareto_paths(client, run, files)])
    return rows


def by_cell(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The rows grouped by (model, method)."""
    by = defaultdict(list)
    for r in rows:
        by[(r["model"], r["method"])].append(r)
    return by


def summarize(rows: list[dict], methods: list[str] | None = None):
    """(kernels, methods, {(kernel, method): means over its runs}); ``methods``: these columns in this
    order (None: every method, sorted)."""
    by = by_cell(rows)
    models = sorted({k[0] for k in by})
    methods = methods or sorted({k[1] for k in by})
    out = {}
    for model in models:
        for method in methods:
            rs = by.get((model, method), [])
            if not rs:
                continue
            ad = np.array([r["adrs"] for r in rs if r["adrs"] is not None], dtype=float)
            paper = np.array([r.get("adrs_paper") for r in rs if r.get("adrs_paper") is not None], dtype=float)
            out[(model, method)] = {
                "n": len(rs), "adrs": ad.mean() if len(ad) else np.nan,
                "adrs_std": ad.std(ddof=1) if len(ad) > 1 else np.nan,
                "adrs_paper": paper.mean() if len(paper) else np.nan,
                "adrs_paper_std": paper.std(ddof=1) if len(paper) > 1 else np.nan,
                "learned": any(r.get("learned") for r in rs),
                "hv": float(np.mean([r["hv"] for r in rs])), "alg_h": float(np.mean([r["alg_s"] for r in rs])) / 3600,
                "tool_h": float(np.mean([r["tool_s"] for r in rs])) / 3600,
                "n_top": float(np.mean([r["n_top"] or 0 for r in rs])),
                "evals": float(np.mean([sum((r["per_fidelity"] or {}).values()) for r in rs]))}
    return models, methods, out


def _table(models, methods, fn, fmt: str, mark=None) -> list[list[str]]:
    """The rows of one table (kernel, one cell per method) and its Average row; ``mark(model,
    method)``: a suffix for the cell (or None)."""
    rows, cols = [], {m: [] for m in methods}
    for model in models:
        cells = []
        for m in methods:
            v = fn(model, m)
            suffix = (mark(model, m) or "") if mark else ""
            cells.append("—" if v is None or not np.isfinite(v) else fmt.format(v) + suffix)
            if v is not None and np.isfinite(v):
                cols[m].append(v)
        rows.append([model, *cells])
    rows.append(["Average", *(fmt.format(np.mean(cols[m])) if cols[m] else "—" for m in methods)])
    return rows


def tables(models, methods, out, norm: str = "ann") -> list[tuple[str, list[str], list[list[str]]]]:
    """Every table as (title, headers, rows of cells)."""
    def ratio(key):
        def fn(model, m):
            a, b = out.get((model, m)), out.get((model, norm))
            return None if a is None or b is None or not b[key] else a[key] / b[key]
        return fn

    def raw(key):
        return lambda model, m: (out.get((model, m)) or {}).get(key)

    def overall(model, m):
        return None if (model, m) not in out else out[(model, m)]["alg_h"] + out[(model, m)]["tool_h"]

    def learned(model, m):
        return "*" if (out.get((model, m)) or {}).get("learned") else None

    specs = [
        (f"Normalized ADRS (mean over seeds, {norm} = 1.00; every design measured at the top fidelity)",
         ratio("adrs"), "{:.2f}", None),
        (f"Normalized standard deviation of ADRS ({norm} = 1.00)", ratio("adrs_std"), "{:.2f}", None),
        ("ADRS (raw mean)", raw("adrs"), "{:.4f}", None),
        (f"Normalized ADRS, learned front only ([Sun-PhD]'s reading, {norm} = 1.00; * = the method's "
         "predicted Pareto designs only, other cells as above)", ratio("adrs_paper"), "{:.2f}", learned),
        ("ADRS, learned front only (raw mean; * as above)", raw("adrs_paper"), "{:.4f}", learned),
        ("Normalized hypervolume (raw mean, target's reference point)", raw("hv"), "{:.4f}", None),
        ("Algorithm hours (mean per run; Table 3.3 'Alg.')", raw("alg_h"), "{:.4f}", None),
        ("Tool (FPGA) hours charged (mean per run, replayed tool seconds; Table 3.3 'FPGA')", raw("tool_h"),
         "{:.3f}", None),
        ("Overall hours (algorithm + tool; Table 3.4)", overall, "{:.3f}", None),
        ("Evaluations (trials, all fidelities; mean per run)", raw("evals"), "{:.1f}", None),
        ("Top-fidelity (impl) evaluations (mean per run)", raw("n_top"), "{:.1f}", None),
    ]
    if not any(v.get("learned") for v in out.values()):  # no method has a distinct learned front
        specs = [spec for spec in specs if spec[3] is None]
    return [(title, ["kernel", *methods], _table(models, methods, fn, fmt, mark)) for title, fn, fmt, mark in specs]


def interval_table(rows: list[dict], models, methods, norm: str = "ann") -> tuple[str, list[str], list[list[str]]]:
    """Normalized ADRS with its 95 % percentile-bootstrap interval over seeds (the method's and ``norm``'s
    runs resampled on their own: :func:`~tunebench.protocol.stats.ratio_of_means_ci`) and the ratio of
    medians, which one seed far off the front moves less than the mean."""
    from tunebench.protocol.stats import ratio_of_means_ci

    by = by_cell(rows)

    def adrs(model, method):
        return [r["adrs"] for r in by.get((model, method), []) if r["adrs"] is not None]

    cells = []
    for model in models:
        base = adrs(model, norm)
        row = [model]
        for m in methods:
            own = adrs(model, m)
            if not own or not base or not np.mean(base) or not np.median(base):
                row.append("—")
                continue
            with np.errstate(divide="ignore", invalid="ignore"):  # resamples of a baseline that found the front
                point, lo, hi = ratio_of_means_ci(own, base)
            row.append(f"{point:.2f} [{lo:.2f}, {hi:.2f}]; {np.median(own) / np.median(base):.2f}")
        cells.append(row)
    title = (f"Normalized ADRS with its 95 % bootstrap interval over seeds ({norm} = 1.00), then the ratio of "
             "medians")
    return title, ["kernel", *methods], cells


def runs_per_cell(out) -> str:
    """The closing line: the distinct numbers of runs behind the cells."""
    return f"Runs per cell: {sorted({v['n'] for v in out.values()})}"


def render(models, methods, out, norm: str = "ann", extra=()) -> str:
    """The tables as Markdown (bold title, table, blank line each), then the ``extra`` tables (e.g.
    :func:`tunebench.report.tool_budget.budget_tables`) and the runs-per-cell line."""
    lines = []
    for title, headers, rows in [*tables(models, methods, out, norm), *extra]:
        lines += [f"**{title}**", "", md_table(headers, rows), ""]
    lines.append(runs_per_cell(out))
    return "\n".join(lines)
