"""The leaderboard as Markdown (``leaderboard.md``, also printed) and CSV (``leaderboard.csv``).

One section per (model, target): the run conditions line (precision, threads, device, measured
peak), the table of :func:`tunebench.report.cells.group_tables`, the group's notes and its plots;
then what the columns mean (:data:`COLUMNS_NOTE`, :data:`FOOTNOTE`). The CSV holds every column of
:data:`tunebench.report.aggregate.CSV_COLUMNS` plus ``note`` (the group's notes).
"""

from __future__ import annotations

import pandas as pd

from tunebench.protocol.stats import LEVEL, N_BOOT
from tunebench.report.cells import group_tables

COLUMNS_NOTE = (
    "Means over seeds ± sample std. search red. = 1 − T/T_base, latency red. = 1 − L/L_base with T, L "
    "the means over seeds of search_time_s and e2e_latency_ms; HV = search red. × latency red. × 100 "
    "(Sun et al., ICCV 2021, Eq. 7; \"both worse\" marks a positive HV from two negative reductions). "
    "Σ task latency = Σ weight × best task latency. \"excl. source\" columns (transfer methods only): "
    "the same with search_time_excl_source_s, the search time without source-layer tuning and model "
    "pre-training (Sun et al., ICCV 2021, report search time this way when a history is given). FPGA groups: ADRS "
    "against the exhaustive table's true Pareto front and normalized hypervolume (reference point from "
    "the target config), both of the designs measured at the highest fidelity; tool = tool seconds "
    "charged, algorithm = search − tool. Memory groups (target=memory): peak = largest peak of live "
    "activations over the model's cells (no allocator), arena = TFLite's simple memory arena for the same "
    "order, program order peak = the network's own order, reduction = geometric mean over cells of program "
    "peak / peak, off-chip = traffic at the target's on-chip size with Belady's replacement (summed over "
    "cells), measured peak = the peak of the tensors the scheduled graph held when run in PyTorch, "
    "scheduling = the method's seconds to compute its orders. Accelerator groups (target=accel, one objective): "
    "the network with every layer at its best mapping, each layer as often as the model runs it; energy / MAC = "
    "total energy / total MACs (the layers' energies from the target's cost model), modelled latency = the "
    "layers' cycles one after the other / clock, EDP = energy × modelled latency; blank when a layer has no "
    "valid mapping.")

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
    "(noisy: signals): the value rests on at least one timing the harness marked noisy (tuned model, PyTorch "
    "variant, TVM default, the baseline's e2e for latency red. and HV, noisy tasks for Σ task latency and % peak; "
    "a speedup: its own mark, from the signals that can move an interleaved ratio), followed by the signals that "
    "fired (rcv, foreign_cpu, slowdown, drift; docs/MEASUREMENT.md); the CSV has a *_noisy_any column per timing "
    "and lists the noisy ones with their signals in `noisy`. noisy tasks = mean over seeds of "
    "the tasks whose reported best latency is marked noisy (shown when there are some). (unchecked): some run's "
    "Σ task latency and % peak rest on a task best whose output check could not be performed (the CSV's "
    "n_unchecked_runs and unchecked_tasks say which). % peak = 100 × "
    "tasks_gflops / peak_gflops (Σ weight × FLOPs / Σ weight × best task latency, over the FMA peak measured on "
    "the machine at the run's thread count), mean over seeds. The line above each table gives its runs' "
    "precision, threads, device and measured peak (FMA GFLOP/s, memory GB/s). Fraction of the optimum "
    "(Kernel Tuner's benchmark methodology): a task's optimum is the best valid latency any run of the group "
    "found; a run's curve is the mean over tasks of optimum / its best latency so far (0 before its first valid "
    "one) vs the task's own search seconds; thin lines: seeds, thick: their mean (accelerator groups: the "
    "task's one objective, e.g. energy per MAC, in place of its latency; no model-level best-so-far curve). "
    "methodology score (replayed measured spaces, target=replay; Willemsen et al., FGCS 2024): a run's best so "
    "far placed between the calculated random-search baseline (0) and the space's optimum (1), averaged over "
    "evaluations 1..the group's largest trial count [evals] or over the replay clock [time], over spaces, and "
    "over seeds, with a 95 % bootstrap interval; negative: worse than random. rejected before building = mean "
    "over seeds of the share of proposed configs the target's static check rejected (a GPU's per-block limits; "
    "they take no trial), shown where some were.")

EMPTY = "No FINISHED runs match the filters."


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def to_markdown(table: pd.DataFrame, notes: dict, header: list[str], plots: dict, machine: dict | None = None
                ) -> str:
    """The leaderboard as Markdown: one section per (model, target) with its machine line (``machine``),
    table, notes and plots (``plots``: {(model, target): [(caption, png file), ...]})."""
    parts = ["# tunebench leaderboard", "", *header, ""]
    if table.empty:
        return "\n".join(parts + [EMPTY, ""])
    for (model, target), headers, cells in group_tables(table):
        parts += [f"## {model} on {target}", ""]
        if (machine or {}).get((model, target)):
            parts += [machine[(model, target)], ""]
        parts += [md_table(headers, cells), ""]
        parts += [f"- {n}" for n in notes.get((model, target), [])]
        for caption, png in plots.get((model, target), []):
            parts += ["", f"![{caption}, {model} on {target}]({png})"]
        parts.append("")
    parts += [COLUMNS_NOTE, "", FOOTNOTE, ""]
    return "\n".join(parts)


def write_csv(table: pd.DataFrame, notes: dict, path: str) -> None:
    """The table's rows with their group's notes (``note``, joined by ``; ``) as CSV."""
    csv = table.assign(note=["; ".join(notes.get((m, t), [])) for m, t in zip(table["model"], table["target"])])
    csv.to_csv(path, index=False)
