"""benchmarks/accel_firesim.py: ratio statistics and the within-layer ranking on hand-made rows."""
import os
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import accel_firesim as af


def entry(layer, firesim, zigzag, timeloop):
    return {"layer": [layer], "firesim": firesim, "zigzag": zigzag, "zigzag_own_bw": zigzag, "timeloop": timeloop}


def test_ratio_stats_by_hand():
    r = af.ratio_stats(np.array([10.0, 100.0, 1000.0]), np.array([100.0, 100.0, 100.0]))
    assert r["log10_ratio_min"] == pytest.approx(-1) and r["log10_ratio_max"] == pytest.approx(1)
    assert r["orders_between_extremes"] == pytest.approx(2) and r["share_within_2x"] == pytest.approx(1 / 3)


def test_within_layers_ties_and_regret():
    rows = [entry(1, 100, 5, 7), entry(1, 200, 4, 7), entry(1, 300, 6, 7),  # zigzag picks the 200 row
            entry(2, 50, 1, 3), entry(2, 60, 2, 4)]  # both pick the best
    z = af.within_layers(rows, "zigzag")
    assert z["layers_ranked"] == 2 and z["cheapest_row_agrees"] == 1 and z["cheapest_tied"] == 0
    assert z["regret_geomean"] == pytest.approx(np.sqrt(2.0 * 1.0)) and z["regret_max"] == pytest.approx(2.0)
    assert z["rho_undefined"] == 0 and z["rho_mean"] == pytest.approx((0.5 + 1.0) / 2)
    t = af.within_layers(rows, "timeloop")  # layer 1 all tied: rho undefined, regret the mean of its rows
    assert t["rho_undefined"] == 1 and t["cheapest_tied"] == 1 and t["cheapest_row_agrees"] == 1
    assert t["regret_max"] == pytest.approx(2.0) and t["regret_random_row_geomean"] == pytest.approx(
        np.sqrt(2.0 * 55 / 50))
