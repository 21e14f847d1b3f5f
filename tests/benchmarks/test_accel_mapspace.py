"""benchmarks/accel_mapspace.py: a run that stopped by itself keeps its best at larger checkpoints; the summary's
95 % intervals and Timeloop's last improvement."""
import os
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import accel_mapspace as bench


def test_interval95_is_students_t():
    lo, hi = bench.interval95([1.0, 2.0, 3.0])
    assert lo == pytest.approx(2 - 4.302653 / np.sqrt(3)) and hi == pytest.approx(2 + 4.302653 / np.sqrt(3))
    assert bench.interval95([5.0]) == [5.0, 5.0]


def test_a_stopped_timeloop_run_keeps_its_best_at_4000():
    pytest.importorskip("zigzag")
    from tunebench.datasets.models import LayersModel
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    target = AccelTarget(AccelSettings())
    task = target.load_tasks(LayersModel(name="mm", layers=[{"batch": 64, "out_features": 512, "in_features": 128}]))[0][0]
    runs = [bench.tune(task, target, {"name": "timeloop_random", "victory_condition": 20}, 4000, s) for s in (0, 1)]
    for r in runs:
        assert r["stop_reason"] == "exhausted" and r["trials"] < 4000
        assert r["at"][4000] == r["best"] == r["curve"][-1]
    s = bench.summary(runs)
    assert s["stops"] == {"victory": 2} and s["ci95"][4000][0] <= s[4000][0] <= s["ci95"][4000][1]
    assert s["last_improvement"]["median"] == np.median([r["report"]["last_improvement"] for r in runs])


def test_gp_features_reaches_every_bo_run(monkeypatch):
    """``--gp-features`` (``BO_SETTINGS``) is given to each ``mapspace_bo`` run and recorded with it."""
    pytest.importorskip("zigzag")
    from tunebench.datasets.models import LayersModel
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    target = AccelTarget(AccelSettings())
    task = target.load_tasks(LayersModel(name="mm", layers=[{"batch": 64, "out_features": 512, "in_features": 128}]))[0][0]
    small = {"name": "mapspace_bo", "n_init": 2, "n_candidates": 64, "sobol_samples": 0, "fit_maxiter": 10}
    assert bench.tune(task, target, small, 3, 0)["report"]["gp_features"] == "mapping"  # the default
    monkeypatch.setitem(bench.BO_SETTINGS, "gp_features", "encoding")
    r = bench.tune(task, target, small, 3, 0)
    assert r["method"]["gp_features"] == "encoding" and r["report"]["gp_features"] == "encoding"
