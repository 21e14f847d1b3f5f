"""Table cells: the text of each leaderboard column, shared by the Markdown and the HTML tables.

A cell reads ``2.71 [2.55, 2.90] better``: the value, its interval when there is one and the
verdict when the interval says something. ``(noisy: <signals>)`` follows every value that rests on a
timing the harness marked noisy, naming the signals that fired (``(noisy)`` for runs that did not record
them); a speedup is marked by its own verdict (the signals that can move a ratio), where logged; ``(unchecked)`` follows Σ task latency and % peak when some run reported a task
best whose output check could not be performed. :func:`group_tables` gives each (model, target)
group's headers and cells.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pandas as pd

from tunebench.protocol.noise import parse_signals
from tunebench.report.aggregate import finite
from tunebench.report.query import SPEEDUPS

NOISY = " (noisy)"
UNCHECKED = " (unchecked)"


def fmt_num(x, digits: int, strip: bool = False) -> str:
    """``x`` with ``digits`` decimals (``strip``: without trailing zeros); blank for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if strip and "." in text else text


def pm(mean, std, digits: int) -> str:
    """``mean ± std``; the mean alone without a std."""
    text = fmt_num(mean, digits)
    return f"{text} ± {fmt_num(std, digits)}" if text and fmt_num(std, digits) else text


def flag(value) -> bool:
    """A ``*_noisy_any`` value as a bool (None/NaN: not logged, i.e. False)."""
    return isinstance(value, (bool, np.bool_)) and bool(value)


def ci_text(point, low, high, digits: int, word: str | None = "") -> str:
    """``2.71 [2.55, 2.90] better``; blank without a point, no brackets without an interval."""
    text = fmt_num(point, digits)
    if text and finite(low, high):
        text += f" [{fmt_num(low, digits)}, {fmt_num(high, digits)}]"
    return text + (f" {word}" if text and isinstance(word, str) and word else "")


def why(r: dict, *sources: str) -> str:
    """The signals that marked ``sources`` noisy in the row's runs (its ``noise_why``), comma-separated."""
    by_source = parse_signals(r.get("noise_why"))
    return ", ".join(dict.fromkeys(x for source, found in by_source.items() if source in sources for x in found))


def mark(text: str, noisy: bool, reasons: str = "") -> str:
    """``text (noisy: reasons)`` (``text (noisy)`` without reasons) when ``noisy`` and there is a text."""
    if not (text and noisy):
        return text
    return text + (f" (noisy: {reasons})" if reasons else NOISY)


def speedup_cell(r: dict, key: str) -> str:
    """A speedup marked by its own verdict where the runs logged one (``<key>_noisy_any``), else by its rows'."""
    own = r.get(f"{key}_noisy_any")
    if isinstance(own, (bool, np.bool_)):
        noisy, reasons = bool(own), why(r, key)
    else:
        noisy = flag(r.get("e2e_noisy_any")) or flag(r.get(f"{SPEEDUPS[key]}_noisy_any"))
        reasons = why(r, "e2e", SPEEDUPS[key])
    return mark(ci_text(r[f"{key}_mean"], r[f"{key}_ci_low"], r[f"{key}_ci_high"], 2, r[f"{key}_verdict"]), noisy,
                reasons)


def latency_red_noisy(r: dict) -> bool:
    """Latency red. and HV of a non-baseline row rest on its e2e timings and the baseline's."""
    return not r.get("is_baseline") and (flag(r.get("e2e_noisy_any")) or flag(r.get("baseline_e2e_noisy_any")))


def reduction_cell(r: dict, name: str) -> str:
    text = ci_text(r[f"{name}_pct"], r.get(f"{name}_ci_low_pct"), r.get(f"{name}_ci_high_pct"), 2,
                   r.get(f"{name}_verdict"))
    return mark(text, name == "latency_red" and latency_red_noisy(r), why(r, "e2e"))


def tasks_noisy(r: dict) -> bool:
    return finite(r.get("n_noisy_tasks_max")) and r["n_noisy_tasks_max"] > 0


def tasks_unchecked(r: dict) -> bool:
    """Some run of the row reported a task best whose output check could not be performed."""
    return finite(r.get("n_unchecked_runs")) and r["n_unchecked_runs"] > 0


def tasks_cell(text: str, r: dict) -> str:
    """A value resting on the task bests (Σ task latency, % peak): ``(noisy)`` for noisy tasks,
    ``(unchecked)`` for task bests whose output could not be checked."""
    text = mark(text, tasks_noisy(r), why(r, "tasks"))
    return text + UNCHECKED if text and tasks_unchecked(r) else text


def hv_cell(r) -> str:
    """HV with a marker when both reductions are negative: the product is then positive although
    the method is slower to search *and* gives slower code than the baseline."""
    text = ci_text(r["hv_vs_baseline"], r.get("hv_ci_low"), r.get("hv_ci_high"), 4)
    s, lat = r["search_red_pct"], r["latency_red_pct"]
    if text and s == s and lat == lat and s < 0 and lat < 0:  # (x == x: not NaN)
        text += " (both worse)"
    return mark(text, latency_red_noisy(r), why(r, "e2e"))


def _score_cell(r, axis: str) -> str:
    """The methodology score with its interval (replay groups only: blank elsewhere)."""
    key = f"method_score_{axis}"
    return ci_text(r.get(f"{key}_mean"), r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high"), 3)


# FPGA (multi-objective) groups: ADRS and normalized hypervolume instead of latencies.
FPGA_COLUMNS = (
    ("method", lambda r: r["method"]),
    ("seeds", lambda r: f"{r['n_seeds']} ({r['seeds']})"),
    ("ADRS", lambda r: pm(r["adrs_mean"], r["adrs_std"], 4)),
    ("hypervolume", lambda r: pm(r["hypervolume_mean"], r["hypervolume_std"], 4)),
    ("measurements", lambda r: fmt_num(r["n_measurements_mean"], 1, strip=True)),
    ("search [s]", lambda r: pm(r["search_time_s_mean"], r["search_time_s_std"], 1)),
    ("tool [s]", lambda r: fmt_num(r["tool_s_mean"], 1)),
    ("algorithm [s]", lambda r: fmt_num(r["algorithm_s_mean"], 2)),
)


def _kb(key: str):
    return lambda r: fmt_num(r[key] / 1024, 1) if finite(r.get(key)) else ""


# Memory groups (target=memory): peaks, traffic and scheduling time of each method's schedules.
MEMORY_COLUMNS = (
    ("method", lambda r: r["method"]),
    ("seeds", lambda r: f"{r['n_seeds']} ({r['seeds']})"),
    ("peak [KB]", _kb("peak_bytes_mean")),
    ("arena [KB]", _kb("arena_bytes_mean")),
    ("program order peak [KB]", _kb("program_peak_bytes_mean")),
    ("reduction vs program [×]", lambda r: fmt_num(r["peak_reduction_geomean_mean"], 3)),
    ("off-chip [KB]", _kb("offchip_bytes_mean")),
    ("off-chip reduction [×]", lambda r: fmt_num(r["offchip_reduction_mean"], 3)),
    ("measured peak [KB]", _kb("measured_peak_bytes_mean")),
    ("scheduling [s]", lambda r: pm(r["schedule_s_mean"], r["schedule_s_std"], 3)),
    ("nodes before → after", lambda r: f"{fmt_num(r['nodes_before_mean'], 0)} → {fmt_num(r['nodes_after_mean'], 0)}"),
)

# Accelerator groups (target=accel): the network's energy at every layer's best mapping, and the search.
ACCEL_COLUMNS = (
    ("method", lambda r: r["method"]),
    ("seeds", lambda r: f"{r['n_seeds']} ({r['seeds']})"),
    ("energy / MAC [pJ]", lambda r: pm(r["energy_pj_per_mac_mean"], r["energy_pj_per_mac_std"], 4)),
    ("energy [µJ]", lambda r: pm(r["energy_uj_mean"], r["energy_uj_std"], 4)),
    ("modelled latency [ms]", lambda r: pm(r["model_latency_ms_mean"], r["model_latency_ms_std"], 4)),
    ("EDP [J s]", lambda r: f"{r['edp_js_mean']:.4g}" if finite(r.get("edp_js_mean")) else ""),
    ("evaluations", lambda r: fmt_num(r["n_measurements_mean"], 1, strip=True)),
    ("search [s]", lambda r: pm(r["search_time_s_mean"], r["search_time_s_std"], 1)),
)

# (header, formatter of a table row): the table view of the CSV rows.
COLUMNS = (
    ("method", lambda r: r["method"] + (" (baseline)" if r["is_baseline"] else "")),
    ("seeds", lambda r: f"{r['n_seeds']} ({r['seeds']})"),
    ("search [h]", lambda r: pm(r["search_time_h_mean"], r["search_time_h_std"], 2)),
    ("search [s]", lambda r: pm(r["search_time_s_mean"], r["search_time_s_std"], 1)),
    ("measurements", lambda r: fmt_num(r["n_measurements_mean"], 1, strip=True)),
    ("rejected before building [%]", lambda r: fmt_num(100 * r["static_invalid_fraction_mean"], 1)
     if finite(r.get("static_invalid_fraction_mean")) else ""),
    ("Σ task latency [ms]", lambda r: tasks_cell(fmt_num(r["tasks_latency_ms_mean"], 4), r)),
    ("e2e latency [ms]", lambda r: mark(pm(r["e2e_latency_ms_mean"], r["e2e_latency_ms_std"], 4),
                                        flag(r["e2e_noisy_any"]), why(r, "e2e"))),
    ("speedup vs PyTorch [×]", lambda r: speedup_cell(r, "speedup_vs_torch")),
    ("speedup vs torch.compile [×]", lambda r: speedup_cell(r, "speedup_vs_torch_compile")),
    ("speedup vs PyTorch TF32 [×]", lambda r: speedup_cell(r, "speedup_vs_torch_tf32")),
    ("speedup vs ONNX Runtime [×]", lambda r: speedup_cell(r, "speedup_vs_onnxruntime")),
    ("TVM default [ms]", lambda r: mark(fmt_num(r["tvm_default_latency_ms_mean"], 4),
                                        flag(r["tvm_default_noisy_any"]), why(r, "tvm_default"))),
    ("% peak", lambda r: tasks_cell(fmt_num(r["pct_peak_mean"], 1), r)),
    ("noisy tasks", lambda r: fmt_num(r["n_noisy_tasks_mean"], 2, strip=True)),
    ("search red. [%]", lambda r: reduction_cell(r, "search_red")),
    ("latency red. [%]", lambda r: reduction_cell(r, "latency_red")),
    ("HV vs {baseline}", hv_cell),
    ("search excl. source [s]", lambda r: fmt_num(r["search_excl_source_s_mean"], 1)),
    ("search red. excl. source [%]", lambda r: fmt_num(r["search_red_excl_source_pct"], 2)),
    ("HV excl. source", lambda r: fmt_num(r["hv_excl_source"], 4)),
    ("methodology score [evals]", lambda r: _score_cell(r, "evals")),
    ("methodology score [time]", lambda r: _score_cell(r, "time")),
)
#: columns left out of a group's table unless the predicate (None: the cell is not blank) holds for
#: some row: excl. source times exist for transfer methods (dgp) only, TF32 on cuda only, methodology
#: scores on replayed measured spaces only, configs rejected by a static check (GPU limits) where some were
OPTIONAL = {"search excl. source [s]": None, "search red. excl. source [%]": None, "HV excl. source": None,
            "speedup vs PyTorch TF32 [×]": None, "noisy tasks": tasks_noisy,
            "methodology score [evals]": None, "methodology score [time]": None,
            "rejected before building [%]": lambda r: finite(r.get("static_invalid_fraction_mean"))
            and r["static_invalid_fraction_mean"] > 0}


def group_tables(table: pd.DataFrame) -> Iterator[tuple[tuple[str, str], list[str], list[list[str]]]]:
    """Per (model, target) group in table order: the key, the headers and the rows of cells."""
    for (model, target), rows in table.groupby(["model", "target"], sort=False):
        baseline = rows["baseline"].iloc[0]
        records = rows.to_dict("records")
        cols = (FPGA_COLUMNS if rows["hypervolume_mean"].notna().any() else
                MEMORY_COLUMNS if rows["peak_bytes_mean"].notna().any() else
                ACCEL_COLUMNS if rows["energy_pj_per_mac_mean"].notna().any() else COLUMNS)
        cols = [(h, fmt) for h, fmt in cols
                if h not in OPTIONAL or any((OPTIONAL[h] or fmt)(r) for r in records)]
        cells = [[fmt(r) for _, fmt in cols] for r in records]
        yield (model, target), [h.format(baseline=baseline) for h, _ in cols], cells
