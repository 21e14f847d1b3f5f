"""Leaderboard: FINISHED MLflow runs -> comparison tables (Markdown, CSV) and best-so-far plots.

``python -m tunebench leaderboard [--tracking-uri URI] [--experiment NAME] [--model M] [--target T]
[--method A,B] [--since YYYY-MM-DD] [--baseline autotvm] [--out leaderboard/] [--no-plots]``

Rows
    Runs are grouped by (model, target) and, within a group, by method; one row per method, aggregated
    over its seeds. When several FINISHED runs share (model, target, method, seed), only the most recent
    one counts (a re-run replaces the old one; the Markdown says how many were set aside). Means are
    over the runs that have the metric; stds are sample stds (ddof=1), blank for a single seed.
    ``--method`` chooses the rows shown; the baseline's runs are always read, so reductions against it
    stay defined. Rows: baseline first, then by mean end-to-end latency (blank last), then by name.

Reductions (DESIGN.md §Metrics)
    With T = mean ``search_time_s`` and L = mean ``e2e_latency_ms`` over a method's seeds, and
    T_base, L_base the same means of the ``--baseline`` method in the same (model, target) group:
    ``search_red = 1 - T/T_base``, ``latency_red = 1 - L/L_base``,
    ``HV_vs_baseline = search_red * latency_red * 100`` (the tables show both reductions in %).
    The baseline's own row has 0 for all three. Without a baseline run in the group (or without its
    e2e latency) the affected columns are blank and the group carries a note. Note that HV is also
    positive when both reductions are negative; read it together with them.

Model-level best-so-far curve (plots)
    Tasks are tuned one after another, so a run's measurements form one sequence: task 1's trials,
    then task 2's, ... (order of ``tasks.json``, else of first appearance in the record file; trials
    in trial order). At each point k of that sequence the curve is ``L(k) = sum_i w_i * b_i(k)``,
    w_i the task's weight (occurrences in the model, from ``tasks.json``; 1 when unknown) and b_i(k)
    the best valid latency of task i among the measurements up to k -- or, for a task not reached
    yet (or with only invalid trials so far), its *first valid latency in the run*: the value it
    takes as soon as its search begins to count. The curve thus starts at k = 0 (every task at its
    first valid latency), never increases, and ends at sum_i w_i * best_i (the run's
    ``tasks_latency_ms`` when every best passed the output check). A run with a task that never got
    a valid measurement has no curve (noted under the table).
    x axes: cumulative trials k, and cumulative search seconds (the finished tasks' final clocks from
    ``tasks.json`` -- else their last record's ``search_s`` -- plus the current task's ``search_s``);
    both start at 0. Each seed is a thin line; the thick line is the pointwise median over seeds,
    each seed's curve held at its last value after it ends (so the median never increases either).
    Records come from the path in the run's ``tunebench.record_file`` tag, or from its
    ``records.jsonl`` artifact (and ``tasks.json``) when that path is not on this machine.

Statistics, noise marks and machine (:mod:`tunebench.harness.leaderboard_stats`)
    Speedups vs PyTorch eager / torch.compile / PyTorch TF32 with 95 % bootstrap intervals (over
    seeds; a single seed: its own interval over interleaved rounds), intervals of the reductions and
    HV against the baseline, better/worse only when an interval excludes 1, ``(noisy)`` on every
    value that rests on a timing marked noisy, ``(unchecked)`` on Σ task latency and % peak when a
    run reported a task best whose output check could not be performed, and above each table the
    runs' precision, threads, device and measured peak.

Fraction of the optimum (:mod:`tunebench.harness.optimum_curves`)
    Per group a second PNG after Kernel Tuner's benchmark methodology: mean over tasks of
    optimum / best so far vs per-task search seconds, the optimum over every run of the group.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import math
import os
import re
import tempfile

import numpy as np
import pandas as pd

from tunebench.errors import UserError
from tunebench.harness import leaderboard_stats as lbs
from tunebench.harness.leaderboard_stats import fmt_num as _num
from tunebench.harness.optimum_curves import write_optimum_plot
from tunebench.harness.records import read_records
from tunebench.harness.tracking import check_reachable, resolve_uri

RECORD_TAG = "tunebench.record_file"  # same tag as tunebench.harness.experiment.RECORD_TAG
RUN_METRICS = ("search_time_s", "search_time_excl_source_s", "n_measurements", "n_invalid", "n_tasks",
               "tasks_latency_ms", "wall_s",
               "e2e_latency_ms", "e2e_latency_std_ms", "torch_latency_ms", "torch_latency_std_ms",
               "tvm_default_latency_ms", "tvm_default_latency_std_ms", "e2e_rel_err",
               "adrs", "hypervolume", "tool_s", "algorithm_s", *lbs.RUN_METRICS)

CSV_COLUMNS = ("model", "target", "method", "is_baseline", "n_seeds", "seeds", "search_time_s_mean",
               "search_time_s_std", "search_time_h_mean", "search_time_h_std", "n_measurements_mean",
               "tasks_latency_ms_mean", "e2e_latency_ms_mean", "e2e_latency_ms_std", "n_e2e",
               "torch_latency_ms_mean", "tvm_default_latency_ms_mean", "e2e_rel_err_max",
               "search_red_pct", "latency_red_pct", "hv_vs_baseline", "search_excl_source_s_mean",
               "search_red_excl_source_pct", "hv_excl_source", "baseline", "run_ids",
               "adrs_mean", "adrs_std", "hypervolume_mean", "hypervolume_std", "tool_s_mean", "algorithm_s_mean",
               *lbs.CSV_COLUMNS)

# FPGA (multi-objective) groups: ADRS and normalized hypervolume instead of latencies (issue 6).
FPGA_MD_COLUMNS = (
    ("method", lambda r: r["method"]),
    ("seeds", lambda r: f"{r['n_seeds']} ({r['seeds']})"),
    ("ADRS", lambda r: _pm(r["adrs_mean"], r["adrs_std"], 4)),
    ("hypervolume", lambda r: _pm(r["hypervolume_mean"], r["hypervolume_std"], 4)),
    ("measurements", lambda r: _num(r["n_measurements_mean"], 1, strip=True)),
    ("search [s]", lambda r: _pm(r["search_time_s_mean"], r["search_time_s_std"], 1)),
    ("tool [s]", lambda r: _num(r["tool_s_mean"], 1)),
    ("algorithm [s]", lambda r: _num(r["algorithm_s_mean"], 2)),
)

# (Markdown header, formatter of a table row): the Markdown view of the CSV rows.
MD_COLUMNS = (
    ("method", lambda r: r["method"] + (" (baseline)" if r["is_baseline"] else "")),
    ("seeds", lambda r: f"{r['n_seeds']} ({r['seeds']})"),
    ("search [h]", lambda r: _pm(r["search_time_h_mean"], r["search_time_h_std"], 2)),
    ("search [s]", lambda r: _pm(r["search_time_s_mean"], r["search_time_s_std"], 1)),
    ("measurements", lambda r: _num(r["n_measurements_mean"], 1, strip=True)),
    ("Σ task latency [ms]", lambda r: lbs.tasks_cell(_num(r["tasks_latency_ms_mean"], 4), r)),
    ("e2e latency [ms]", lambda r: lbs.mark(_pm(r["e2e_latency_ms_mean"], r["e2e_latency_ms_std"], 4),
                                            lbs.flag(r["e2e_noisy_any"]))),
    ("speedup vs PyTorch [×]", lambda r: lbs.speedup_cell(r, "speedup_vs_torch")),
    ("speedup vs torch.compile [×]", lambda r: lbs.speedup_cell(r, "speedup_vs_torch_compile")),
    ("speedup vs PyTorch TF32 [×]", lambda r: lbs.speedup_cell(r, "speedup_vs_torch_tf32")),
    ("TVM default [ms]", lambda r: lbs.mark(_num(r["tvm_default_latency_ms_mean"], 4),
                                            lbs.flag(r["tvm_default_noisy_any"]))),
    ("% peak", lambda r: lbs.tasks_cell(_num(r["pct_peak_mean"], 1), r)),
    ("noisy tasks", lambda r: _num(r["n_noisy_tasks_mean"], 2, strip=True)),
    ("search red. [%]", lambda r: lbs.reduction_cell(r, "search_red")),
    ("latency red. [%]", lambda r: lbs.reduction_cell(r, "latency_red")),
    ("HV vs {baseline}", lambda r: _hv_cell(r)),
    ("search excl. source [s]", lambda r: _num(r["search_excl_source_s_mean"], 1)),
    ("search red. excl. source [%]", lambda r: _num(r["search_red_excl_source_pct"], 2)),
    ("HV excl. source", lambda r: _num(r["hv_excl_source"], 4)),
)
#: columns left out of a group's Markdown table unless the predicate (None: the cell is not blank) holds
#: for some row: excl. source times exist for transfer methods (dgp) only, TF32 on cuda only
OPTIONAL_MD = {"search excl. source [s]": None, "search red. excl. source [%]": None, "HV excl. source": None,
               "speedup vs PyTorch TF32 [×]": None, "noisy tasks": lbs.tasks_noisy}


def _hv_cell(r) -> str:
    """HV with a marker when both reductions are negative: the product is then positive although
    the method is slower to search *and* gives slower code than the baseline."""
    text = lbs.ci_text(r["hv_vs_baseline"], r.get("hv_ci_low"), r.get("hv_ci_high"), 4)
    s, lat = r["search_red_pct"], r["latency_red_pct"]
    if text and s == s and lat == lat and s < 0 and lat < 0:  # (x == x: not NaN)
        text += " (both worse)"
    return lbs.mark(text, lbs.latency_red_noisy(r))


# ---------------------------------------------------------------- reading the tracking store

def open_store(uri: str | None):
    """An ``MlflowClient`` for ``uri`` (None: ``sqlite:///./mlflow.db``); a store that is not there
    raises :class:`UserError` (the leaderboard only reads, so it never creates one)."""
    uri = resolve_uri(uri, os.getcwd())
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):]
        if not os.path.isfile(path):
            raise UserError(f"--tracking-uri={uri}: no tracking database at {path}; run an experiment first "
                            "or pass the store's URI (sqlite:///path/mlflow.db, http(s)://host:port, file:/path)")
        _check_sqlite_store(uri, path)
    elif uri.startswith(("file:", "/")):
        folder = re.sub(r"^file:(//)?", "", uri)
        if not os.path.isdir(folder):
            raise UserError(f"--tracking-uri={uri}: no tracking folder at {folder}")
    else:
        try:  # http(s): the server's /health answers; any other scheme: one line naming the valid ones
            check_reachable(uri)
        except UserError as exc:
            text = str(exc).replace("tracking.uri=null", "no --tracking-uri")
            raise UserError(text.replace("tracking.uri=", "--tracking-uri=")) from None
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # importing mlflow resets its logger's level
    try:
        client = MlflowClient(uri)
        client.search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - whatever the store raises, the user gets one line
        raise UserError(f"--tracking-uri={uri}: cannot read the tracking store ({_first_line(exc)})") from None
    return client


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _check_sqlite_store(uri: str, path: str) -> None:
    """Refuse a file that is not an MLflow database, read-only (MLflow would turn it into one)."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise UserError(f"--tracking-uri={uri}: {path} is not a readable SQLite database ({exc})") from None
    if not {"experiments", "runs"} <= tables:
        raise UserError(f"--tracking-uri={uri}: {path} is not an MLflow tracking database (no runs table)")


def _experiment_ids(client, names: list[str] | None) -> dict[str, str]:
    exps = {e.experiment_id: e.name for e in _all_pages(lambda tok: client.search_experiments(page_token=tok))}
    if not names:
        return exps
    by_name = {name: eid for eid, name in exps.items()}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UserError(f"--experiment={unknown[0]!r} is unknown; valid: {', '.join(sorted(by_name)) or '(none)'}")
    return {by_name[n]: n for n in names}


def _all_pages(fetch) -> list:
    out, token = [], None
    while True:
        page = fetch(token)
        out += list(page)
        token = page.token
        if not token:
            return out


def parse_since(text: str | None) -> int | None:
    """``YYYY-MM-DD`` -> milliseconds since the epoch at 00:00 UTC of that day."""
    if not text:
        return None
    try:
        day = dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        raise UserError(f"--since={text!r}: expected a date YYYY-MM-DD") from None
    return int(day.timestamp() * 1000)


def load_runs(client, experiments: list[str] | None = None, since: str | None = None) -> pd.DataFrame:
    """One row per FINISHED run: ids, tags (method, model, target, seed, record file), run metrics."""
    from mlflow.exceptions import MlflowException

    query = "attributes.status = 'FINISHED'"
    since_ms = parse_since(since)
    if since_ms is not None:
        query += f" and attributes.start_time >= {since_ms}"
    try:
        exps = _experiment_ids(client, experiments)
        ids, runs = list(exps), []
        for i in range(0, len(ids), 100):  # search_runs takes a bounded list of experiments
            runs += _all_pages(lambda tok, chunk=ids[i:i + 100]: client.search_runs(chunk, query, page_token=tok))
    except MlflowException as exc:
        raise UserError(f"tracking store {client.tracking_uri}: {_first_line(exc)}") from None
    rows = []
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        rows.append({"run_id": run.info.run_id, "experiment": exps[run.info.experiment_id],
                     "method": tags.get("method", "?"), "model": tags.get("model", "?"),
                     "target": tags.get("target", "?"), "seed": tags.get("seed", "?"),
                     "start_time": run.info.start_time, "record_file": tags.get(RECORD_TAG),
                     **{t: tags.get(t) for t in lbs.RUN_TAGS}, **{c: tags.get(t) for c, t in lbs.EXTRA_TAGS.items()},
                     **{m: metrics.get(m, math.nan) for m in RUN_METRICS}})
    columns = ["run_id", "experiment", "method", "model", "target", "seed", "start_time", "record_file",
               *lbs.RUN_TAGS, *lbs.EXTRA_TAGS, *RUN_METRICS]
    return pd.DataFrame(rows, columns=columns)


def select_runs(runs: pd.DataFrame, models=None, targets=None) -> tuple[pd.DataFrame, int]:
    """Keep the chosen models/targets and the latest run per (model, target, method, seed).

    Returns the runs and how many older duplicates were set aside.
    """
    if models:
        runs = runs[runs["model"].isin(models)]
    if targets:
        runs = runs[runs["target"].isin(targets)]
    latest = runs.sort_values("start_time").drop_duplicates(["model", "target", "method", "seed"], keep="last")
    return latest.reset_index(drop=True), len(runs) - len(latest)


# ---------------------------------------------------------------- aggregation

def _seed_key(seed: str):
    return (0, int(seed), "") if str(seed).lstrip("-").isdigit() else (1, 0, str(seed))


def reductions(t: float, lat: float, t_base: float, lat_base: float) -> tuple[float, float, float]:
    """(search_red, latency_red, HV_vs_baseline) as fractions/HV; NaN where an input is missing."""
    search_red = 1.0 - t / t_base if t_base and not math.isnan(t_base) else math.nan
    latency_red = 1.0 - lat / lat_base if lat_base and not math.isnan(lat_base) else math.nan
    return search_red, latency_red, search_red * latency_red * 100.0


def aggregate(runs: pd.DataFrame, baseline: str = "autotvm", methods: list[str] | None = None
              ) -> tuple[pd.DataFrame, dict[tuple[str, str], list[str]]]:
    """The leaderboard rows (one per model, target, method) and notes per (model, target) group."""
    rows, notes = [], {}
    for (model, target), group in runs.groupby(["model", "target"], sort=True):
        base = group[group["method"] == baseline]
        t_base, lat_base = base["search_time_s"].mean(), base["e2e_latency_ms"].mean()
        group_notes = notes.setdefault((model, target), [])
        if group["hypervolume"].notna().any():
            pass  # FPGA group: no latency baseline; ADRS and hypervolume are absolute
        elif base.empty:
            group_notes.append(f"no FINISHED `{baseline}` run for this model and target: "
                               "search red., latency red. and HV are blank")
        elif math.isnan(lat_base):
            group_notes.append(f"the `{baseline}` runs have no e2e_latency_ms: latency red. and HV are blank")
        for method, m in group.groupby("method", sort=True):
            if methods and method not in methods:
                continue
            seeds = sorted(m["seed"], key=_seed_key)
            t, lat = m["search_time_s"].mean(), m["e2e_latency_ms"].mean()
            search_red, latency_red, hv = reductions(t, lat, t_base, lat_base)
            t_excl = m["search_time_excl_source_s"].mean()  # NaN unless a transfer method logged it
            search_red_x, _, hv_x = reductions(t_excl, lat, t_base, lat_base)
            n_e2e = int(m["e2e_latency_ms"].notna().sum())
            if 0 < n_e2e < len(m):
                group_notes.append(f"`{method}`: e2e latency from {n_e2e} of {len(m)} seeds")
            rows.append({
                "model": model, "target": target, "method": method, "is_baseline": method == baseline,
                "n_seeds": len(m), "seeds": ",".join(seeds),
                "search_time_s_mean": t, "search_time_s_std": m["search_time_s"].std(),
                "search_time_h_mean": t / 3600, "search_time_h_std": m["search_time_s"].std() / 3600,
                "n_measurements_mean": m["n_measurements"].mean(),
                "tasks_latency_ms_mean": m["tasks_latency_ms"].mean(),
                "e2e_latency_ms_mean": lat, "e2e_latency_ms_std": m["e2e_latency_ms"].std(), "n_e2e": n_e2e,
                "torch_latency_ms_mean": m["torch_latency_ms"].mean(),
                "tvm_default_latency_ms_mean": m["tvm_default_latency_ms"].mean(),
                "e2e_rel_err_max": m["e2e_rel_err"].max(),
                "search_red_pct": search_red * 100, "latency_red_pct": latency_red * 100,
                "hv_vs_baseline": hv, "search_excl_source_s_mean": t_excl,
                "search_red_excl_source_pct": search_red_x * 100, "hv_excl_source": hv_x, "baseline": baseline,
                "run_ids": ",".join(m["run_id"]),
                "adrs_mean": m["adrs"].mean(), "adrs_std": m["adrs"].std(),
                "hypervolume_mean": m["hypervolume"].mean(), "hypervolume_std": m["hypervolume"].std(),
                "tool_s_mean": m["tool_s"].mean(), "algorithm_s_mean": m["algorithm_s"].mean(),
                **lbs.method_stats(m, base, method == baseline),
            })
    table = pd.DataFrame(rows, columns=list(CSV_COLUMNS))
    if not table.empty:
        table["_order"] = ~table["is_baseline"]
        table["_lat"] = table["e2e_latency_ms_mean"].fillna(table["adrs_mean"]).fillna(math.inf)
        table = (table.sort_values(["model", "target", "_order", "_lat", "method"])
                 .drop(columns=["_order", "_lat"]).reset_index(drop=True))
    return table, notes


# ---------------------------------------------------------------- Markdown

def _pm(mean, std, digits: int) -> str:
    text = _num(mean, digits)
    return f"{text} ± {_num(std, digits)}" if text and _num(std, digits) else text


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def to_markdown(table: pd.DataFrame, notes: dict, header: list[str], plots: dict, machine: dict | None = None
                ) -> str:
    """The leaderboard as Markdown: one section per (model, target) with its machine line (``machine``),
    table, notes and plots (``plots``: {(model, target): [(caption, png file), ...]})."""
    parts = ["# tunebench leaderboard", "", *header, ""]
    if table.empty:
        return "\n".join(parts + ["No FINISHED runs match the filters.", ""])
    for (model, target), rows in table.groupby(["model", "target"], sort=False):
        baseline = rows["baseline"].iloc[0]
        parts += [f"## {model} on {target}", ""]
        if (machine or {}).get((model, target)):
            parts += [machine[(model, target)], ""]
        records = rows.to_dict("records")
        cols = FPGA_MD_COLUMNS if rows["hypervolume_mean"].notna().any() else MD_COLUMNS
        cols = [(h, fmt) for h, fmt in cols
                if h not in OPTIONAL_MD or any((OPTIONAL_MD[h] or fmt)(r) for r in records)]
        cells = [[fmt(r) for _, fmt in cols] for r in records]
        headers = [h.format(baseline=baseline) for h, _ in cols]
        parts += [md_table(headers, cells), ""]
        parts += [f"- {n}" for n in notes.get((model, target), [])]
        for caption, png in plots.get((model, target), []):
            parts += ["", f"![{caption}, {model} on {target}]({png})"]
        parts.append("")
    parts += ["Means over seeds ± sample std. search red. = 1 − T/T_base, latency red. = 1 − L/L_base with T, L "
              "the means over seeds of search_time_s and e2e_latency_ms; HV = search red. × latency red. × 100 "
              "(seed 001 Eq. 7; \"both worse\" marks a positive HV from two negative reductions). "
              "Σ task latency = Σ weight × best task latency. \"excl. source\" columns (transfer methods only): "
              "the same with search_time_excl_source_s, the search time without source-layer tuning and model "
              "pre-training (seed 001 reports search time this way when a history is given). FPGA groups: ADRS "
              "against the exhaustive table's true Pareto front and normalized hypervolume (reference point from "
              "the target config), both of the designs measured at the highest fidelity; tool = tool seconds "
              "charged, algorithm = search − tool.", "", lbs.FOOTNOTE, ""]
    return "\n".join(parts)


# ---------------------------------------------------------------- curves

def model_curve(records: list[dict], tasks: list[dict]) -> pd.DataFrame | None:
    """The run's model-level best-so-far curve (see the module docstring).

    Args:
        records: the run's record lines.
        tasks: the run's ``tasks.json`` (``id``, ``weight``, ``search_s``; may be empty).

    Returns:
        columns ``trials`` (cumulative; row 0 is the start, before any trial), ``seconds`` (cumulative
        search clock) and ``latency_ms``; None without records or when a task has no valid measurement.
    """
    by_task: dict[str, list[dict]] = {}
    for rec in records:
        by_task.setdefault(rec["task_id"], []).append(rec)
    if not by_task:
        return None
    info = {t["id"]: t for t in tasks}
    order = [tid for tid in info if tid in by_task] + [tid for tid in by_task if tid not in info]
    best, weight = {}, {}
    for tid in order:
        by_task[tid].sort(key=lambda r: r["trial"])
        first = next((r["latency_s"] for r in by_task[tid] if r.get("valid") and r.get("latency_s") is not None), None)
        if first is None:
            return None
        best[tid], weight[tid] = first, float(info.get(tid, {}).get("weight") or 1)
    total = sum(weight[t] * best[t] for t in order)
    rows, offset = [(0, 0.0, total * 1e3)], 0.0
    for tid in order:
        for rec in by_task[tid]:
            lat = rec.get("latency_s")
            if rec.get("valid") and lat is not None and lat < best[tid]:
                total += weight[tid] * (lat - best[tid])
                best[tid] = lat
            rows.append((len(rows), offset + float(rec.get("search_s") or 0.0), total * 1e3))
        final = info.get(tid, {}).get("search_s")
        offset += float(final) if final is not None else max(float(r.get("search_s") or 0.0) for r in by_task[tid])
    curve = pd.DataFrame(rows, columns=["trials", "seconds", "latency_ms"])
    curve["seconds"] = np.maximum.accumulate(curve["seconds"].to_numpy())
    return curve


def median_curve(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise median of step curves on the union of their x values; each curve holds its last value
    after its end and is left out before its start."""
    grid = np.unique(np.concatenate([np.asarray(x, float) for x, _ in curves]))
    values = np.full((len(curves), len(grid)), np.nan)
    for i, (x, y) in enumerate(curves):
        idx = np.searchsorted(np.asarray(x, float), grid, side="right") - 1
        ok = idx >= 0
        values[i, ok] = np.asarray(y, float)[idx[ok]]
    return grid, np.nanmedian(values, axis=0)


class RunFiles:
    """Reads a run's record file and ``tasks.json``: local files when on this machine, else artifacts."""

    def __init__(self, client, workdir: str):
        self.client, self.workdir = client, workdir

    def _local_or_artifact(self, run: dict, local: str | None, artifact: str) -> str | None:
        if local and os.path.isfile(local):
            return local
        dst = os.path.join(self.workdir, run["run_id"])
        os.makedirs(dst, exist_ok=True)
        try:
            return self.client.download_artifacts(run["run_id"], artifact, dst)
        except Exception:  # noqa: BLE001 - any store/IO failure means "not available"; the caller notes it
            return None

    def load(self, run: dict) -> tuple[list[dict], list[dict]] | None:
        record_file = run.get("record_file") or None
        path = self._local_or_artifact(run, record_file, "records.jsonl")
        if path is None:
            return None
        tasks_local = os.path.join(os.path.dirname(record_file), "tasks.json") if record_file else None
        tasks_path = self._local_or_artifact(run, tasks_local, "tasks.json")
        tasks = []
        if tasks_path:
            with open(tasks_path) as fh:
                tasks = json.load(fh)
        return read_records(path), tasks


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def plot_group(model: str, target: str, curves: dict[str, list[pd.DataFrame]], path: str) -> None:
    """One PNG: best-so-far model latency vs cumulative trials (left) and search time (right)."""
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
    fig.savefig(path, dpi=110)


def make_plots(client, runs: pd.DataFrame, methods, out: str, notes: dict) -> dict:
    """Plot every (model, target) group; returns {(model, target): [(caption, png file name), ...]}."""
    plots = {}
    with tempfile.TemporaryDirectory(prefix="tunebench-lb-") as tmp:
        files = RunFiles(client, tmp)
        for (model, target), group in runs.groupby(["model", "target"], sort=True):
            if group["hypervolume"].notna().any():
                continue  # FPGA groups: their curves are the MLflow ADRS / hypervolume histories
            plots[(model, target)] = _group_plots(model, target, group, files, methods, out,
                                                  notes.setdefault((model, target), []))
    return plots


def _group_plots(model, target, group: pd.DataFrame, files: RunFiles, methods, out: str, notes: list[str]
                 ) -> list[tuple[str, str]]:
    """The best-so-far and fraction-of-optimum PNGs of one group (rows: ``methods``, None: all; every
    method's records count towards the optima)."""
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
    made, stem = [], f"{_safe(model)}_{_safe(target)}.png"
    if curves:
        plot_group(model, target, curves, os.path.join(out, f"curves_{stem}"))
        made.append(("best-so-far curves", f"curves_{stem}"))
    shown = set(methods) if methods else None
    if any(shown is None or m in shown for m in records):
        noisy = write_optimum_plot(model, target, records, shown, os.path.join(out, f"optimum_{stem}"))
        made.append(("fraction of the optimum reached", f"optimum_{stem}"))
        if noisy:
            notes.append(f"fraction of optimum: the optimum of {len(noisy)} task(s) comes only from measurements "
                         f"marked noisy ({', '.join(noisy)})")
    return made


# ---------------------------------------------------------------- entry point

def _names(values: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated option values -> one list (None when not given)."""
    out = [v.strip() for value in values or [] for v in value.split(",") if v.strip()]
    return out or None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``leaderboard`` subcommand's options."""
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow tracking URI (default: sqlite:///./mlflow.db, as the harness)")
    parser.add_argument("--experiment", action="append", help="MLflow experiment name(s) (default: all)")
    parser.add_argument("--model", action="append", help="only these models (comma-separated or repeated)")
    parser.add_argument("--target", action="append", help="only these targets")
    parser.add_argument("--method", action="append", help="only these methods' rows (the baseline is still read)")
    parser.add_argument("--since", help="only runs started on or after this day (YYYY-MM-DD, 00:00 UTC)")
    parser.add_argument("--baseline", default="autotvm", help="method the reductions and HV compare against")
    parser.add_argument("--out", default="leaderboard", help="output folder (leaderboard.md, .csv, PNGs)")
    parser.add_argument("--no-plots", action="store_true", help="skip the best-so-far plots")


def run_leaderboard(args: argparse.Namespace) -> str:
    """Build the leaderboard; writes ``leaderboard.md``/``.csv`` (and PNGs) to ``args.out``; returns the
    Markdown. Bad input raises :class:`UserError`."""
    since = args.since
    parse_since(since)  # a bad date fails before the store is touched
    client = open_store(args.tracking_uri)
    models, targets, methods = _names(args.model), _names(args.target), _names(args.method)
    runs, n_dupes = select_runs(load_runs(client, _names(args.experiment), since), models, targets)
    table, notes = aggregate(runs, args.baseline, methods)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out={args.out}: cannot create the output folder ({exc.strerror})") from None
    plots = {} if args.no_plots or table.empty else make_plots(client, runs, methods, args.out, notes)
    filters = {"experiment": _names(args.experiment), "model": models, "target": targets, "method": methods,
               "since": since}
    shown = ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in filters.items() if v)
    header = [f"Tracking store: `{client.tracking_uri}`; filters: {shown or 'none'}; baseline: `{args.baseline}`; "
              f"{len(runs)} FINISHED run(s)."]
    if n_dupes:
        header.append(f"{n_dupes} older run(s) with the same (model, target, method, seed) set aside.")
    machine = {key: lbs.machine_line(group) for key, group in runs.groupby(["model", "target"])}
    markdown = to_markdown(table, notes, header, plots, machine)
    with open(os.path.join(args.out, "leaderboard.md"), "w") as fh:
        fh.write(markdown)
    csv = table.assign(note=["; ".join(notes.get((m, t), [])) for m, t in zip(table["model"], table["target"])])
    csv.to_csv(os.path.join(args.out, "leaderboard.csv"), index=False)
    return markdown
