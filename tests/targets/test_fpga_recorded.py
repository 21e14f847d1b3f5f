"""Recorded FPGA design spaces (data/fpga_recorded/): the converter's readers on excerpts of both sources
(tests/data/fpga_recorded/: HGBO-DSE gemm samples 0-1 and stencil3d samples 42-44, Spector mm designs
0-5), the shipped tables and their checksums, replay on target=table, and a small front checked by hand."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil

import numpy as np
import pytest
import scipy.io

from conftest import ROOT, target_settings
from tunebench.datasets import fpga_recorded
from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.errors import UserError
from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.pareto import adrs, pareto_front
from tunebench.search_space import Config
from tunebench.targets import make_target

EXCERPTS = os.path.join(os.path.dirname(__file__), "..", "data", "fpga_recorded")


def _converter():
    spec = importlib.util.spec_from_file_location("convert", os.path.join(ROOT, "scripts", "convert_fpga_recorded.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _excerpt(name: str) -> bytes:
    with open(os.path.join(EXCERPTS, name), "rb") as f:
        return f.read()


def test_machsuite_reader_delay_is_worst_latency_times_each_stages_period():
    df = _converter().machsuite_rows(_excerpt("gemm_excerpt.zip")).set_index("sample")
    # ppa_1.json: worst_latency 1101953; CP HLS 6.886, SYN 5.171, IMPL 7.826 ns; IMPL LUT 3585, PWR 0.323 W
    assert df.loc[1, "estimate.delay_s"] == pytest.approx(1101953 * 6.886e-9)
    assert df.loc[1, "synth.delay_s"] == pytest.approx(1101953 * 5.171e-9)
    assert df.loc[1, "impl.delay_s"] == pytest.approx(1101953 * 7.826e-9)
    assert (df.loc[1, "estimate.luts"], df.loc[1, "synth.luts"], df.loc[1, "impl.luts"]) == (6223, 3699, 3585)
    assert df.loc[1, "impl.power_w"] == 0.323 and "estimate.power_w" not in df.columns
    assert df["impl.valid"].tolist() == [1, 1]


def test_machsuite_reader_failed_design_is_invalid_and_placeholder_latency_gives_no_delay():
    df = _converter().machsuite_rows(_excerpt("stencil3d_excerpt.zip")).set_index("sample")
    assert "impl.delay_s" not in df.columns  # "Latency": 1000 only, no worst_latency
    for f in ("estimate", "synth", "impl"):  # sample 43 records 1e8 everywhere
        assert df.loc[43, f"{f}.valid"] == 0 and np.isnan(df.loc[43, f"{f}.luts"])
        assert "1e+08" in df.loc[43, f"{f}.error"]
        assert df.loc[42, f"{f}.valid"] == 1
    assert (df.loc[42, "estimate.luts"], df.loc[42, "impl.luts"], df.loc[42, "impl.power_w"]) == (591, 197, 0.245)


def test_spector_reader_estimate_and_board_values():
    mat = scipy.io.loadmat(io.BytesIO(_excerpt("mm_excerpt.mat")))
    est = scipy.io.loadmat(io.BytesIO(_excerpt("mm_est_tp_excerpt.mat")))
    df = _converter().spector_rows(mat, est)
    assert len(df) == 6 and df["k:compute_units"].tolist()[:2] == ["1", "2"]
    assert df.loc[0, "impl.runtime"] == pytest.approx(2014.716162) and df.loc[0, "impl.alms"] == 55551
    assert df.loc[0, "estimate.alms"] == pytest.approx(0.22 * 234720)  # 22 % of the 5SGXEA7's ALMs
    assert df.loc[0, "estimate.runtime"] == pytest.approx(4.73164477)
    assert df["impl.valid"].sum() == 6
    no_est = _converter().spector_rows(mat, None)
    assert "estimate.valid" not in no_est.columns


def test_shipped_tables_match_the_manifest():
    m = fpga_recorded.manifest()
    assert m["origin"]["machsuite"]["commit"].startswith("d12d17f")
    assert m["origin"]["spector"]["commit"].startswith("a24a9cc")
    names = fpga_recorded.recorded_names()
    assert len([n for n in names if n.startswith("machsuite_")]) == 10
    assert sum(m["models"][n]["designs"] for n in names if n.startswith("spector_")) == 9992
    for n in ("machsuite_gemm", "spector_nw"):
        task = fpga_recorded.recorded_task(n, "table")
        assert task.space.size == m["models"][n]["designs"]
    size = sum(os.path.getsize(os.path.join(fpga_recorded.ROOT, m["models"][n]["file"])) for n in names)
    assert size < 10e6


def _copy_data(tmp_path, monkeypatch):
    root = tmp_path / "fpga_recorded"
    shutil.copytree(fpga_recorded.ROOT, root)
    monkeypatch.setattr(fpga_recorded, "ROOT", str(root))
    fpga_recorded._read.cache_clear()
    return root


def test_an_edited_or_missing_table_is_refused(tmp_path, monkeypatch):
    root = _copy_data(tmp_path, monkeypatch)
    path = root / "spector" / "dct.csv.gz"
    raw = path.read_bytes()
    path.write_bytes(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    with pytest.raises(UserError, match="spector_dct was changed: sha256"):
        fpga_recorded.verify("spector_dct")
    path.unlink()
    with pytest.raises(UserError, match="spector_dct is missing"):
        fpga_recorded.recorded_task("spector_dct", "table")
    fpga_recorded._read.cache_clear()


def test_unknown_kernel_fidelity_and_objective_name_what_is_valid():
    with pytest.raises(UserError, match="not a recorded design space; valid: machsuite_aes, "):
        fpga_recorded.entry("machsuite_gemmm")
    with pytest.raises(UserError, match="spector_nw has no fidelity 'estimate'; valid: impl"):
        fpga_recorded.check_settings("spector_nw", ["estimate", "impl"], ["runtime"])
    with pytest.raises(UserError, match="records no 'power_w' at synth"):
        fpga_recorded.check_settings("machsuite_gemm", ["synth", "impl"], ["delay_s", "power_w"])
    with pytest.raises(UserError, match="records no 'delay_s' at estimate"):
        fpga_recorded.check_settings("machsuite_stencil3d", ["estimate"], ["delay_s"])


def _target_and_task(name: str):
    target = make_target(target_settings("table"))
    tasks, _ = target.load_tasks(MODEL_OPTIONS[name])
    return target, tasks[0]


def test_table_target_takes_the_data_sets_defaults():
    target, task = _target_and_task("spector_nw")
    assert target.fidelities == ["impl"] and target.objectives == ["runtime", "alms"]
    assert target.reference_point == [1.1, 1.1] and target.capacity["alms"] == 234720
    target, task = _target_and_task("machsuite_gemm")
    assert target.fidelities == ["estimate", "synth", "impl"] and target.objectives == ["delay_s", "luts", "ffs"]
    # [Sun-PhD] Table 3.1, GEMM: HLS 137.75 s, synthesis 1379.67 s, implementation 1744.61 s, one after the other
    costs = target.task_info(task).fidelity_costs
    assert costs == pytest.approx({"estimate": 137.75, "synth": 137.75 + 1379.67, "impl": 137.75 + 1379.67 + 1744.61})
    m = target.measure(task, [task.space.get(0)], "synth")[0]
    assert m.valid and m.cost_s == pytest.approx(137.75 + 1379.67)
    m = target.measure(task, [task.space.get(0)], "impl")[0]  # HLS and synthesis already charged for design 0
    assert m.valid and m.objectives["luts"] == 14734 and m.cost_s == pytest.approx(1744.61)


@pytest.mark.parametrize("name", fpga_recorded.recorded_names())
def test_defaults_suit_adrs_and_hypervolume_on_every_recorded_model(name):
    """With its defaults, every valid design of a model has positive objectives at the top fidelity (ADRS
    divides by the true front) and lies inside the reference point after scaling (it adds volume)."""
    target, task = _target_and_task(name)
    df = target.table_for(task)
    top = target.fidelities[-1]
    Y = df.loc[df[f"{top}.valid"] == 1, [f"{top}.{o}" for o in target.objectives]].to_numpy(dtype=float)
    assert len(Y) > 0 and (Y > 0).all()
    assert (Y / np.array(target.scale) <= 1.0).all() and min(target.reference_point) > 1.0


def test_a_design_outside_the_table_is_an_invalid_measurement():
    target, task = _target_and_task("spector_mm")
    space = task.space
    inside = space.get(3)
    values = list(inside.values)
    values[0] = "no such value"
    outside = [Config(3, tuple(values), tuple(space.names)), Config(space.size + 5, inside.values, inside.names)]
    ms = target.measure(task, [inside, *outside], "impl")
    assert ms[0].valid
    assert [m.valid for m in ms[1:]] == [False, False]
    assert all(m.error.startswith("not a design of the table") for m in ms[1:])


def test_pareto_front_and_adrs_of_spector_mm_excerpt_by_hand():
    """(runtime, alms) of mm designs 0-5 after fitting, from the excerpt."""
    Y = np.array([[2014.716162, 55551], [1060.186963, 69700], [1696.106006, 55948], [1525.65542, 70530],
                  [1041.54624, 62686], [618.350635, 77601]])
    # 1 is dominated by 4 (1041.5 < 1060.2, 62686 < 69700), 3 by 1 and 4; 0, 2, 4, 5 are Pareto-optimal
    assert pareto_front(Y).tolist() == [0, 2, 4, 5]
    G = Y[[0, 2, 4, 5]]
    # W = {0, 5}: g0 and g5 are matched (0); g2: min(w0: (2014.716162-1696.106006)/1696.106006,
    # w5: (77601-55948)/55948); g4: min(w0: (2014.716162-1041.54624)/1041.54624, w5: (77601-62686)/62686)
    g2 = min(318.610156 / 1696.106006, 21653 / 55948)
    g4 = min(973.169922 / 1041.54624, 14915 / 62686)
    assert g2 == pytest.approx(0.18785, abs=1e-5) and g4 == pytest.approx(0.23793, abs=1e-5)
    assert adrs(G, Y[[0, 5]]) == pytest.approx((0 + g2 + g4 + 0) / 4)
    assert adrs(G, Y) == 0.0


FAST = {"cgp": {"max_iterations": 4}, "fpl18": {"max_iterations": 4}, "mes": {"max_iterations": 4, "mes_samples": 5},
        "dcgp": {"max_iterations": 3, "deep_kernel": [32, 16, 6], "fit_steps": 30, "refit_steps": 10}}
METHODS = ["exhaustive", "ann", "bt", "nsga2", "motpe", "cgp", "dcgp", "fpl18", "dac19", "mes"]


@pytest.mark.parametrize("name", ["machsuite_gemm", "spector_dct"])
@pytest.mark.parametrize("method", METHODS)
def test_every_fpga_method_runs_on_a_recorded_kernel(method, name):
    target, task = _target_and_task(name)
    trials = 40 if method != "exhaustive" else 12
    res = tune_task(task, make_method({"name": method, **FAST.get(method, {})}), target, Budget(trials),
                    np.random.default_rng(0))
    assert 0 < len(res.measurements) <= trials
    assert set(m.fidelity for m in res.measurements) <= set(target.fidelities)
    top = [m for m in res.measurements if m.fidelity == target.fidelities[-1]]
    assert top and all(m.valid and set(m.objectives) == set(target.objectives) for m in top)


def test_runs_on_both_data_sets_appear_in_the_paper_tables(tmp_path):
    import argparse

    from mlflow.tracking import MlflowClient

    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config
    from tunebench.report.cli import add_arguments, run_leaderboard

    for model, method in (("machsuite_gemm", "ann"), ("machsuite_gemm", "nsga2"), ("spector_nw", "ann"),
                          ("spector_nw", "nsga2")):
        cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", "target=table",
                              f"model={model}", f"method={method}", "budget.trials_per_task=60"])
        m = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(run_experiment(cfg)).data.metrics
        assert 0 <= m["adrs"] < 10 and 0 < m["hypervolume"] <= 1  # against the recorded table's true front
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--experiment", "test",
                              "--layout", "paper-tables", "--out", str(tmp_path / "lb"), "--no-plots"])
    md = run_leaderboard(args)
    assert "| machsuite_gemm | 1.00 |" in md and "| spector_nw | 1.00 |" in md  # ann = 1.00
