"""Reading the tracking store: FINISHED MLflow runs into a frame, and each run's files.

:func:`open_store` checks the store before MLflow touches it (the leaderboard only reads, so it never
creates one); :func:`load_runs` gives one row per FINISHED run with its tags and the run metrics
the tables use; :func:`select_runs` applies the model/target filters and keeps the latest run per
(model, target, method, seed); :class:`RunFiles` reads a run's record file and ``tasks.json``
through :mod:`tunebench.run_lookup` (beside the tagged record file when it lies in a trusted records
folder, else the run's artifacts).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import math
import os
import re

import pandas as pd

from tunebench.errors import UserError
from tunebench.harness.measurement import UNCHECKED_TAG
from tunebench.harness.tracking.tracker import check_reachable, resolve_uri
from tunebench.protocol.noise import NOISE_E2E_TAG, NOISE_TASKS_TAG
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG, RECORDS, run_file, within

log = logging.getLogger(__name__)

#: speedup metric -> prefix of its reference latency (``<prefix>_latency_ms``, ``<prefix>_noisy``)
SPEEDUPS = {"speedup_vs_torch": "torch", "speedup_vs_torch_compile": "torch_compile",
            "speedup_vs_torch_tf32": "torch_tf32", "speedup_vs_onnxruntime": "onnxruntime"}
#: timings the harness may mark noisy (run metric ``<source>_noisy``)
NOISE_SOURCES = ("e2e", "torch", "torch_compile", "torch_tf32", "onnxruntime", "tvm_default")
#: run metrics of the measurement protocol (intervals, noise flags, peak)
PROTOCOL_METRICS = (*(f"{s}_noisy" for s in NOISE_SOURCES), "torch_compile_latency_ms", "torch_tf32_latency_ms",
                    "onnxruntime_latency_ms",
                    *(f"{k}{end}" for k in SPEEDUPS for end in ("", "_ci_low", "_ci_high", "_noisy")),
                    "n_noisy_tasks", "n_noisy_measurements", "calib_max_slowdown", "calib_host_slowdown", "lock_wait_s",
                    "peak_gflops", "peak_mem_gbps", "tasks_gflops", "pct_peak")
#: run metrics of graph schedules (target=memory: MemoryTarget.run_metrics)
MEMORY_METRICS = ("peak_bytes", "arena_bytes", "program_peak_bytes", "program_arena_bytes", "peak_reduction_geomean",
                  "offchip_bytes", "program_offchip_bytes", "offchip_reduction", "measured_peak_bytes", "schedule_s",
                  "nodes_before", "nodes_after", "edges_before", "edges_after")
#: run metrics of accelerator mappings (target=accel: AccelTarget.run_metrics)
ACCEL_METRICS = ("energy_pj_per_mac", "energy_uj", "model_latency_ms", "edp_js")
RUN_METRICS = ("search_time_s", "search_time_excl_source_s", "n_measurements", "n_invalid", "n_static_invalid",
               "static_invalid_fraction", "n_tasks",
               "tasks_latency_ms", "wall_s",
               "e2e_latency_ms", "e2e_latency_std_ms", "torch_latency_ms", "torch_latency_std_ms",
               "tvm_default_latency_ms", "tvm_default_latency_std_ms", "e2e_rel_err",
               "adrs", "hypervolume", "tool_s", "algorithm_s", *PROTOCOL_METRICS, *MEMORY_METRICS, *ACCEL_METRICS)
#: run tags read into columns of the same name
RUN_TAGS = ("precision", "threads", "device")
#: run tags read into columns of their own: column -> tag
EXTRA_TAGS = {"unchecked_tasks": UNCHECKED_TAG, "noise_tasks": NOISE_TASKS_TAG, "noise_e2e": NOISE_E2E_TAG}
COLUMNS = ["run_id", "experiment", "method", "model", "target", "seed", "start_time", "record_file",
           *RUN_TAGS, *EXTRA_TAGS, *RUN_METRICS]


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
    except Exception as exc:
        raise UserError(f"--tracking-uri={uri}: cannot read the tracking store ({first_line(exc)})") from None
    return client


def first_line(exc: Exception) -> str:
    """The first line of an exception's message (its type name when the message is empty)."""
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
    """{experiment id: name} of the named experiments (None: all); an unknown name is a UserError."""
    exps = {e.experiment_id: e.name for e in _all_pages(lambda tok: client.search_experiments(page_token=tok))}
    if not names:
        return exps
    by_name = {name: eid for eid, name in exps.items()}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UserError(f"--experiment={unknown[0]!r} is unknown; valid: {', '.join(sorted(by_name)) or '(none)'}")
    return {by_name[n]: n for n in names}


def _all_pages(fetch) -> list:
    """Every item of a paged MLflow search (``fetch(page_token)`` returns one page)."""
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
        day = dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=dt.UTC)
    except ValueError:
        raise UserError(f"--since={text!r}: expected a date YYYY-MM-DD") from None
    return int(day.timestamp() * 1000)


def _run_row(run, experiment: str) -> dict:
    tags, metrics = run.data.tags, run.data.metrics
    return {"run_id": run.info.run_id, "experiment": experiment,
            "method": tags.get("method", "?"), "model": tags.get("model", "?"),
            "target": tags.get("target", "?"), "seed": tags.get("seed", "?"),
            "start_time": run.info.start_time, "record_file": tags.get(RECORD_TAG),
            **{t: tags.get(t) for t in RUN_TAGS}, **{c: tags.get(t) for c, t in EXTRA_TAGS.items()},
            **{m: metrics.get(m, math.nan) for m in RUN_METRICS}}


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
        raise UserError(f"tracking store {client.tracking_uri}: {first_line(exc)}") from None
    rows = [_run_row(run, exps[run.info.experiment_id]) for run in runs]
    return pd.DataFrame(rows, columns=COLUMNS)


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


def records_roots(tracking_uri: str, extra=()) -> list[str]:
    """The folders whose record files the leaderboard reads where a run's tag says, as ``resume=`` does:
    ``records/`` of the work dir an embedded store lives in (``sqlite:///<workdir>/mlflow.db``; any other
    store: of the current folder), and the folders named with ``--records-dir``."""
    uri = resolve_uri(tracking_uri, os.getcwd())
    base = os.path.dirname(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else os.getcwd()
    return [os.path.join(base, "records"), *(os.path.abspath(p) for p in extra or ())]


class RunFiles:
    """A run's files through :func:`tunebench.run_lookup.run_file`: beside its tagged record file when
    that lies under one of the ``trusted`` folders (None: :func:`records_roots` of the client's store),
    else its artifacts, downloaded into ``<cache_dir>/<run id>/``. A tag pointing elsewhere (a shared
    store's runs may name any file) is not followed: one warning line per run."""

    def __init__(self, client, cache_dir: str, trusted: list[str] | None = None):
        self.client, self.cache_dir = client, cache_dir
        self.trusted = records_roots(client.tracking_uri) if trusted is None else list(trusted)
        self._warned: set[str] = set()

    def folder(self, run: dict) -> str | None:
        """The run's folder on this machine (its tagged record file's), when under a trusted folder."""
        tag = run.get("record_file") or ""
        real = within(tag, self.trusted) if tag else None
        if tag and real is None and run["run_id"] not in self._warned:
            self._warned.add(run["run_id"])
            log.warning(
                "run %s: its record file %s is not under %s; its artifacts are read instead (--records-dir "
                "<folder> trusts a folder)", run["run_id"], tag, " or ".join(self.trusted))
        return os.path.dirname(real) if real else None

    def path(self, run: dict, name: str) -> str | None:
        """The local path of the run's file ``name`` (``records.jsonl``, ``tasks.json``, ...); None
        when it cannot be had. ``run``: a row of :func:`load_runs`."""
        folder = self.folder(run)
        return run_file(self.client, run["run_id"], name, self.cache_dir,
                        record_file=os.path.join(folder, RECORDS) if folder else "")

    def load(self, run: dict) -> tuple[list[dict], list[dict]] | None:
        """The run's record lines and ``tasks.json`` (empty when missing); None without records."""
        path = self.path(run, RECORDS)
        if path is None:
            return None
        tasks_path = self.path(run, "tasks.json")
        tasks = []
        if tasks_path:
            with open(tasks_path) as fh:
                tasks = json.load(fh)
        return read_records(path), tasks
