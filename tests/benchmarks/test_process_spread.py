"""benchmarks/process_spread.py: a kernel timed in several fresh processes, and its bad input."""
import os
import subprocess
import sys

import numpy as np
import yaml

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import process_spread as ps

SCRIPT = os.path.join(ROOT, "benchmarks", "process_spread.py")


def test_a_slow_process_shows_as_spread_beyond_the_noise_within_each():
    # three processes, each steady (robust CV ~1 %), one of them twice as slow
    steady = [[10.0, 10.1, 9.9, 10.0, 10.2], [20.0, 20.2, 19.8, 20.1, 20.0], [10.1, 10.0, 10.2, 9.9, 10.0]]
    row = ps.spread_row("c2d_8", steady, tuned_ms=9.8)
    assert row["process_medians_ms"] == [10.0, 20.0, 10.0]
    assert (row["min_ms"], row["median_ms"], row["max_ms"]) == (10.0, 10.0, 20.0)
    assert np.isclose(row["max_over_min"], 2.0)
    assert row["within_rcv_max"] < 0.02 and row["spread_vs_noise"] > 50


def test_robust_cv_ignores_one_interrupted_repeat():
    assert ps.rcv([10.0, 10.0, 10.0, 10.0, 50.0]) == 0.0
    assert np.isclose(ps.rcv([9.0, 10.0, 11.0]), 1.4826 * 1.0 / 10.0)


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_bad_input_is_a_one_line_error(tmp_path):
    res = _run(str(tmp_path / "nothing"))
    assert res.returncode == 2 and res.stderr.strip().startswith("error: ") and "not a finished run folder" in res.stderr
    run = tmp_path / "run"
    run.mkdir()
    (run / "tasks.json").write_text("[]")
    with open(run / "config.yaml", "w") as fh:
        yaml.safe_dump({"target": {"kind": "cuda"}}, fh)
    res = _run(str(run))
    assert res.returncode == 2 and "valid: a run on this machine's CPU (llvm)" in res.stderr
    res = _run(str(run), "--processes", "1")
    assert res.returncode == 2 and res.stderr.strip() == "error: --processes 1: must be at least 2"
