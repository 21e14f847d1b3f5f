"""Leaderboard statistics over seeds: intervals, verdicts against the baseline, noise marks, and the
precision, threads and machine of each (model, target) group.

Per method row (``method_stats``):

- speedups vs PyTorch eager, torch.compile and PyTorch TF32: the mean over seeds of the run's
  ``speedup_vs_*`` (older runs: reference latency / ``e2e_latency_ms``). With >= 2 seeds the
  interval is a bootstrap of that mean over the seeds; with one seed it is the run's own interval
  over the rounds of its interleaved A/B timing (``speedup_vs_*_ci_low/high``), when logged.
- search and latency reduction against the baseline: ``ratio_of_means_ci`` of the method's and the
  baseline's seeds (T/T_base, L/L_base; reduction interval = [1 - high, 1 - low]); HV from
  ``reduction_product_ci``. No interval with fewer than 2 seeds on either side, none on the
  baseline's own row.
- verdicts: ``better``/``worse`` only when the interval of the ratio excludes 1, else ``n.s.``;
  blank without an interval.
- noise: ``<source>_noisy_any`` is True when some run marked that timing noisy, False when the runs
  logged it clean, None when no run logged it; ``noisy`` lists the noisy sources.
- unchecked: ``n_unchecked_runs`` counts the runs with a task whose reported best could not be
  output-checked (run tag ``tunebench.unchecked_tasks``); values resting on task bests (Σ task
  latency, % peak) then carry ``(unchecked)``.
- machine: distinct ``precision``/``threads``/``device`` tags and the mean measured peak.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tunebench.harness.measurement import UNCHECKED_TAG
from tunebench.protocol.stats import LEVEL, N_BOOT, bootstrap_ci, ratio_of_means_ci, reduction_product_ci, verdict

#: speedup metric -> prefix of its reference latency (``<prefix>_latency_ms``, ``<prefix>_noisy``)
SPEEDUPS = {"speedup_vs_torch": "torch", "speedup_vs_torch_compile": "torch_compile",
            "speedup_vs_torch_tf32": "torch_tf32"}
NOISE_SOURCES = ("e2e", "torch", "torch_compile", "torch_tf32", "tvm_default")
RUN_METRICS = (*(f"{s}_noisy" for s in NOISE_SOURCES), "torch_compile_latency_ms", "torch_tf32_latency_ms",
               *(f"{k}{end}" for k in SPEEDUPS for end in ("", "_ci_low", "_ci_high")),
               "n_noisy_tasks", "n_noisy_measurements", "calib_max_slowdown", "lock_wait_s",
               "peak_gflops", "peak_mem_gbps", "tasks_gflops", "pct_peak")
RUN_TAGS = ("precision", "threads", "device")
#: run tags read into columns of their own: column -> tag
EXTRA_TAGS = {"unchecked_tasks": UNCHECKED_TAG}
REDUCTIONS = {"search_red": "search_time_s", "latency_red": "e2e_latency_ms"}
CSV_COLUMNS = (
    *(f"{k}_{s}" for k in SPEEDUPS for s in ("mean", "std", "ci_low", "ci_high", "verdict")),
    "torch_compile_latency_ms_mean", "torch_tf32_latency_ms_mean",
    *(f"{r}_{s}" for r in REDUCTIONS for s in ("ci_low_pct", "ci_high_pct", "verdict")), "hv_ci_low", "hv_ci_high",
    *(f"{s}_noisy_any" for s in NOISE_SOURCES), "baseline_e2e_noisy_any", "noisy",
    "n_noisy_tasks_mean", "n_noisy_tasks_max", "n_noisy_measurements_mean", "calib_max_slowdown_max",
    "lock_wait_s_mean", "precision", "threads", "device", "peak_gflops_mean", "peak_mem_gbps_mean",
    "tasks_gflops_mean", "pct_peak_mean", "n_unchecked_runs", "unchecked_tasks")
NOISY = " (noisy)"
UNCHECKED = " (unchecked)"
NOT_RECORDED = "not recorded"


def _finite(*values) -> bool:
    return all(v is not None and isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def speedup_stats(m: pd.DataFrame, key: str) -> dict:
    """Mean, sample std, interval and verdict of ``key`` (a :data:`SPEEDUPS` metric) over the runs ``m``."""
    values = m[key].fillna(m[f"{SPEEDUPS[key]}_latency_ms"] / m["e2e_latency_ms"]).dropna()
    lo = hi = math.nan
    if len(values) >= 2:
        lo, hi = bootstrap_ci(values.to_numpy())
    elif len(values) == 1:  # a single seed: its own interval over the rounds of the interleaved timing
        lo, hi = m.loc[values.index[0], [f"{key}_ci_low", f"{key}_ci_high"]]
    word = verdict(lo, hi, better_below=False) if _finite(lo, hi) else ""
    return {f"{key}_mean": values.mean(), f"{key}_std": values.std(), f"{key}_ci_low": lo, f"{key}_ci_high": hi,
            f"{key}_verdict": word}


def reduction_stats(m: pd.DataFrame, base: pd.DataFrame, is_baseline: bool) -> dict:
    """Intervals (in %) and verdicts of the search and latency reduction, and the HV interval."""
    out = {f"{r}_{s}": math.nan for r in REDUCTIONS for s in ("ci_low_pct", "ci_high_pct")}
    out.update({f"{r}_verdict": "" for r in REDUCTIONS}, hv_ci_low=math.nan, hv_ci_high=math.nan)
    if is_baseline or base.empty:
        return out
    for name, col in REDUCTIONS.items():
        _, lo, hi = ratio_of_means_ci(m[col].to_numpy(float), base[col].to_numpy(float))
        if _finite(lo, hi):
            out[f"{name}_ci_low_pct"], out[f"{name}_ci_high_pct"] = (1 - hi) * 100, (1 - lo) * 100
            out[f"{name}_verdict"] = verdict(lo, hi, better_below=True)
    _, out["hv_ci_low"], out["hv_ci_high"] = reduction_product_ci(
        m["search_time_s"], m["e2e_latency_ms"], base["search_time_s"], base["e2e_latency_ms"])
    return out


def _any_noisy(flags: pd.Series) -> bool | None:
    logged = flags.dropna()
    return None if logged.empty else bool((logged > 0).any())


def noise_stats(m: pd.DataFrame, base: pd.DataFrame) -> dict:
    """Noise flags per timing source, noisy-task counts and the machine's calibration slowdown."""
    out = {f"{s}_noisy_any": _any_noisy(m[f"{s}_noisy"]) for s in NOISE_SOURCES}
    out["baseline_e2e_noisy_any"] = _any_noisy(base["e2e_noisy"])
    tasks = m["n_noisy_tasks"].dropna()
    out.update(n_noisy_tasks_mean=tasks.mean(), n_noisy_tasks_max=tasks.max(),
               n_noisy_measurements_mean=m["n_noisy_measurements"].mean(),
               calib_max_slowdown_max=m["calib_max_slowdown"].max(), lock_wait_s_mean=m["lock_wait_s"].mean())
    sources = [s for s in (*NOISE_SOURCES, "baseline_e2e") if out[f"{s}_noisy_any"]]
    out["noisy"] = ", ".join(sources + (["tasks"] if (tasks > 0).any() else []))
    return out


def unchecked_stats(m: pd.DataFrame) -> dict:
    """How many of the runs ``m`` have tasks whose best could not be output-checked, and which tasks
    (``seed <s>: <tasks>``, one entry per such run)."""
    tags = m["unchecked_tasks"] if "unchecked_tasks" in m else pd.Series([None] * len(m), index=m.index)
    hit = [(seed, tag) for seed, tag in zip(m["seed"], tags) if isinstance(tag, str) and tag]
    return {"n_unchecked_runs": len(hit), "unchecked_tasks": "; ".join(f"seed {s}: {t}" for s, t in hit)}


def tag_values(values) -> list[str]:
    """Distinct tag values, sorted; "not recorded" added when some runs lack the tag and others have it."""
    present = sorted({str(v) for v in values if isinstance(v, str) and v})
    missing = any(not (isinstance(v, str) and v) for v in values)
    return present + ([NOT_RECORDED] if missing and present else [])


def machine_stats(m: pd.DataFrame) -> dict:
    out = {tag: "; ".join(tag_values(m[tag])) for tag in RUN_TAGS}
    for col in ("peak_gflops", "peak_mem_gbps", "tasks_gflops", "pct_peak"):
        out[f"{col}_mean"] = m[col].mean()
    return out


def method_stats(m: pd.DataFrame, base: pd.DataFrame, is_baseline: bool) -> dict:
    """All :data:`CSV_COLUMNS` of one method's row: ``m`` its runs, ``base`` the baseline's runs."""
    out = {}
    for key in SPEEDUPS:
        out.update(speedup_stats(m, key))
    out["torch_compile_latency_ms_mean"] = m["torch_compile_latency_ms"].mean()
    out["torch_tf32_latency_ms_mean"] = m["torch_tf32_latency_ms"].mean()
    out.update(reduction_stats(m, base, is_baseline), **noise_stats(m, base), **machine_stats(m),
               **unchecked_stats(m))
    return out


# ---------------------------------------------------------------- group header

def _tag_text(values) -> str:
    found = tag_values(values) or [NOT_RECORDED]
    return found[0] if len(found) == 1 else ", ".join(found) + " (differ between runs)"


def _peak_text(values: pd.Series, unit: str) -> str:
    x = values.dropna()
    if x.empty:
        return ""
    low, high = f"{x.min():.1f}", f"{x.max():.1f}"
    text = f"{low} {unit}" if low == high else f"{low}–{high} {unit} (differs between runs)"
    return text + (f" (not measured in {len(values) - len(x)} run(s))" if len(x) < len(values) else "")


def machine_line(group: pd.DataFrame) -> str:
    """The sentence above a group's table: precision, threads, device and measured peak of its runs."""
    peak = [_peak_text(group["peak_gflops"], "GFLOP/s"), _peak_text(group["peak_mem_gbps"], "GB/s")]
    return (f"Precision: {_tag_text(group['precision'])}; threads: {_tag_text(group['threads'])}; "
            f"device: {_tag_text(group['device'])}; measured peak: {', '.join(p for p in peak if p) or NOT_RECORDED}.")


# ---------------------------------------------------------------- Markdown cells

def fmt_num(x, digits: int, strip: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if strip and "." in text else text


def flag(value) -> bool:
    """A ``*_noisy_any`` value as a bool (None/NaN: not logged, i.e. False)."""
    return isinstance(value, (bool, np.bool_)) and bool(value)


def ci_text(point, low, high, digits: int, word: str | None = "") -> str:
    """``2.71 [2.55, 2.90] better``; blank without a point, no brackets without an interval."""
    text = fmt_num(point, digits)
    if text and _finite(low, high):
        text += f" [{fmt_num(low, digits)}, {fmt_num(high, digits)}]"
    return text + (f" {word}" if text and isinstance(word, str) and word else "")


def mark(text: str, noisy: bool) -> str:
    return text + NOISY if text and noisy else text


def speedup_cell(r: dict, key: str) -> str:
    noisy = flag(r.get("e2e_noisy_any")) or flag(r.get(f"{SPEEDUPS[key]}_noisy_any"))
    return mark(ci_text(r[f"{key}_mean"], r[f"{key}_ci_low"], r[f"{key}_ci_high"], 2, r[f"{key}_verdict"]), noisy)


def latency_red_noisy(r: dict) -> bool:
    """Latency red. and HV of a non-baseline row rest on its e2e timings and the baseline's."""
    return not r.get("is_baseline") and (flag(r.get("e2e_noisy_any")) or flag(r.get("baseline_e2e_noisy_any")))


def reduction_cell(r: dict, name: str) -> str:
    text = ci_text(r[f"{name}_pct"], r.get(f"{name}_ci_low_pct"), r.get(f"{name}_ci_high_pct"), 2,
                   r.get(f"{name}_verdict"))
    return mark(text, name == "latency_red" and latency_red_noisy(r))


def tasks_noisy(r: dict) -> bool:
    return _finite(r.get("n_noisy_tasks_max")) and r["n_noisy_tasks_max"] > 0


def tasks_unchecked(r: dict) -> bool:
    """Some run of the row reported a task best whose output check could not be performed."""
    return _finite(r.get("n_unchecked_runs")) and r["n_unchecked_runs"] > 0


def tasks_cell(text: str, r: dict) -> str:
    """A value resting on the task bests (Σ task latency, % peak): ``(noisy)`` for noisy tasks,
    ``(unchecked)`` for task bests whose output could not be checked."""
    text = mark(text, tasks_noisy(r))
    return text + UNCHECKED if text and tasks_unchecked(r) else text


FOOTNOTE = (
    "e2e and PyTorch latencies are the medians of each run's timing samples (older runs: means). speedup vs "
    "PyTorch / torch.compile / PyTorch TF32 = mean over seeds of the run's speedup_vs_torch / _torch_compile / "
    "_torch_tf32, the geometric mean of the per-round ratios of its interleaved A/B timing (older runs: "
    "reference latency / e2e_latency_ms); torch.compile is blank where it did not compile in time, TF32 exists "
    f"on cuda only. [low, high]: {LEVEL * 100:.0f} % percentile-bootstrap intervals ({N_BOOT} resamples, seeds as the "
    "resampling unit): of the mean speedup over seeds; of T/T_base and L/L_base (the method's and the baseline's "
    "seeds resampled independently; reduction interval = [1 − high, 1 − low]); of HV from the same resamples "
    "(runs with both metrics). A single seed's speedup interval is the run's own, over the rounds of its "
    "interleaved timing; reductions and HV with fewer than 2 seeds on either side have no interval. "
    "better / worse: the interval of the ratio excludes 1 (speedups: faster / slower than that PyTorch variant; "
    "reductions: than the baseline); n.s.: it contains 1; no word: no interval. HV gets no verdict of its own. "
    "(noisy): the value rests on at least one timing the harness marked noisy (tuned model, PyTorch variant, TVM "
    "default, the baseline's e2e for latency red. and HV, noisy tasks for Σ task latency and % peak); the CSV "
    "has a *_noisy_any column per timing and lists the noisy ones in `noisy`. noisy tasks = mean over seeds of "
    "the tasks whose reported best latency is marked noisy (shown when there are some). (unchecked): some run's "
    "Σ task latency and % peak rest on a task best whose output check could not be performed (the CSV's "
    "n_unchecked_runs and unchecked_tasks say which). % peak = 100 × "
    "tasks_gflops / peak_gflops (Σ weight × FLOPs / Σ weight × best task latency, over the FMA peak measured on "
    "the machine at the run's thread count), mean over seeds. The line above each table gives its runs' "
    "precision, threads, device and measured peak (FMA GFLOP/s, memory GB/s). Fraction of the optimum "
    "(Kernel Tuner's benchmark methodology): a task's optimum is the best valid latency any run of the group "
    "found; a run's curve is the mean over tasks of optimum / its best latency so far (0 before its first valid "
    "one) vs the task's own search seconds; thin lines: seeds, thick: their mean.")
