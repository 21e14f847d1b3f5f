"""Fraction-of-optimum curves on hand-made record lines (invented latencies; no tuning happened)."""

import numpy as np
import pytest

from tunebench.report import curves as oc
from tunebench.report.plots import write_optimum_plot


def rec(task, trial, search_s, ms, noisy=False):
    """One record line: ``ms`` None is an invalid measurement."""
    return {"task_id": task, "trial": trial, "valid": ms is not None, "search_s": search_s, "noisy": noisy,
            "latency_s": ms / 1e3 if ms is not None else None}


# Run A: task x 4 ms at 1 s, 2 ms at 2 s; task y 10 ms at 1 s, an invalid trial at 3 s.
RUN_A = [rec("x", 0, 1.0, 4.0), rec("x", 1, 2.0, 2.0), rec("y", 0, 1.0, 10.0), rec("y", 1, 3.0, None)]
# Run B (records out of clock order): task x invalid at 1 s, 1 ms (noisy) at 3 s; task y 5 ms at 2 s.
RUN_B = [rec("x", 1, 3.0, 1.0, noisy=True), rec("x", 0, 1.0, None), rec("y", 0, 2.0, 5.0)]
RUN_EMPTY = [rec("x", 0, 0.5, None)]  # never a valid measurement


def test_optima_over_all_runs_and_noisy_optima():
    optima = oc.task_optima([RUN_A, RUN_B, RUN_EMPTY])
    assert optima == pytest.approx({"x": 1e-3, "y": 5e-3})
    assert oc.noisy_optima([RUN_A, RUN_B], optima) == ["x"]  # x's optimum only from a noisy measurement
    clean_too = RUN_A + [rec("x", 2, 4.0, 1.0)]
    assert oc.noisy_optima([clean_too, RUN_B], optima) == []


def test_best_so_far_sorts_by_clock_and_skips_invalid():
    best = oc.best_so_far(RUN_B + [rec("y", 1, 1.0, 7.0), rec("y", 2, 4.0, 6.0)])
    t, b = best["x"]
    assert t.tolist() == [3.0] and b.tolist() == pytest.approx([1e-3])
    t, b = best["y"]
    assert t.tolist() == [1.0, 2.0, 4.0] and b.tolist() == pytest.approx([7e-3, 5e-3, 5e-3])


def test_fraction_curves_exact_values():
    grid, fractions, optima = oc.group_fractions({"m1": [RUN_A], "m2": [RUN_B, RUN_EMPTY]})
    assert grid.tolist() == [0.0, 0.5, 1.0, 2.0, 3.0]
    # A: x 0 -> 1/4 (1 s) -> 1/2 (2 s, held after x's clock ends); y 0 -> 5/10 (1 s), held
    assert fractions["m1"][0] == pytest.approx([0, 0, (0.25 + 0.5) / 2, 0.5, 0.5])
    # B: x 0 until its valid 1 ms at 3 s (= the optimum); y 0 -> 1 at 2 s
    assert fractions["m2"][0] == pytest.approx([0, 0, 0, 0.5, 1.0])
    assert fractions["m2"][1] == pytest.approx(np.zeros(5))  # no valid measurement: 0 throughout
    assert fractions["m2"].shape == (2, 5)
    # a run that never measured a task validly counts 0 for it; every value lies in [0, 1]
    only_y = oc.fraction_curve(oc.best_so_far([rec("y", 0, 1.0, 5.0)]), optima, np.array([0.0, 1.0]))
    assert only_y == pytest.approx([0.0, 0.5])
    assert all(((f >= 0) & (f <= 1)).all() for f in fractions.values())


def test_write_optimum_plot(tmp_path):
    path = tmp_path / "optimum.png"
    noisy = write_optimum_plot("m", "llvm", {"m1": [RUN_A], "m2": [RUN_B]}, {"m1"}, str(path))
    assert noisy == ["x"]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
