"""Leave-one-variant-out table of method=glimpse against the baselines ([Ahn-PhD] §4.5 layout), from the run
folders of a work dir: per layer and method, over seeds, the invalid configs, the trials to reach AutoTVM's
final best (the median over seeds of autotvm's best GFLOPS at its last trial), the proposals the target's
static check rejected before a trial (on cuda: over the GPU's limits), the best GFLOPS after 8 trials
(glimpse's initial samples, chosen by its prior alone) and after 64 (equal trials; a method that measured
fewer: at its last), the final kernel's latency
(the re-timed best) and the search time (the task's search clock: model work, compiles and measurements).

    python benchmarks/glimpse_table.py WORKDIR [--experiment glimpse-eval] [--reference-experiment E] [--out F]

A method's label is its name, plus ``-constant`` for glimpse with ``method.blueprint=constant``, ``-ei`` with
``method.use_acquisition=false`` and ``-random-candidates`` with ``method.random_candidates`` above 0. The ablation pairs (glimpse and glimpse-constant, with either acquisition)
get a second table: per seed, the Blueprint run's best GFLOPS over the constant one's after 8, 16, 32 and 64
trials (for runs interleaved seed by seed: ``glimpse_loo.sh``'s ablation stage). Trials to
reach are counted at the first trial whose best-so-far GFLOPS is at least the reference (``exact``) and at
least 98 % of it (``within 2 %``, about the timing spread of one config here); a run that never reaches it
counts as not reached (shown as ``>n``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_info, write_json

from tunebench.harness.run_folder import read_tasks_json
from tunebench.record_file import read_records
from tunebench.targets.base import STATIC_INVALID

EARLY = 8  # glimpse's init_samples: the trials its prior alone chooses
PAIRED_AT = (8, 16, 32, 64)


def _label(method: dict) -> str:
    return (method["name"] + ("-constant" if method.get("blueprint") == "constant" else "")
            + ("-ei" if method.get("use_acquisition") is False else "")
            + ("-random-candidates" if method.get("random_candidates") else ""))


def _runs(workdir: str, experiment: str | None, reference: str | None = None) -> list[dict]:
    """The run folders of ``experiment``, and autotvm's of ``reference`` (default: the same experiment)."""
    reference = reference or experiment
    out = []
    root = os.path.join(workdir, "records")
    for run_id in sorted(os.listdir(root)):
        folder = os.path.join(root, run_id)
        tasks = list(read_tasks_json(folder).values())
        try:
            with open(os.path.join(folder, "config.yaml")) as fh:
                cfg = yaml.safe_load(fh)
        except OSError:
            continue
        label = _label(cfg["method"])
        if not tasks or (experiment and cfg.get("experiment") != (reference if label == "autotvm" else experiment)):
            continue
        recs = read_records(os.path.join(folder, "records.jsonl"))
        variant = f"{cfg['target'].get('mcpu')}/{cfg['target'].get('num_cores')}t"
        out.append({"run": run_id, "label": label, "seed": cfg.get("seed"), "variant": variant, "tasks": tasks,
                    "records": recs})
    return out


def _curve(recs: list[dict]) -> list[float]:
    best, out = 0.0, []
    for r in sorted(recs, key=lambda r: r["trial"]):
        best = max(best, float(r.get("gflops") or 0.0) if r.get("valid") else 0.0)
        out.append(best)
    return out


def _rejected(task: dict, recs: list[dict]) -> int:
    """Proposals the target's static check rejected without a trial (on cuda: configs over the GPU's limits,
    screened before a build), i.e. the task's ``static_invalid`` less those that did cost a trial."""
    with_trial = sum(1 for r in recs if str(r.get("error") or "").startswith(STATIC_INVALID))
    return max(0, int(task.get("static_invalid") or 0) - with_trial)


def _reach(curve: list[float], ref: float) -> int | None:
    return next((i + 1 for i, g in enumerate(curve) if g >= ref), None)


def layer_label(shape: dict | None) -> str:
    """A conv layer as the tables name it: ``64→64 56² k3``."""
    s = shape or {}
    return f"{s.get('in_channels')}→{s.get('out_channels')} {s.get('height')}² k{s.get('kernel')}"


def table(runs: list[dict]) -> dict:
    """Per layer (its shape; a task without one: its name. A task's name is no key: a run of one layer names
    it as the first of a model, a run of three by its place): per label: lists over seeds in seed order,
    whatever the order of the run folders (see the module docstring)."""
    cells: dict[str, dict[str, list[dict]]] = {}
    for run in sorted(runs, key=lambda r: (r["seed"] is None, r["seed"] or 0, r["run"])):
        for t in run["tasks"]:
            recs = [r for r in run["records"] if r["task_id"] == t["id"]]
            key = layer_label(t["shape"]) if t.get("shape") else t["name"]
            cells.setdefault(key, {}).setdefault(run["label"], []).append(
                {"seed": run["seed"], "curve": _curve(recs), "invalid": sum(not r["valid"] for r in recs),
                 "trials": len(recs), "best_ms": t.get("best_latency_ms"), "noisy": t.get("best_noisy"),
                 "search_s": t.get("search_s"), "shape": t.get("shape"), "variant": run["variant"],
                 "rejected": _rejected(t, recs)})
    out = {}
    for name, by_label in cells.items():
        ref_runs = by_label.get("autotvm", [])
        ref = statistics.median(r["curve"][-1] for r in ref_runs) if ref_runs else None
        out[name] = {"reference_gflops": ref, "shape": next(iter(by_label.values()))[0]["shape"], "methods": {}}
        for label, rs in by_label.items():
            entry = {"seeds": [r["seed"] for r in rs], "trials": [r["trials"] for r in rs],
                     "invalid": [r["invalid"] for r in rs], "rejected": [r["rejected"] for r in rs],
                     "best_ms": [r["best_ms"] for r in rs],
                     "noisy": [r["noisy"] for r in rs], "search_s": [r["search_s"] for r in rs],
                     "best_gflops": [r["curve"][-1] if r["curve"] else 0.0 for r in rs]}
            at = {n: [r["curve"][min(n, len(r["curve"])) - 1] if r["curve"] else 0.0 for r in rs]
                  for n in sorted({EARLY, 64, *PAIRED_AT})}
            entry[f"gflops_at_{EARLY}"], entry["gflops_at_64"] = at[EARLY], at[64]
            entry["curve_at"] = {str(n): v for n, v in at.items()}
            if ref:
                entry["reach_exact"] = [_reach(r["curve"], ref) for r in rs]
                entry["reach_2pct"] = [_reach(r["curve"], 0.98 * ref) for r in rs]
            out[name]["methods"][label] = entry
    return out


def paired(tab: dict) -> dict:
    """Per layer and ablation pair (``glimpse`` / ``glimpse-constant``, ``glimpse-ei`` / ``glimpse-constant-ei``),
    over the seeds both ran: the ratio of the Blueprint run's best GFLOPS to the constant one's after each of
    :data:`PAIRED_AT` trials (a run that measured fewer: at its last)."""
    out = {}
    for name, cell in tab.items():
        for spec, const in (("glimpse", "glimpse-constant"), ("glimpse-ei", "glimpse-constant-ei")):
            a, b = cell["methods"].get(spec), cell["methods"].get(const)
            if not a or not b:
                continue
            seeds = [x for x in a["seeds"] if x in b["seeds"]]
            ratios = {}
            for n in PAIRED_AT:
                ga = dict(zip(a["seeds"], a["curve_at"][str(n)]))
                gb = dict(zip(b["seeds"], b["curve_at"][str(n)]))
                ratios[str(n)] = [ga[x] / gb[x] if gb[x] else None for x in seeds]
            out.setdefault(name, {})[spec] = {"against": const, "seeds": seeds, "ratio": ratios}
    return out


def paired_markdown(tab: dict, pairs: dict) -> str:
    lines = ["| layer | pair | seeds | " + " | ".join(f"Blueprint / constant at {n} trials" for n in PAIRED_AT) + " |",
             "|---" * (3 + len(PAIRED_AT)) + "|"]
    for name, by_pair in pairs.items():
        for spec, p in sorted(by_pair.items()):
            cells = []
            for n in PAIRED_AT:
                r = [v for v in p["ratio"][str(n)] if v is not None]
                ahead = sum(v > 1 for v in r)
                cells.append(f"{', '.join(f'{v:.2f}' for v in r)} (ahead {ahead}/{len(r)})")
            lines.append(f"| {layer_label(tab[name]['shape'])} | {spec} / {p['against']} | "
                         f"{', '.join(map(str, p['seeds']))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(vals: list) -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "—"
    return f"{statistics.mean(vals):.3f} ± {statistics.stdev(vals):.3f}" if len(vals) > 1 else f"{vals[0]:.3f}"


def _reach_cell(vals: list, trials: list) -> str:
    got = [v for v in vals if v is not None]
    shown = [str(v) if v is not None else f">{n}" for v, n in zip(vals, trials)]
    med = f"median {statistics.median(got):.0f}" if len(got) == len(vals) else f"{len(got)}/{len(vals)} reached"
    return f"{', '.join(shown)} ({med})"


def _rejected_cell(e: dict) -> str:
    """Per seed, the rejected proposals and their share of all proposals (trials + rejected)."""
    rej = e.get("rejected") or [0] * len(e["trials"])
    if not any(rej):
        return "0"
    return ", ".join(f"{r} ({100 * r / (r + n):.0f} %)" for r, n in zip(rej, e["trials"]))


def markdown(tab: dict) -> str:
    lines = ["| layer | method | trials | invalid | rejected before a trial | trials to AutoTVM's best (exact) | within 2 % | best GFLOPS at "
             f"{EARLY} trials | at 64 trials | best latency, ms | search time, s |", "|---" * 11 + "|"]
    for cell in tab.values():
        layer = layer_label(cell["shape"])
        for label, e in sorted(cell["methods"].items()):
            noisy = "*" if any(e["noisy"]) else ""
            lines.append(f"| {layer} | {label} | {max(e['trials'])} | {sum(e['invalid'])} | {_rejected_cell(e)} | "
                         f"{_reach_cell(e.get('reach_exact', []), e['trials']) if 'reach_exact' in e else '—'} | "
                         f"{_reach_cell(e.get('reach_2pct', []), e['trials']) if 'reach_2pct' in e else '—'} | "
                         f"{_ms(e[f'gflops_at_{EARLY}'])} | {_ms(e['gflops_at_64'])} | {_ms(e['best_ms'])}{noisy} | "
                         f"{_ms(e['search_s'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir")
    ap.add_argument("--experiment", default="glimpse-eval")
    ap.add_argument("--reference-experiment", default=None,
                    help="the experiment of the autotvm reference runs (default: --experiment)")
    ap.add_argument("--out", default=None, help="JSON file of the table (with the machine)")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.workdir, "records")):
        print(f"error: {args.workdir}: no records/ folder of runs (a glimpse_loo.sh work dir after its eval stage)",
              file=sys.stderr)
        sys.exit(2)
    tab = table(_runs(args.workdir, args.experiment, args.reference_experiment))
    pairs = paired(tab)
    print(markdown(tab))
    if pairs:
        print("\n" + paired_markdown(tab, pairs))
    if args.out:
        write_json(args.out, {"machine": machine_info(), "table": tab, **({"paired": pairs} if pairs else {})})


if __name__ == "__main__":
    main()
