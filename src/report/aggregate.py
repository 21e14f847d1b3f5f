"""Leaderboard rows: one per (model, target, method), aggregated over the method's seeds.

Per row: means and sample stds (ddof=1) over the seeds; search and latency reduction and HV against
the ``--baseline`` method of the same group (docs/METHODS.md §Metrics: ``search_red = 1 - T/T_base``,
``latency_red = 1 - L/L_base``, ``HV = search_red * latency_red * 100`` with T, L the seed means of
``search_time_s`` and ``e2e_latency_ms``; HV is also positive when both reductions are negative, so
read it together with them); and the statistics of :func:`method_stats`:

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
  logged it clean, None when no run logged it (``speedup_vs_*_noisy_any``: the ratio's own mark);
  ``noisy`` lists the noisy sources with the signals that fired, ``noise_why`` the signals per source.
- unchecked: ``n_unchecked_runs`` counts the runs with a task whose reported best could not be
  output-checked (run tag ``tunebench.unchecked_tasks``).
- machine: distinct ``precision``/``threads``/``device`` tags and the mean measured peak;
  :func:`machine_line` turns a group's runs into the sentence above its table.
"""

from __future__ import annotations

import math

import pandas as pd

from tunebench.protocol.noise import parse_signals, signals_text
from tunebench.protocol.stats import bootstrap_ci, ratio_of_means_ci, reduction_product_ci, verdict
from tunebench.report.query import ACCEL_METRICS, MEMORY_METRICS, NOISE_SOURCES, RUN_TAGS, SPEEDUPS

REDUCTIONS = {"search_red": "search_time_s", "latency_red": "e2e_latency_ms"}
#: columns of :func:`method_stats`
STATS_COLUMNS = (
    *(f"{k}_{s}" for k in SPEEDUPS for s in ("mean", "std", "ci_low", "ci_high", "verdict")),
    "torch_compile_latency_ms_mean", "torch_tf32_latency_ms_mean",
    *(f"{r}_{s}" for r in REDUCTIONS for s in ("ci_low_pct", "ci_high_pct", "verdict")), "hv_ci_low", "hv_ci_high",
    *(f"{s}_noisy_any" for s in NOISE_SOURCES), *(f"{k}_noisy_any" for k in SPEEDUPS), "baseline_e2e_noisy_any",
    "noisy", "noise_why",
    "n_noisy_tasks_mean", "n_noisy_tasks_max", "n_noisy_measurements_mean", "calib_max_slowdown_max",
    "lock_wait_s_mean", "precision", "threads", "device", "peak_gflops_mean", "peak_mem_gbps_mean",
    "tasks_gflops_mean", "pct_peak_mean", "n_unchecked_runs", "unchecked_tasks")
CSV_COLUMNS = ("model", "target", "method", "is_baseline", "n_seeds", "seeds", "search_time_s_mean",
               "search_time_s_std", "search_time_h_mean", "search_time_h_std", "n_measurements_mean",
               "static_invalid_fraction_mean",
               "tasks_latency_ms_mean", "e2e_latency_ms_mean", "e2e_latency_ms_std", "n_e2e",
               "torch_latency_ms_mean", "tvm_default_latency_ms_mean", "e2e_rel_err_max",
               "search_red_pct", "latency_red_pct", "hv_vs_baseline", "search_excl_source_s_mean",
               "search_red_excl_source_pct", "hv_excl_source", "baseline", "run_ids",
               "adrs_mean", "adrs_std", "hypervolume_mean", "hypervolume_std", "tool_s_mean", "algorithm_s_mean",
               *(f"{k}_mean" for k in MEMORY_METRICS), "schedule_s_std",
               *(f"{k}_{s}" for k in ACCEL_METRICS for s in ("mean", "std")), *STATS_COLUMNS)
NOT_RECORDED = "not recorded"


def finite(*values) -> bool:
    """Every value is a finite int or float (not None, not NaN)."""
    return all(v is not None and isinstance(v, (int, float)) and math.isfinite(v) for v in values)


# ---------------------------------------------------------------- rows

def _seed_key(seed: str):
    return (0, int(seed), "") if str(seed).lstrip("-").isdigit() else (1, 0, str(seed))


def reductions(t: float, lat: float, t_base: float, lat_base: float) -> tuple[float, float, float]:
    """(search_red, latency_red, HV_vs_baseline) as fractions/HV; NaN where an input is missing."""
    search_red = 1.0 - t / t_base if t_base and not math.isnan(t_base) else math.nan
    latency_red = 1.0 - lat / lat_base if lat_base and not math.isnan(lat_base) else math.nan
    return search_red, latency_red, search_red * latency_red * 100.0


def _group_note(group: pd.DataFrame, base: pd.DataFrame, baseline: str) -> str | None:
    """Why a group's reductions are blank, if they are."""
    if group["hypervolume"].notna().any() or group["peak_bytes"].notna().any() or \
            group["energy_pj_per_mac"].notna().any():
        return None  # FPGA, memory and accelerator groups: no latency baseline; their values are absolute
    if base.empty:
        return (f"no FINISHED `{baseline}` run for this model and target: "
                "search red., latency red. and HV are blank")
    if math.isnan(base["e2e_latency_ms"].mean()):
        return f"the `{baseline}` runs have no e2e_latency_ms: latency red. and HV are blank"
    return None


def _method_row(model: str, target: str, method: str, m: pd.DataFrame, base: pd.DataFrame, baseline: str) -> dict:
    """The row of one method's runs ``m`` against the baseline's runs ``base``."""
    t_base, lat_base = base["search_time_s"].mean(), base["e2e_latency_ms"].mean()
    t, lat = m["search_time_s"].mean(), m["e2e_latency_ms"].mean()
    search_red, latency_red, hv = reductions(t, lat, t_base, lat_base)
    t_excl = m["search_time_excl_source_s"].mean()  # NaN unless a transfer method logged it
    search_red_x, _, hv_x = reductions(t_excl, lat, t_base, lat_base)
    return {
        "model": model, "target": target, "method": method, "is_baseline": method == baseline,
        "n_seeds": len(m), "seeds": ",".join(sorted(m["seed"], key=_seed_key)),
        "search_time_s_mean": t, "search_time_s_std": m["search_time_s"].std(),
        "search_time_h_mean": t / 3600, "search_time_h_std": m["search_time_s"].std() / 3600,
        "n_measurements_mean": m["n_measurements"].mean(),
        "static_invalid_fraction_mean": m["static_invalid_fraction"].mean(),
        "tasks_latency_ms_mean": m["tasks_latency_ms"].mean(),
        "e2e_latency_ms_mean": lat, "e2e_latency_ms_std": m["e2e_latency_ms"].std(),
        "n_e2e": int(m["e2e_latency_ms"].notna().sum()),
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
        **{f"{k}_mean": m[k].mean() for k in MEMORY_METRICS}, "schedule_s_std": m["schedule_s"].std(),
        **{f"{k}_{s}": getattr(m[k], s)() for k in ACCEL_METRICS for s in ("mean", "std")},
        **method_stats(m, base, method == baseline),
    }


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    """Rows: baseline first, then by mean e2e latency (FPGA: ADRS; memory: peak; accelerator: energy per MAC;
    blank last), then by name."""
    if table.empty:
        return table
    table["_order"] = ~table["is_baseline"]
    table["_lat"] = (table["e2e_latency_ms_mean"].fillna(table["adrs_mean"]).fillna(table["peak_bytes_mean"])
                     .fillna(table["energy_pj_per_mac_mean"]).fillna(math.inf))
    return (table.sort_values(["model", "target", "_order", "_lat", "method"])
            .drop(columns=["_order", "_lat"]).reset_index(drop=True))


def aggregate(runs: pd.DataFrame, baseline: str = "autotvm", methods: list[str] | None = None
              ) -> tuple[pd.DataFrame, dict[tuple[str, str], list[str]]]:
    """The leaderboard rows (one per model, target, method; ``methods``: only these, None: all) and
    notes per (model, target) group."""
    rows, notes = [], {}
    for (model, target), group in runs.groupby(["model", "target"], sort=True):
        base = group[group["method"] == baseline]
        group_notes = notes.setdefault((model, target), [])
        note = _group_note(group, base, baseline)
        if note:
            group_notes.append(note)
        for method, m in group.groupby("method", sort=True):
            if methods and method not in methods:
                continue
            row = _method_row(model, target, method, m, base, baseline)
            if 0 < row["n_e2e"] < len(m):
                group_notes.append(f"`{method}`: e2e latency from {row['n_e2e']} of {len(m)} seeds")
            rows.append(row)
    return _sorted(pd.DataFrame(rows, columns=list(CSV_COLUMNS))), notes


# ---------------------------------------------------------------- statistics

def speedup_stats(m: pd.DataFrame, key: str) -> dict:
    """Mean, sample std, interval and verdict of ``key`` (a :data:`SPEEDUPS` metric) over the runs ``m``."""
    values = m[key].fillna(m[f"{SPEEDUPS[key]}_latency_ms"] / m["e2e_latency_ms"]).dropna()
    lo = hi = math.nan
    if len(values) >= 2:
        lo, hi = bootstrap_ci(values.to_numpy())
    elif len(values) == 1:  # a single seed: its own interval over the rounds of the interleaved timing
        lo, hi = m.loc[values.index[0], [f"{key}_ci_low", f"{key}_ci_high"]]
    word = verdict(lo, hi, better_below=False) if finite(lo, hi) else ""
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
        if finite(lo, hi):
            out[f"{name}_ci_low_pct"], out[f"{name}_ci_high_pct"] = (1 - hi) * 100, (1 - lo) * 100
            out[f"{name}_verdict"] = verdict(lo, hi, better_below=True)
    _, out["hv_ci_low"], out["hv_ci_high"] = reduction_product_ci(
        m["search_time_s"], m["e2e_latency_ms"], base["search_time_s"], base["e2e_latency_ms"])
    return out


def _any_noisy(flags: pd.Series) -> bool | None:
    logged = flags.dropna()
    return None if logged.empty else bool((logged > 0).any())


def noise_signals(m: pd.DataFrame) -> dict[str, list[str]]:
    """Timing source -> the signals that marked it noisy in some run of ``m`` (run tags ``noise_e2e``:
    ``<source>: <signal>, ...; ...``, and ``noise_tasks``: the tasks' signals), each once, in order."""
    texts = [t for t in (m["noise_e2e"] if "noise_e2e" in m else ()) if isinstance(t, str)]
    texts += [f"tasks: {t}" for t in (m["noise_tasks"] if "noise_tasks" in m else ()) if isinstance(t, str) and t]
    return parse_signals("; ".join(texts))


def noise_stats(m: pd.DataFrame, base: pd.DataFrame) -> dict:
    """Noise flags per timing source and per speedup, the signals that fired (``noise_why``: ``<source>:
    <signal>, ...; ...``), noisy-task counts and the machine's calibration slowdown."""
    out = {f"{s}_noisy_any": _any_noisy(m[f"{s}_noisy"]) for s in NOISE_SOURCES}
    out.update({f"{k}_noisy_any": _any_noisy(m[f"{k}_noisy"]) for k in SPEEDUPS})
    out["baseline_e2e_noisy_any"] = _any_noisy(base["e2e_noisy"])
    tasks = m["n_noisy_tasks"].dropna()
    out.update(n_noisy_tasks_mean=tasks.mean(), n_noisy_tasks_max=tasks.max(),
               n_noisy_measurements_mean=m["n_noisy_measurements"].mean(),
               calib_max_slowdown_max=m["calib_max_slowdown"].max(), lock_wait_s_mean=m["lock_wait_s"].mean())
    why = noise_signals(m)
    out["noise_why"] = signals_text(why.items())
    sources = [s for s in (*NOISE_SOURCES, "baseline_e2e") if out[f"{s}_noisy_any"]]
    sources += ["tasks"] if (tasks > 0).any() else []
    out["noisy"] = ", ".join(s + (f" ({', '.join(why[s])})" if s in why else "") for s in sources)
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
    """The runs' distinct precision/threads/device tags and their mean measured peak."""
    out = {tag: "; ".join(tag_values(m[tag])) for tag in RUN_TAGS}
    for col in ("peak_gflops", "peak_mem_gbps", "tasks_gflops", "pct_peak"):
        out[f"{col}_mean"] = m[col].mean()
    return out


def method_stats(m: pd.DataFrame, base: pd.DataFrame, is_baseline: bool) -> dict:
    """All :data:`STATS_COLUMNS` of one method's row: ``m`` its runs, ``base`` the baseline's runs."""
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
    """The sentence above a group's table: precision, threads, device and measured peak of its runs, and how much
    slower than its fastest calibration the machine was (``calib_host_slowdown``), when 5 % or more."""
    peak = [_peak_text(group["peak_gflops"], "GFLOP/s"), _peak_text(group["peak_mem_gbps"], "GB/s")]
    host = group["calib_host_slowdown"].dropna() if "calib_host_slowdown" in group else pd.Series(dtype=float)
    slower = (f"; calibration up to {host.max():.2f}x its fastest on this machine (a slower host or clock: "
              "absolute times, not ratios)") if not host.empty and host.max() >= 1.05 else ""
    return (f"Precision: {_tag_text(group['precision'])}; threads: {_tag_text(group['threads'])}; "
            f"device: {_tag_text(group['device'])}; measured peak: {', '.join(p for p in peak if p) or NOT_RECORDED}"
            f"{slower}.")
