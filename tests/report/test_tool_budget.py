"""ADRS and hypervolume at equal tool time (tunebench.report.tool_budget)."""
import argparse

import numpy as np
import pytest

from tunebench.report import tool_budget as tb


def _row(method, seed, trace):
    return {"model": "hls_gemm", "method": method, "seed": seed, "trace": trace}


TRACE_A = {"tool_s": [100.0, 1000.0, 2000.0], "adrs": [0.5, 0.2, 0.1], "hypervolume": [0.5, 0.8, 0.9]}
TRACE_B = {"tool_s": [1200.0, 1500.0], "adrs": [0.4, 0.3], "hypervolume": [0.6, 0.7]}  # stops at 1500 s


def test_value_at_holds_the_last_value_reached_and_none_before_the_first():
    assert tb.value_at(TRACE_A, "adrs", 99.0) is None
    assert tb.value_at(TRACE_A, "adrs", 100.0) == 0.5
    assert tb.value_at(TRACE_A, "adrs", 1999.0) == 0.2
    assert tb.value_at(TRACE_B, "adrs", 1e9) == 0.3  # a run that stopped keeps its final value
    assert tb.value_at(None, "adrs", 10.0) is None


def test_budget_stats_and_tables_count_the_runs_with_a_value():
    rows = [_row("x", 0, TRACE_A), _row("x", 1, TRACE_B)]
    stats = tb.budget_stats(rows, (0.25, 0.5))
    mean, std, n_ok, n = stats[("hls_gemm", "x", 0.25, "adrs")]  # 900 s: only run A has a value
    assert (mean, n_ok, n) == (0.5, 1, 2) and np.isnan(std)
    mean, std, n_ok, n = stats[("hls_gemm", "x", 0.5, "adrs")]  # 1800 s: A 0.2, B 0.3
    assert mean == pytest.approx(0.25) and std == pytest.approx(np.std([0.2, 0.3], ddof=1)) and n_ok == 2
    (title, headers, cells), _ = tb.budget_tables(["hls_gemm"], ["x"], stats, (0.25, 0.5))
    assert cells[0] == ["hls_gemm @ 0.25 h", "0.5000 (1/2 runs)"]
    assert cells[1][1].startswith("0.2500 ± 0.0707")


def test_tool_budgets_must_be_positive_hours():
    assert tb.parse_budgets("0.25,0.5,1") == (0.25, 0.5, 1.0)
    for bad in ("", "x", "0.5,-1", "0"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive hours"):
            tb.parse_budgets(bad)
