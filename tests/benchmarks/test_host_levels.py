"""benchmarks/host_levels.py: two levels of a kernel's time found, a probe's separation of them, bad input."""
import json
import os
import subprocess
import sys

import numpy as np

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import host_levels as hl

SCRIPT = os.path.join(ROOT, "benchmarks", "host_levels.py")


def test_two_levels_are_split_at_the_gap_and_one_level_is_none():
    rng = np.random.default_rng(0)
    k = np.concatenate([rng.normal(0.139, 0.001, 300), rng.normal(0.191, 0.001, 500)])
    slow = hl.levels(k)
    assert slow is not None and slow.sum() == 500 and slow[300:].all()
    assert hl.levels(rng.normal(0.14, 0.001, 800)) is None  # no gap wider than 5 % of the median


def test_a_probe_that_tracks_the_levels_separates_them_and_noise_does_not():
    rng = np.random.default_rng(1)
    slow = np.arange(600) >= 200
    tracks = np.where(slow, 0.183, 0.171) + rng.normal(0, 0.0005, 600)
    s = hl.separation(tracks, slow)
    assert s["threshold_accuracy"] == 1.0 and abs(s["slow_over_fast"] - 0.183 / 0.171) < 0.01
    inverse = hl.separation(-tracks + 1.0, slow)  # slower when the kernel is faster: the threshold's other side
    assert inverse["threshold_accuracy"] == 1.0 and inverse["slow_over_fast"] < 1
    noise = hl.separation(rng.normal(1.0, 0.1, 600), slow)
    assert noise["threshold_accuracy"] < 0.75


def test_a_short_run_writes_its_cycles_and_analysis(tmp_path):
    out = tmp_path / "h.json"
    r = subprocess.run([sys.executable, SCRIPT, "--seconds", "1", "--repeat", "3", "--threads", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["analysis"]["cycles"] == len(d["cycles"]) >= 1 and d["args"]["threads"] == 1
    assert {"kernel", "matmul", "copy", "t_s"} <= set(d["cycles"][0]) and all(v > 0 for v in d["cycles"][0].values()
                                                                               if v != d["cycles"][0]["t_s"])


def test_bad_input_is_one_error_line(tmp_path):
    out = tmp_path / "h.json"
    r = subprocess.run([sys.executable, SCRIPT, "--seconds", "0", "--out", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "error: --seconds 0.0: must be positive" and not out.exists()
