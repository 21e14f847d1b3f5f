"""The leaderboard says why a value is marked noisy: the signals that fired, per timing source, from the
runs' noise tags; a speedup is marked by its own verdict where the runs logged one."""

import pandas as pd

from tunebench.report.aggregate import noise_signals, noise_stats
from tunebench.report.cells import mark, speedup_cell, tasks_cell, why


def _runs(**cols) -> pd.DataFrame:
    n = len(next(iter(cols.values())))
    base = {f"{s}_noisy": [0.0] * n for s in ("e2e", "torch", "torch_compile", "torch_tf32", "onnxruntime",
                                              "tvm_default")}
    base.update({f"speedup_vs_{s}_noisy": [float("nan")] * n for s in ("torch", "torch_compile", "torch_tf32",
                                                                        "onnxruntime")})
    base.update(n_noisy_tasks=[0.0] * n, n_noisy_measurements=[0.0] * n, calib_max_slowdown=[1.0] * n,
                lock_wait_s=[0.0] * n, noise_e2e=[None] * n, noise_tasks=[None] * n)
    return pd.DataFrame({**base, **cols})


def test_the_signals_of_every_source_are_collected_over_the_runs_each_once():
    m = _runs(noise_e2e=["torch: slowdown, rcv; speedup_vs_torch: rcv", None, "torch: drift"],
              noise_tasks=["slowdown", "", "rcv, slowdown"])
    assert noise_signals(m) == {"torch": ["slowdown", "rcv", "drift"], "speedup_vs_torch": ["rcv"],
                                "tasks": ["slowdown", "rcv"]}


def test_the_noisy_column_names_each_source_with_its_signals():
    m = _runs(torch_noisy=[1.0, 0.0], n_noisy_tasks=[0.0, 2.0], speedup_vs_torch_noisy=[0.0, 0.0],
              noise_e2e=["torch: slowdown", None], noise_tasks=[None, "rcv"])
    out = noise_stats(m, m)
    assert out["noisy"] == "torch (slowdown), tasks (rcv)"
    assert out["noise_why"] == "torch: slowdown; tasks: rcv"
    assert out["speedup_vs_torch_noisy_any"] is False and out["speedup_vs_torch_compile_noisy_any"] is None


def test_a_speedup_follows_its_own_verdict_where_logged_else_its_rows():
    row = {"speedup_vs_torch_mean": 2.0, "speedup_vs_torch_ci_low": 1.9, "speedup_vs_torch_ci_high": 2.1,
           "speedup_vs_torch_verdict": "better", "e2e_noisy_any": False, "torch_noisy_any": True,
           "noise_why": "torch: slowdown"}
    # the PyTorch row was slow against the reference, the interleaved ratio was judged clean: no mark
    assert speedup_cell({**row, "speedup_vs_torch_noisy_any": False}, "speedup_vs_torch") == "2.00 [1.90, 2.10] better"
    marked = {**row, "speedup_vs_torch_noisy_any": True, "noise_why": "torch: slowdown; speedup_vs_torch: rcv, drift"}
    assert speedup_cell(marked, "speedup_vs_torch") == "2.00 [1.90, 2.10] better (noisy: rcv, drift)"
    # runs that logged no verdict of the ratio: marked by its rows, with their signals
    assert speedup_cell({**row, "speedup_vs_torch_noisy_any": None}, "speedup_vs_torch").endswith(
        "better (noisy: slowdown)")


def test_marks_without_recorded_signals_stay_plain():
    assert mark("1.5", True) == "1.5 (noisy)" and mark("1.5", False, "rcv") == "1.5" and mark("", True, "rcv") == ""
    assert why({"noise_why": "e2e: rcv; tasks: slowdown, drift"}, "tasks") == "slowdown, drift"
    assert tasks_cell("3.0", {"n_noisy_tasks_max": 1, "noise_why": "tasks: foreign_cpu"}) == "3.0 (noisy: foreign_cpu)"
