"""CHAMELEON's comparison tables ([Ahn-PhD] Tables 2.8-2.9, Figs. 2.7-2.8 layout) from run records.

Reads every ``<records_dir>/<run>/config.yaml`` + ``tasks.json`` and prints, per task and variant
(``autotvm``, and ``chameleon`` by ``explorer+sampling``: ``sa+greedy`` is AutoTVM, ``rl+adaptive`` is
CHAMELEON), mean ± std over seeds of:

- the hardware measurements (trials),
- the optimization time (the task's search clock, seconds: model training, exploration, builds and
  measurements; waiting for another run's device lock excluded),
- the best latency (ms, re-timed by the measurement protocol; ``*`` when a seed's best was noisy),

and each variant's ratios to the baseline variant (``--baseline``, default ``sa+greedy``): fewer
measurements and shorter optimization time as baseline / variant (the thesis's "x faster"), latency
as variant / baseline (below 1: faster code).

Then, per whole model (the thesis's Tables 2.8-2.9 layout): per variant the measurements and the
optimization time summed over the model's tasks, and the tuned model's end-to-end latency (median of
the e2e rounds, from the runs' MLflow metrics in ``--tracking-uri``, default the ``mlflow.db`` beside
each records folder; ``*`` when noisy), mean ± std over seeds, with the same ratios. Several records
folders (sweeps from several clones or machines) are read together.

    python benchmarks/chameleon_table.py records [records ...] [--baseline sa+greedy] [--tracking-uri URI]
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections import defaultdict

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import records_args, usage_error
from _layers import label

PAPER = ("[Ahn-PhD] Table 2.8 (optimization time, AutoTVM / CHAMELEON): AlexNet 4.31 h / 1.20 h (3.59x), VGG-16 "
         "11.18 h / 1.95 h (5.73x), ResNet-18 9.13 h / 2.13 h (4.28x); Table 2.9 (output latency, CHAMELEON / "
         "AutoTVM): 0.941, 0.966, 0.958; §2.5.2: adaptive sampling cuts measurements 1.98x with SA, 2.33x with RL.")


def variant(cfg: dict) -> str:
    m = cfg["method"]
    return f"{m['explorer']}+{m['sampling']}" if m["name"] == "chameleon" else m["name"]


def load(records_dir: str) -> list[dict]:
    """One row per (run, task): variant, seed, model, task, weight, trials, search_s, latency, noisy."""
    rows = []
    for cfg_path in sorted(glob.glob(os.path.join(records_dir, "*", "config.yaml"))):
        tasks_path = os.path.join(os.path.dirname(cfg_path), "tasks.json")
        if not os.path.exists(tasks_path):
            continue  # a run that did not finish its first task
        with open(cfg_path) as fh:
            cfg = yaml.safe_load(fh)
        with open(tasks_path) as fh:
            tasks = json.load(fh)
        for t in tasks:
            rows.append({"run": os.path.basename(os.path.dirname(cfg_path)), "variant": variant(cfg),
                         "seed": cfg["seed"], "model": cfg["model"]["name"],
                         "task": _task_label(t), "weight": t.get("weight", 1), "trials": t["trials"],
                         "search_s": t["search_s"], "latency_ms": t.get("best_latency_ms") or np.nan,
                         "noisy": bool(t.get("best_noisy"))})
    return rows


def _task_label(t: dict) -> str:
    try:
        return label(t["shape"])
    except (KeyError, TypeError):
        return t["name"]


def _cell(values: list[float], fmt: str) -> str:
    v = np.asarray(values, dtype=float)
    return f"{v.mean():{fmt}} ± {v.std():{fmt}}" if len(v) > 1 else f"{v.mean():{fmt}}"


def _ratio_cells(rs: list[dict], base: list[dict] | None, latency: str) -> list[str]:
    """Mean measurements and optimization time as base / variant, mean ``latency`` as variant / base."""
    if not base:
        return ["", "", ""]
    mean = {k: (np.mean([r[k] for r in rs]), np.mean([r[k] for r in base])) for k in ("trials", "search_s", latency)}
    return [f"{mean['trials'][1] / mean['trials'][0]:.2f}x", f"{mean['search_s'][1] / mean['search_s'][0]:.2f}x",
            f"{mean[latency][0] / mean[latency][1]:.3f}"]


def table(rows: list[dict], baseline: str) -> str:
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(r["model"], r["task"])][r["variant"]].append(r)
    lines = ["| model | task | variant | seeds | measurements | optimization time (s) | best latency (ms) | "
             "measurements: base/variant | time: base/variant | latency: variant/base |", "|---" * 10 + "|"]
    for (model, task), by_variant in sorted(groups.items()):
        base = by_variant.get(baseline)
        for name, rs in sorted(by_variant.items()):
            star = "*" if any(r["noisy"] for r in rs) else ""
            ratios = _ratio_cells(rs, base, "latency_ms")
            lines.append(f"| {model} | {task} | {name} | {len(rs)} | {_cell([r['trials'] for r in rs], '.0f')} | "
                         f"{_cell([r['search_s'] for r in rs], '.1f')} | "
                         f"{_cell([r['latency_ms'] for r in rs], '.4f')}{star} | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def e2e_metrics(uri: str | None, run_ids: set[str]) -> dict[str, dict]:
    """run id -> its ``e2e_latency_ms`` and ``e2e_noisy`` (runs without them, or no store: absent)."""
    if not uri:
        return {}
    from mlflow.tracking import MlflowClient

    client, out = MlflowClient(uri), {}
    for rid in run_ids:
        try:
            m = client.get_run(rid).data.metrics
        except Exception:
            continue
        if "e2e_latency_ms" in m:
            out[rid] = {"e2e_ms": m["e2e_latency_ms"], "e2e_noisy": bool(m.get("e2e_noisy", 0.0))}
    return out


def model_table(rows: list[dict], e2e: dict[str, dict], baseline: str) -> str:
    """Per model and variant: measurements and optimization time summed over the tasks, e2e latency."""
    runs: dict[tuple, dict] = {}
    for r in rows:
        run = runs.setdefault((r["model"], r["variant"], r["run"]), {"trials": 0, "search_s": 0.0, **e2e.get(
            r["run"], {"e2e_ms": np.nan, "e2e_noisy": False})})
        run["trials"] += r["trials"]
        run["search_s"] += r["search_s"]
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for (model, name, _), run in runs.items():
        groups[model][name].append(run)
    lines = ["| model | variant | seeds | measurements | optimization time (s) | e2e latency (ms) | "
             "measurements: base/variant | time: base/variant | e2e latency: variant/base |", "|---" * 9 + "|"]
    for model, by_variant in sorted(groups.items()):
        base = by_variant.get(baseline)
        for name, rs in sorted(by_variant.items()):
            ratios = _ratio_cells(rs, base, "e2e_ms")
            star = "*" if any(r["e2e_noisy"] for r in rs) else ""
            lines.append(f"| {model} | {name} | {len(rs)} | {_cell([r['trials'] for r in rs], '.0f')} | "
                         f"{_cell([r['search_s'] for r in rs], '.1f')} | {_cell([r['e2e_ms'] for r in rs], '.3f')}{star} | "
                         + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main() -> None:
    a = records_args(__doc__, "sa+greedy", "variant")
    rows, e2e = [], {}
    for records_dir, uri in zip(a.records_dirs, a.tracking_uris):
        rows_here = load(records_dir)
        rows += rows_here
        e2e.update(e2e_metrics(uri, {r["run"] for r in rows_here}))
    if not rows:
        usage_error(f"{' '.join(a.records_dirs)}: no finished run records (<run>/config.yaml + tasks.json)")
    print(table(rows, a.baseline))
    print("\n" + model_table(rows, e2e, a.baseline))
    print(f"\n`*`: a seed's best latency was noisy. Paper: {PAPER}")


if __name__ == "__main__":
    main()
