"""target=table: replay, the search clock charged with recorded tool seconds (no sleeping), the
exhaustive method writing tables, the FPGA baselines and an FPGA experiment's metrics."""
import time

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import target_settings
from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.targets import make_target
from tunebench.targets.fpga import flow
from tunebench.targets.fpga.kernels import KERNELS
from tunebench.targets.fpga.table import default_table, read_table, write_table
from tunebench.targets.fpga.tasks import fpga_tasks
from tunebench.task import Measurement, Outcome

SYNTH_S, SIM_S, IMPL_S = 10.0, 0.5, 20.0


@pytest.fixture
def table_path(tmp_path):
    """A 3-fidelity table of hls_gemm built from the analytical estimate (objectives scaled per
    fidelity), with fixed tool seconds per stage so the clock arithmetic is known."""
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    from tunebench.targets.fpga.kernels import get_kernel

    k = get_kernel("gemm")
    ms = []
    for i in range(task.space.size):
        c = task.space.get(i)
        e = flow.estimate(k, c.to_dict()).metrics
        obj = {"delay_s": e["cycles"] / (e["fmax_mhz"] * 1e6), "luts": e["luts"], "ffs": e["ffs"]}
        ms.append(Measurement(task.id, c, Outcome.OK, fidelity="estimate", objectives=obj, stage_s={"estimate": 0.01}))
        bad = i == 5  # one design fails synth
        ms.append(Measurement(task.id, c, Outcome.INFEASIBLE if bad else Outcome.OK, fidelity="synth", error="synth: does not fit" if bad else "",
                              objectives={} if bad else {kk: v * 1.1 for kk, v in obj.items()},
                              stage_s={"sim": SIM_S, "synth": SYNTH_S}))
        ms.append(Measurement(task.id, c, Outcome.INFEASIBLE if bad else Outcome.OK, fidelity="impl", error="synth: does not fit" if bad else "",
                              objectives={} if bad else {kk: v * 1.2 for kk, v in obj.items()},
                              stage_s={} if bad else {"impl": IMPL_S}))
    path = tmp_path / "gemm.csv"
    write_table(str(path), task.space, ["estimate", "synth", "impl"], ["delay_s", "luts", "ffs"], ms)
    return str(path)


def _table_target(path):
    return make_target(target_settings("table", table=path))


def test_table_charges_recorded_tool_seconds(table_path):
    t = _table_target(table_path)
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    c = task.space.get(3)
    syn = t.measure(task, [c], "synth")[0]
    imp = t.measure(task, [c], "impl")[0]
    again = t.measure(task, [c], "impl")[0]
    assert syn.cost_s == SIM_S + SYNTH_S and imp.cost_s == IMPL_S and again.cost_s == 0
    fresh = t.measure(task, [task.space.get(4)], "impl")[0]  # impl from scratch: sim + synth + impl
    assert fresh.cost_s == SIM_S + SYNTH_S + IMPL_S
    bad = t.measure(task, [task.space.get(5)], "impl")[0]
    assert not bad.valid and "does not fit" in bad.error
    df = pd.read_csv(table_path)
    assert imp.objectives["luts"] == pytest.approx(df.loc[3, "impl.luts"])


def test_search_clock_includes_replayed_tool_time_without_sleeping(table_path):
    t = _table_target(table_path)
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    t0 = time.perf_counter()
    res = tune_task(task, make_method({"name": "random"}), t, Budget(6), np.random.default_rng(0))
    wall = time.perf_counter() - t0
    charged = sum(m.cost_s for m in res.measurements)
    assert charged >= 5 * (SIM_S + SYNTH_S + IMPL_S) - 1e-9  # at most one design is the failing one
    assert wall < 10 and charged <= res.search_s <= charged + wall
    assert all(a.search_s < b.search_s for a, b in zip(res.measurements, res.measurements[1:]))
    # the seconds budget counts the replayed time: batches of 3 designs x ~30 s -> stop after the 2nd batch
    res2 = tune_task(task, make_method({"name": "random"}), _table_target(table_path),
                     Budget(40, seconds_per_task=100.0), np.random.default_rng(1))
    assert res2.stop_reason == "seconds" and len(res2.measurements) == 6 and res2.search_s >= 100


@pytest.mark.parametrize("method", ["random", "ann", "bt", "nsga2", "motpe"])
def test_fpga_baselines_on_the_table(table_path, method):
    t = _table_target(table_path)
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    res = tune_task(task, make_method(method), t, Budget(20), np.random.default_rng(0))  # the method's defaults
    idx = [m.config.index for m in res.measurements]
    assert len(idx) == len(set(idx)) and 0 < len(idx) <= 20  # never a design twice
    assert all(m.fidelity == "impl" for m in res.measurements)
    if method in ("ann", "bt"):  # 25% of 36 = 9 initial designs, then the predicted Pareto designs
        assert len(idx) > 9 and res.stop_reason in ("exhausted", "trials")


def test_exhaustive_writes_a_table_that_replays(tmp_path, table_path):
    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    out = tmp_path / "copy.csv"
    res = tune_task(task, make_method({"name": "exhaustive", "out": str(out)}), _table_target(table_path),
                    Budget(1000), np.random.default_rng(0))
    assert len(res.measurements) == 3 * task.space.size and res.stop_reason == "exhausted"
    a = read_table(table_path, task.space, ["estimate", "synth", "impl"], ["delay_s", "luts", "ffs"])
    b = read_table(str(out), task.space, ["estimate", "synth", "impl"], ["delay_s", "luts", "ffs"])
    cols = [c for c in a.columns if c.split(".")[-1] in ("delay_s", "luts", "ffs", "valid", "tool_s")]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_dtype=False)


def test_exhaustive_writes_tables_only_with_the_writer_a_target_lends(table_path):
    """The table writer comes from the target (``TargetInfo.lends``): the FPGA targets lend it; ``method.out`` on
    a target that lends none is refused before the run."""
    from tunebench.testing.fakes import FakeTarget

    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    assert _table_target(table_path).task_info(task).lends["write_table"] is write_table
    method = make_method({"name": "exhaustive", "out": "t.csv"})
    assert method.check_task(task, _table_target(table_path).task_info(task)) is None
    assert "writes no design-space table" in method.check_task(task, FakeTarget().task_info(task))


def test_fpga_experiment_logs_adrs_and_hypervolume(tmp_path, table_path):
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config

    cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", "target=table",
                          f"target.table={table_path}", "model=hls_gemm", "method=bt", "method.n_init=8",
                          "budget.trials_per_task=16"])
    run_id = run_experiment(cfg)
    run = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(run_id)
    m = run.data.metrics
    assert 0 <= m["adrs"] < 10 and 0 < m["hypervolume"] <= 1
    # bt's learned front (its predicted Pareto designs) is a part of the designs measured at impl
    assert m["adrs_learned"] >= m["adrs"] and m["hypervolume_learned"] <= m["hypervolume"]
    assert m["tool_s"] >= 8 * (SIM_S + SYNTH_S + IMPL_S) - 31 and m["algorithm_s"] >= 0
    assert "e2e_latency_ms" not in m
    hist = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_metric_history(run_id, next(
        k for k in m if k.endswith(".adrs")))
    assert len(hist) == m["n_measurements"] and hist[-1].value == pytest.approx(m["adrs"])
    assert [h.value for h in hist][-1] <= [h.value for h in hist][0]  # ADRS never grows as designs arrive


def test_leaderboard_shows_adrs_and_hypervolume_mean_std(tmp_path, table_path):
    import argparse

    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config
    from tunebench.report.cli import run_leaderboard

    vals = []
    for seed in (0, 1):
        cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", "target=table",
                              f"target.table={table_path}", "model=hls_gemm", "method=random",
                              "budget.trials_per_task=8", f"seed={seed}"])
        rid = run_experiment(cfg)
        metrics = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(rid).data.metrics
        vals.append(metrics["adrs"])
        assert "adrs_learned" not in metrics  # random search has no learned front apart from what it measured
    args = argparse.Namespace(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment=["test"], model=None,
                              target=None, method=None, since=None, baseline="autotvm",
                              out=str(tmp_path / "lb"), no_plots=True)
    md = run_leaderboard(args)
    assert "| method | seeds | ADRS | hypervolume |" in md
    assert f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1):.4f}" in md


@pytest.mark.parametrize("over", [["model=hls_gemm", "target=llvm"], ["target=table"]])
def test_fpga_model_and_target_must_match(tmp_path, over):
    from tunebench.errors import UserError
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config

    cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", *over])
    with pytest.raises(UserError, match="do not go together"):
        run_experiment(cfg)


@pytest.mark.parametrize("kernel", KERNELS)
def test_shipped_table_matches_its_space_and_reference_point(kernel):
    """Every kernel ships a ground-truth table of its current pruned space (a space change without a
    regenerated table fails here), measured at all three fidelities, and the hypervolume reference point
    of both FPGA targets holds every valid impl design (otherwise designs would add no volume)."""
    for name in ("fpga_open", "table"):
        cfg = target_settings(name)
        task = fpga_tasks(MODEL_OPTIONS[f"hls_{kernel}"], "table")[0]
        df = read_table(default_table(kernel), task.space, cfg.fidelities, cfg.objectives)
        assert all((df[f"{f}.error"] != "not measured").all() for f in cfg.fidelities)
        ok = df["impl.valid"] == 1
        Y = df.loc[ok, [f"impl.{o}" for o in cfg.objectives]].to_numpy(dtype=float)
        scale = np.array([cfg.scale[o] for o in cfg.objectives])
        assert ok.sum() > 0 and (Y / scale < np.array(cfg.reference_point)).all()


def test_paper_tables_read_both_adrs_definitions():
    """Omega = every top-fidelity design for every method; the learned-front reading replaces it only
    where the method has a distinct learned front, and such cells are marked."""
    from tunebench.report.paper_tables import summarize, tables

    def row(method, seed, adrs, learned=None):
        doc = {"adrs": adrs, "hypervolume": 0.9, "tool_s": 10.0, "algorithm_s": 1.0, "n_top_fidelity": 20,
               "per_fidelity": {"impl": 20}, **({"adrs_learned": learned} if learned is not None else {})}
        from tunebench.report.paper_tables import run_rows
        cfg = {"target": {"kind": "table", "name": "table"}, "method": {"name": method},
               "model": {"name": "hls_gemm"}, "seed": seed}
        return run_rows(cfg, [doc])[0]

    rows = [row("ann", 0, 0.1, 0.3), row("ann", 1, 0.1, 0.5), row("nsga2", 0, 0.2), row("nsga2", 1, 0.4)]
    models, methods, out = summarize(rows)
    assert out[("hls_gemm", "ann")]["adrs_paper"] == pytest.approx(0.4)
    assert out[("hls_gemm", "nsga2")]["adrs_paper"] == pytest.approx(0.3)
    by_title = {t: cells for t, _, cells in tables(models, methods, out)}
    omega = next(c for t, c in by_title.items() if t.startswith("Normalized ADRS (mean"))
    paper = next(c for t, c in by_title.items() if t.startswith("Normalized ADRS, learned front only"))
    assert omega[0] == ["hls_gemm", "1.00", "3.00"]  # nsga2 0.3 / ann 0.1
    assert paper[0] == ["hls_gemm", "1.00*", "0.75"]  # nsga2 0.3 / ann's learned front 0.4


def test_table_declares_fidelity_costs_from_its_recorded_seconds(table_path):
    """T_f = the recorded seconds of the stages a report at f needs from scratch (means over the designs)."""
    from tunebench.targets.fpga.common import cumulative_costs, stage_chain

    task = fpga_tasks(MODEL_OPTIONS["hls_gemm"], "table")[0]
    costs = _table_target(table_path).task_info(task).fidelity_costs
    assert costs == pytest.approx({"estimate": 0.01, "synth": SIM_S + SYNTH_S, "impl": SIM_S + SYNTH_S + IMPL_S})
    assert cumulative_costs({"estimate": 1.0, "sim": 2.0}, ["estimate", "synth"], stage_chain) is None  # synth unseen


def test_the_interval_table_normalizes_by_the_baselines_mean_and_median():
    """ADRS 0.1, 0.2, 0.3 for ann and 0.05, 0.05, 0.5 for cgp: mean ratio 0.6 / 0.6 = 1.00, medians 0.05 / 0.2."""
    from tunebench.report.paper_tables import interval_table

    rows = [{"model": "k", "method": m, "adrs": a} for m, vals in (("ann", (0.1, 0.2, 0.3)), ("cgp", (0.05, 0.05, 0.5)))
            for a in vals] + [{"model": "k", "method": "cgp", "adrs": None}]
    title, headers, cells = interval_table(rows, ["k"], ["ann", "cgp", "bt"])
    assert "95 % bootstrap interval" in title and headers == ["kernel", "ann", "cgp", "bt"]
    assert cells[0][0] == "k" and cells[0][3] == "—"
    assert cells[0][2].startswith("1.00 [") and cells[0][2].endswith("; 0.25")
    lo, hi = (float(x) for x in cells[0][2].split("[")[1].split("]")[0].split(", "))
    assert lo < 1.0 < hi
