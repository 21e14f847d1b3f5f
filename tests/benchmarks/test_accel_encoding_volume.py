"""benchmarks/accel_encoding_volume.py: the share of the encoding's cube per energy, on the paper's matrix product."""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import accel_encoding_volume as vol


def test_shares_of_the_lowest_energies_over_sobol_points():
    pytest.importorskip("zigzag")
    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    target = AccelTarget(AccelSettings())
    task = target.load_tasks(MODEL_OPTIONS["accel_paper"])[0][0]
    r = vol.volumes(task, target, "scores", 64, 3)
    values = [lv["pj_per_mac"] for lv in r["levels"]]
    assert values == sorted(values) and len(values) == 3 and r["invalid_share"] == 0.0  # valid by construction
    assert 1 <= r["distinct_mappings"] <= 64 and sum(lv["mappings"] for lv in r["levels"]) <= r["distinct_mappings"]
    assert all(0 < lv["share"] <= 1 for lv in r["levels"]) and sum(lv["share"] for lv in r["levels"]) <= 1 + 1e-9
    p = r["p_lowest_within"]
    assert p[10] == pytest.approx(1 - (1 - r["levels"][0]["share"]) ** 10) and p[10] < p[30] < p[100] <= 1


def test_a_product_size_below_one_is_one_error_line(tmp_path):
    import subprocess

    out = tmp_path / "v.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "accel_encoding_volume.py"), "--product", "0",
                        "5", "5", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "error: --product 0 5 5: every size must be at least 1"
    assert not out.exists()
