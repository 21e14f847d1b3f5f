"""FlexTensor's comparison tables ([Zheng-ASPLOS20] Figs. 5-6, §6.5 layout) from ``model=ops`` runs.

Reads every ``<records_dir>/<run>/config.yaml`` + ``tasks.json`` of a ``model=ops`` run and the runs'
MLflow metrics (``--tracking-uri``, default the ``mlflow.db`` beside the records folder). A method is
named with its space: ``flextensor (flex)``, ``autotvm (packed)``, ``metaschedule``, ... and, when it ran
at several budgets, with each (``flextensor (flex), 192 trials``). A case that several runs of one method,
budget and seed tuned is taken from the newest run. Several records folders (sweeps from several clones or
machines, each with its ``mlflow.db`` beside it) are read together.

1. Per operator case and method, mean ± std over seeds: the best kernel's latency (ms, re-timed by the
   measurement protocol; ``*`` when a seed's best was noisy) and its speedup over PyTorch (FP32, same
   threads, interleaved: the e2e step's ``<task id>.speedup_vs_torch``; ``*`` when that timing was noisy),
   the size of the method's schedule space (none for methods with their own: metaschedule, gat), and its
   speed relative to ``--baseline`` (the baseline's mean latency over the method's).
2. Per operator and method: the geometric mean over the operator's cases of the speedup over PyTorch
   (the paper's Fig. 5 layout; ``*`` when a case's timing was noisy, and the geomean of the cases with
   no noisy timing beside it), and of the latency ratio to ``--baseline`` (default ``autotvm (packed)``:
   the paper's 2.21x over AutoTVM, §6.5) where the baseline ran the same cases.

``--csv PATH`` also writes every seed's row (the values behind both tables); such a file may be given in
place of a records folder, so sweeps run on several machines or days are tabled together from their CSVs.

    python benchmarks/flextensor_table.py records|rows.csv [records|rows.csv ...] [--baseline "autotvm (packed)"]
        [--tracking-uri URI] [--csv PATH]
"""

from __future__ import annotations

import csv
import glob
import json
import math
import os
import sys
from collections import defaultdict

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import records_args, usage_error

from tunebench.methods import METHODS
from tunebench.protocol.stats import geomean

PAPER = ("[Zheng-ASPLOS20]: 2D convolution (the 15 YOLO-v1 layers) 1.72x over MKL-DNN through PyTorch on a Xeon "
         "E5-2699 v4 (Fig. 6b); 1.83x over cuDNN on a V100 across the 12 operators (Fig. 5); 2.21x over AutoTVM "
         "on 7 operators on a V100 (§6.5); end to end 1.07x (YOLO-v1) and 1.39x (OverFeat) over AutoTVM (§6.6).")


def method_name(cfg: dict) -> str:
    m = cfg["method"]["name"]
    if METHODS[m].needs.compiles:  # metaschedule, gat: their own schedules, no template
        return m
    name = m + ("-p" if m == "flextensor" and cfg["method"].get("policy") == "p" else "")
    return f"{name} ({cfg['target'].get('template') or 'default'})"


def load(*paths: str) -> list[dict]:
    """One row per (method, trials per task, seed, operator case) over all ``paths``: records folders
    (run, its folder, latency, noisy, space size) or CSV files that ``--csv`` wrote (every column, the
    speedups included). A case that several runs of one method, budget and seed tuned is taken from the
    newest (its ``tasks.json``, or the CSV file, written last). A method run at several budgets is named
    with each (``flextensor (flex), 192 trials``), never averaged across them."""
    rows = {}
    for path in paths:
        found = _csv_rows(path) if path.endswith(".csv") else \
            [row for cfg in sorted(glob.glob(os.path.join(path, "*", "config.yaml"))) for row in _run_rows(path, cfg)]
        for row in found:
            key = (row["method"], row["trials"], row["seed"], row["op"], row["case"])
            if key not in rows or rows[key]["written"] < row["written"]:
                rows[key] = row
    budgets = defaultdict(set)
    for method, trials, *_ in rows:
        budgets[method].add(trials)
    for row in rows.values():
        row["base"] = row["method"]
        if len(budgets[row["method"]]) > 1:
            row["method"] += f", {row['trials']} trials"
    return list(rows.values())


def _csv_rows(path: str) -> list[dict]:
    """The rows of a CSV file that ``--csv`` wrote, typed as :func:`load` makes them."""
    def number(text: str, kind=float):
        return kind(float(text)) if text not in ("", "None") else (None if kind is int else np.nan)

    with open(path, newline="") as fh:
        return [{"run": r["run"], "dir": None, "method": r["method"], "trials": number(r["trials"], int),
                 "seed": number(r["seed"], int), "op": r["op"], "case": int(r["case"]), "id": None,
                 "latency_ms": number(r["latency_ms"]), "noisy": r["noisy"] == "True", "speedup": number(r["speedup"]),
                 "speedup_noisy": r["speedup_noisy"] == "True", "space_size": number(r["space_size"], int),
                 "written": os.path.getmtime(path)} for r in csv.DictReader(fh)]


def _run_rows(records_dir: str, cfg_path: str) -> list[dict]:
    """The rows of one finished ``model=ops`` run (none for another model or an unfinished run)."""
    tasks_path = os.path.join(os.path.dirname(cfg_path), "tasks.json")
    with open(cfg_path) as fh:
        cfg = yaml.safe_load(fh)
    if cfg["model"]["name"] != "ops" or not os.path.exists(tasks_path):
        return []
    own_schedules = METHODS[cfg["method"]["name"]].needs.compiles  # the task's template space is not theirs
    run = {"run": os.path.basename(os.path.dirname(cfg_path)), "dir": records_dir, "method": method_name(cfg),
           "trials": (cfg.get("budget") or {}).get("trials_per_task"), "seed": cfg["seed"],
           "written": os.path.getmtime(tasks_path)}
    with open(tasks_path) as fh:
        return [{**run, "op": t["shape"]["op"], "case": t["shape"]["case"], "id": t["id"],
                 "latency_ms": t.get("best_latency_ms") or np.nan, "noisy": bool(t.get("best_noisy")),
                 "space_size": None if own_schedules else t.get("space_size")} for t in json.load(fh)]


def add_speedups(rows: list[dict], uris: dict[str, str | None]) -> None:
    """Each row's ``speedup`` over PyTorch and whether its timing was noisy, from the run's metrics in the
    MLflow store of its records folder (``uris``: folder -> tracking URI, None for no store)."""
    clients: dict[str, object] = {}
    cache: dict[str, dict] = {}
    for r in rows:
        if "speedup" in r:  # read from a CSV file
            continue
        uri = uris.get(r.get("dir"))
        if uri and r["run"] not in cache:
            if uri not in clients:
                from mlflow.tracking import MlflowClient

                clients[uri] = MlflowClient(uri)
            try:
                cache[r["run"]] = clients[uri].get_run(r["run"]).data.metrics
            except Exception:
                cache[r["run"]] = {}
        m = cache.get(r["run"], {})
        r["speedup"] = m.get(f"{r['id']}.speedup_vs_torch", np.nan)
        r["speedup_noisy"] = bool(m.get(f"{r['id']}.e2e_noisy", 0.0) or m.get(f"{r['id']}.torch_noisy", 0.0))


def _cell(values, fmt: str, star: bool) -> str:
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    if not len(v):
        return "–"
    text = f"{v.mean():{fmt}} ± {v.std():{fmt}}" if len(v) > 1 else f"{v[0]:{fmt}}"
    return text + ("*" if star else "")


def _size(values) -> str:
    """The schedule space's size (the method's own space: none for metaschedule and gat)."""
    sizes = {v for v in values if v}
    return "–" if not sizes else "/".join(f"{v:.1e}" if v >= 1e5 else str(v) for v in sorted(sizes))


def case_table(rows: list[dict], baseline: str) -> str:
    """Per case and method: space size, seeds, best latency and speedup over PyTorch (mean ± std over
    seeds), and the speed relative to ``baseline`` (its mean latency / the method's)."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(r["op"], r["case"])][r["method"]].append(r)
    lines = ["| operator | case | method | space size | seeds | best latency (ms) | speedup vs PyTorch | "
             f"speed vs {baseline} |", "|---" * 8 + "|"]
    for (op, case), by_method in sorted(groups.items()):
        base = by_method.get(baseline, [])
        for name, rs in sorted(by_method.items()):
            ratio = _mean(b["latency_ms"] for b in base) / _mean(r["latency_ms"] for r in rs) if base else math.nan
            lines.append(f"| {op} | {case} | {name} | {_size(r['space_size'] for r in rs)} | {len(rs)} | "
                         f"{_cell([r['latency_ms'] for r in rs], '.4f', any(r['noisy'] for r in rs))} | "
                         f"{_cell([r['speedup'] for r in rs], '.2f', any(r['speedup_noisy'] for r in rs))} | "
                         f"{_ratio_cell(ratio, any(r['noisy'] for r in rs + base))} |")
    return "\n".join(lines)


CSV_COLUMNS = ("method", "trials", "seed", "op", "case", "latency_ms", "noisy", "speedup", "speedup_noisy",
               "space_size", "run")


def write_csv(rows: list[dict], path: str) -> None:
    """Every (method, budget, seed, case) row, sorted, to ``path`` (written whole, then renamed)."""
    rows = sorted(rows, key=lambda r: (r["op"], r["case"], r["base"], r["trials"] or 0, r["seed"]))
    with open(path + ".tmp", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        w.writerows([[r["base" if c == "method" else c] for c in CSV_COLUMNS] for r in rows])  # no budget in the name
    os.replace(path + ".tmp", path)


def _mean(values) -> float:
    v = [x for x in values if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def _geomean(values) -> float:
    """The geometric mean of the finite values (NaN when there are none)."""
    return geomean([x for x in values if math.isfinite(x)])


def _ratio_cell(value: float, noisy: bool) -> str:
    return f"{value:.2f}x" + ("*" if noisy else "") if math.isfinite(value) else "–"


def operator_table(rows: list[dict], baseline: str) -> str:
    """Per operator and method: geomean over cases of the mean speedup over PyTorch and over ``baseline``;
    ``*`` when a value in it was noisy, and the geomean over the cases with no noisy value beside it."""
    mean: dict[tuple, dict] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        mean[(r["op"], r["method"])][r["case"]].append(r)
    lines = [f"| operator | method | cases | speedup vs PyTorch (geomean) | of the clean cases | "
             f"speedup vs {baseline} (geomean) |", "|---" * 6 + "|"]
    for (op, name), cases in sorted(mean.items()):
        base = mean.get((op, baseline), {})
        speed = {c: _mean(r["speedup"] for r in rs) for c, rs in cases.items()}
        noisy = {c for c, rs in cases.items() if any(r["speedup_noisy"] for r in rs)}
        clean = [v for c, v in speed.items() if c not in noisy and math.isfinite(v)]
        ratio = _geomean(_mean(b["latency_ms"] for b in base[c]) / _mean(r["latency_ms"] for r in rs)
                         for c, rs in cases.items() if c in base)
        ratio_noisy = any(x["noisy"] for c, rs in cases.items() if c in base for x in rs + base[c])
        lines.append(f"| {op} | {name} | {len(cases)} | {_ratio_cell(_geomean(speed.values()), bool(noisy))} | "
                     f"{_ratio_cell(_geomean(clean), False)} ({len(clean)} of {len(cases)}) | "
                     f"{_ratio_cell(ratio, ratio_noisy)} |")
    return "\n".join(lines)


def main() -> None:
    a = records_args(__doc__, "autotvm (packed)", "method", csv="every seed's row (method, trials, seed, case, "
                     "latency, noisy, speedup, ...)")
    if a.csv and not os.path.isdir(os.path.dirname(os.path.abspath(a.csv))):
        usage_error(f"--csv {a.csv!r}: its folder does not exist")
    rows = load(*a.records_dirs)
    if not rows:
        usage_error(f"{' '.join(a.records_dirs)}: no finished model=ops run records (<run>/config.yaml + tasks.json)")
    methods = sorted({r["method"] for r in rows})
    if a.baseline not in methods:
        usage_error(f"--baseline {a.baseline!r} is not a method of these runs; valid: {', '.join(methods)}")
    add_speedups(rows, dict(zip(a.records_dirs, a.tracking_uris)))
    print(case_table(rows, a.baseline) + "\n\n" + operator_table(rows, a.baseline))
    if a.csv:
        write_csv(rows, a.csv)
    print(f"\n`*`: a seed's value was noisy. Paper: {PAPER}")


if __name__ == "__main__":
    main()
