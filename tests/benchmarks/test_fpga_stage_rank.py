"""benchmarks/fpga_stage_rank.py: Spearman rho between stages over the designs valid at both."""
import json
import os
import sys

import pandas as pd
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import fpga_stage_rank as rank


def test_rho_by_hand_invalid_designs_left_out_constant_objective_has_none():
    df = pd.DataFrame({
        "estimate.luts": [1, 2, 3, 4, 99], "estimate.dsps": [1, 1, 1, 1, 1], "estimate.valid": [1, 1, 1, 1, 1],
        "impl.luts": [10, 30, 20, 40, None], "impl.dsps": [2, 3, 4, 5, None], "impl.power_w": [1, 2, 3, 4, None],
        "impl.valid": [1, 1, 1, 1, 0]})
    res = rank.stage_pairs(df, ["estimate", "impl"])["estimate~impl"]
    # ranks 1,2,3,4 vs 1,3,2,4: d = 0,1,1,0; rho = 1 - 6*2 / (4*(16-1)) = 0.8; design 4 is invalid at impl
    assert res["luts"] == (0.8, 4)
    assert res["dsps"] == (None, 4)  # constant at estimate
    assert "power_w" not in res  # not reported at estimate


def test_shipped_result_file_is_what_the_script_computes():
    with open(os.path.join(ROOT, "benchmarks", "results", "fpga_stage_rank.json")) as f:
        saved = {r["kernel"]: r for r in json.load(f)["results"]}
    for name, _, df, fids in rank.tables():
        if name in ("machsuite_gemm", "spector_mm", "open_gemm"):
            pairs = json.loads(json.dumps(rank.stage_pairs(df, fids)))  # tuples -> lists, as saved
            assert pairs == saved[name]["pairs"]
    assert saved["machsuite_gemm"]["pairs"]["estimate~impl"]["luts"][0] == pytest.approx(0.885, abs=1e-3)
