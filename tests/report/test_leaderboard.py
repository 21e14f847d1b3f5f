"""Leaderboard tests on a hand-made MLflow store.

Every run below is a TEST FIXTURE with invented metric values (no tuning happened): two models on
``llvm``, methods autotvm (the baseline), dgp and random, several seeds, plus a FAILED run, an old run
(2024), an older duplicate of autotvm seed 0, and a run whose record file exists only as an artifact.
These runs lack the protocol metrics (medians, intervals, noise flags, peak). A third model (mobilenet)
has them: on ``llvm`` autotvm, ga (3 seeds each), rs (2 seeds) and sa (1 seed), and one autotvm run on
``cuda`` with the TF32 baseline.
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from tunebench import report as lb
from tunebench.__main__ import build_parser
from tunebench.errors import UserError

DAY = 86_400_000
JUNE_2025 = 1_748_736_000_000  # 2025-06-01 00:00 UTC in ms
MARCH_2024 = 1_709_251_200_000  # 2024-03-01 00:00 UTC

TASKS = [{"id": "aaaa", "name": "conv_a", "weight": 2}, {"id": "bbbb", "name": "conv_b", "weight": 1}]
# Hand-made record latencies (ms; None = invalid) for the curve test: task aaaa, then task bbbb.
CURVE_LAT = {"aaaa": [None, 3.0, 2.0], "bbbb": [5.0, 4.0, 6.0]}
FLAT_LAT = {"aaaa": [3.0, 2.5], "bbbb": [5.0, 4.5]}


def fixture_records(lat_ms: dict) -> tuple[list[dict], list[dict]]:
    """Record lines and tasks.json for invented latencies: trial t arrives at search_s = t + 1; each task's
    final clock is its trial count + 0.5 s."""
    records, tasks = [], []
    for task in TASKS:
        for trial, ms in enumerate(lat_ms[task["id"]]):
            records.append({"task_id": task["id"], "trial": trial, "valid": ms is not None,
                            "latency_s": ms / 1e3 if ms is not None else None, "search_s": trial + 1.0,
                            "task_name": task["name"], "flops": 1000})
        tasks.append({**task, "search_s": len(lat_ms[task["id"]]) + 0.5,
                      "best_latency_ms": min((m for m in lat_ms[task["id"]] if m is not None), default=None)})
    return records, tasks


def spec(exp, model, method, seed, start, lat=FLAT_LAT, status="FINISHED", local=True, target="llvm", tags=None,
         **metrics):
    """One fixture run: where it goes, its tags, start time (ms), invented metrics and record latencies;
    ``local=False`` tags a record path that is not on this machine (the artifact must be used)."""
    return dict(exp=exp, model=model, method=method, seed=seed, start=start, lat=lat, status=status,
                local=local, target=target, tags=tags or {}, metrics=metrics)


R18 = "resnet18"
RUNS = [
    # an older duplicate of autotvm seed 0: set aside in favour of the later run
    spec("bench", R18, "autotvm", 0, JUNE_2025 - DAY, search_time_s=99999, e2e_latency_ms=9.0),
    spec("bench", R18, "autotvm", 0, JUNE_2025, search_time_s=3600, n_measurements=100, e2e_latency_ms=2.0,
         e2e_latency_std_ms=0.01, torch_latency_ms=4.0, tvm_default_latency_ms=3.0),
    spec("bench", R18, "autotvm", 1, JUNE_2025 + 1, search_time_s=5400, n_measurements=120, e2e_latency_ms=2.2,
         torch_latency_ms=4.4, tvm_default_latency_ms=3.2),
    spec("bench", R18, "dgp", 0, JUNE_2025 + 2, lat=CURVE_LAT, search_time_s=1800, n_measurements=60,
         e2e_latency_ms=1.8, torch_latency_ms=4.0, tvm_default_latency_ms=3.0),
    spec("bench", R18, "dgp", 1, JUNE_2025 + 3, lat=CURVE_LAT, local=False, search_time_s=2700, n_measurements=60,
         e2e_latency_ms=1.9, torch_latency_ms=3.8, tvm_default_latency_ms=3.0),
    spec("bench", R18, "dgp", 2, JUNE_2025 + 4, search_time_s=900, n_measurements=63, e2e_latency_ms=1.7,
         torch_latency_ms=3.4, tvm_default_latency_ms=3.0),
    spec("bench", R18, "dgp", 3, JUNE_2025 + 5, status="FAILED", search_time_s=1, e2e_latency_ms=0.1),
    spec("bench", R18, "random", 0, JUNE_2025 + 6, search_time_s=4500, n_measurements=100, tasks_latency_ms=11.0),
    spec("bench", R18, "random", 1, MARCH_2024, search_time_s=100, n_measurements=100, e2e_latency_ms=1.0),
    # a second model in a second experiment, without a baseline run
    spec("zoo2", "alexnet", "dgp", 0, JUNE_2025 + 7, search_time_s=600, e2e_latency_ms=1.2),
    spec("zoo2", "alexnet", "dgp", 1, JUNE_2025 + 8, search_time_s=800, e2e_latency_ms=1.4),
    spec("zoo2", "alexnet", "random", 0, JUNE_2025 + 9, search_time_s=700, e2e_latency_ms=1.5),
]

# Runs with the protocol metrics and tags (invented values).
MB = "mobilenet"
CPU2 = {"precision": "float32", "threads": "2", "device": "fixture-cpu"}
BASE_T, BASE_L = [3000.0, 3300.0, 3600.0], [2.0, 2.2, 1.8]
GA_T, GA_L, GA_SPEEDUP = [1000.0, 1100.0, 1200.0], [1.9, 2.1, 2.0], [2.1, 1.9, 2.0]
RS_T, RS_L = [6000.0, 6600.0], [2.5, 2.6]


def protocol_run(method, seed, t, lat, speedup, tags=CPU2, **extra):
    metrics = dict(search_time_s=t, e2e_latency_ms=lat, torch_latency_ms=4.0, speedup_vs_torch=speedup,
                   speedup_vs_torch_ci_low=speedup * 0.95, speedup_vs_torch_ci_high=speedup * 1.05,
                   torch_compile_latency_ms=3.0, speedup_vs_torch_compile=3.0 / lat, e2e_noisy=0.0, torch_noisy=0.0,
                   torch_compile_noisy=0.0, tvm_default_latency_ms=3.0, tvm_default_noisy=0.0, n_noisy_tasks=0.0,
                   n_noisy_measurements=0.0, peak_gflops=100.0, peak_mem_gbps=20.0, tasks_gflops=30.0, pct_peak=30.0,
                   tasks_latency_ms=lat * 0.9, n_measurements=50)
    start = JUNE_2025 + 100 + 10 * seed + len(method)
    return spec("bench", MB, method, seed, start, tags=tags, **{**metrics, **extra})


RUNS += [
    *(protocol_run("autotvm", s, BASE_T[s], BASE_L[s], 4.0 / BASE_L[s]) for s in range(3)),
    protocol_run("ga", 0, GA_T[0], GA_L[0], GA_SPEEDUP[0], pct_peak=40.0),
    protocol_run("ga", 1, GA_T[1], GA_L[1], GA_SPEEDUP[1], pct_peak=42.0, torch_noisy=1.0),  # noisy PyTorch baseline
    protocol_run("ga", 2, GA_T[2], GA_L[2], GA_SPEEDUP[2], pct_peak=44.0, n_noisy_tasks=2.0, peak_gflops=104.0),
    protocol_run("rs", 0, RS_T[0], RS_L[0], 4.0 / RS_L[0]),
    protocol_run("rs", 1, RS_T[1], RS_L[1], 4.0 / RS_L[1], e2e_noisy=1.0),  # noisy tuned model
    # a single seed on one thread, with its own interval over the interleaved rounds
    protocol_run("sa", 0, 2000.0, 1.6, 2.5, tags={**CPU2, "threads": "1"}, speedup_vs_torch_ci_low=2.4,
                 speedup_vs_torch_ci_high=2.6, peak_gflops=52.0),
    spec("bench", MB, "autotvm", 0, JUNE_2025 + 200, target="cuda",
         tags={"precision": "float32 (TF32 off)", "threads": "GPU", "device": "fixture-gpu"},
         search_time_s=500, e2e_latency_ms=0.5, torch_latency_ms=0.6, speedup_vs_torch=1.2,
         speedup_vs_torch_ci_low=1.1, speedup_vs_torch_ci_high=1.3, torch_tf32_latency_ms=0.45,
         speedup_vs_torch_tf32=0.9, speedup_vs_torch_tf32_ci_low=0.85, speedup_vs_torch_tf32_ci_high=0.95,
         e2e_noisy=0.0, torch_noisy=0.0, torch_tf32_noisy=0.0),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A SQLite MLflow store holding the fixture runs; returns its URI."""
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("lbstore")
    uri = f"sqlite:///{root}/mlflow.db"
    client = MlflowClient(uri)
    exps = {name: client.create_experiment(name, artifact_location=str(root / "mlartifacts" / name))
            for name in ("bench", "zoo2")}
    for i, r in enumerate(RUNS):
        run = client.create_run(exps[r["exp"]], start_time=r["start"], run_name=f"fixture-{i}",
                                tags={"method": r["method"], "model": r["model"], "target": r["target"],
                                      "seed": str(r["seed"]), "device": "fixture", "git_commit": "fixture",
                                      **r["tags"]})
        run_id = run.info.run_id
        run_dir = root / "records" / run_id
        run_dir.mkdir(parents=True)
        records, tasks = fixture_records(r["lat"])
        (run_dir / "records.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in records))
        (run_dir / "tasks.json").write_text(json.dumps(tasks))
        for name in ("records.jsonl", "tasks.json"):
            client.log_artifact(run_id, str(run_dir / name))
        record_tag = str(run_dir / "records.jsonl") if r["local"] else f"/not/on/this/machine/{run_id}/records.jsonl"
        client.log_batch(run_id, tags=[RunTag(lb.RECORD_TAG, record_tag)],
                         metrics=[Metric(k, v, r["start"], 0) for k, v in r["metrics"].items()])
        client.set_terminated(run_id, status=r["status"])
    return uri


def board(store, tmp_path, *options, target="llvm"):
    """Run the leaderboard through the CLI parser; returns (rows of ``target`` as dicts keyed by (model, method),
    markdown)."""
    args = build_parser().parse_args(["leaderboard", "--tracking-uri", store, "--out", str(tmp_path / "lb"),
                                      *options])
    markdown = lb.run_leaderboard(args)
    table = pd.read_csv(tmp_path / "lb" / "leaderboard.csv", keep_default_na=False, na_values=[""])
    return {(r["model"], r["method"]): r for r in table.to_dict("records") if r["target"] == target}, markdown


def test_aggregates_and_hv(store, tmp_path):
    rows, _ = board(store, tmp_path, "--no-plots")
    dgp, base, rnd = rows[(R18, "dgp")], rows[(R18, "autotvm")], rows[(R18, "random")]
    # FAILED seed 3 is excluded; means and sample stds over seeds 0, 1, 2
    assert (dgp["n_seeds"], dgp["seeds"]) == (3, "0,1,2")
    assert dgp["search_time_s_mean"] == pytest.approx(1800.0)
    assert dgp["search_time_s_std"] == pytest.approx(900.0)
    assert dgp["search_time_h_mean"] == pytest.approx(0.5)
    assert dgp["n_measurements_mean"] == pytest.approx(61.0)
    assert dgp["e2e_latency_ms_mean"] == pytest.approx(1.8)
    assert dgp["e2e_latency_ms_std"] == pytest.approx(0.1)
    assert dgp["speedup_vs_torch_mean"] == pytest.approx((4.0 / 1.8 + 3.8 / 1.9 + 3.4 / 1.7) / 3)
    assert dgp["tvm_default_latency_ms_mean"] == pytest.approx(3.0)
    # the older duplicate of autotvm seed 0 (search 99999 s) is set aside: T_base = 4500, L_base = 2.1
    assert base["n_seeds"] == 2 and base["search_time_s_mean"] == pytest.approx(4500.0)
    assert base["e2e_latency_ms_mean"] == pytest.approx(2.1)
    # by hand: search_red = 1 - 1800/4500 = 0.6, latency_red = 1 - 1.8/2.1 = 1/7, HV = 0.6 * (1/7) * 100
    assert dgp["search_red_pct"] == pytest.approx(60.0)
    assert dgp["latency_red_pct"] == pytest.approx(100 / 7)
    assert dgp["hv_vs_baseline"] == pytest.approx(0.6 * (1 / 7) * 100)  # 8.5714
    assert (base["search_red_pct"], base["latency_red_pct"], base["hv_vs_baseline"]) == (0, 0, 0)
    assert bool(base["is_baseline"]) and not bool(dgp["is_baseline"])
    # random: seed 1 (e2e 1.0) and seed 0 (no e2e metrics); the run without e2e still counts elsewhere
    assert rnd["n_seeds"] == 2 and rnd["search_time_s_mean"] == pytest.approx(2300.0)
    assert rnd["e2e_latency_ms_mean"] == pytest.approx(1.0) and rnd["n_e2e"] == 1
    assert rnd["tasks_latency_ms_mean"] == pytest.approx(11.0)


def test_run_without_e2e_has_blank_cells(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots", "--since", "2025-01-01")
    rnd = rows[(R18, "random")]
    assert rnd["n_seeds"] == 1 and rnd["seeds"] == "0"  # the 2024 run is filtered out
    for col in ("e2e_latency_ms_mean", "speedup_vs_torch_mean", "latency_red_pct", "hv_vs_baseline"):
        assert math.isnan(rnd[col])
    assert rnd["search_red_pct"] == pytest.approx(0.0)  # 4500 s, as the baseline's mean
    section = markdown.split("## resnet18 on llvm")[1]
    line = next(l for l in section.splitlines() if l.startswith("| random"))
    assert line.endswith("| 0.00 |  |  |")  # search red. 0.00, latency red. and HV blank


def test_missing_baseline(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots")
    for method in ("dgp", "random"):
        row = rows[("alexnet", method)]
        assert all(math.isnan(row[c]) for c in ("search_red_pct", "latency_red_pct", "hv_vs_baseline"))
        assert "no FINISHED `autotvm` run" in row["note"]
    assert rows[("alexnet", "dgp")]["e2e_latency_ms_mean"] == pytest.approx(1.3)
    section = markdown.split("## alexnet on llvm")[1].split("## ")[0]
    assert "no FINISHED `autotvm` run for this model and target" in section
    # another baseline gives alexnet its reductions: dgp against random
    rows, _ = board(store, tmp_path, "--no-plots", "--baseline", "random", "--model", "alexnet")
    assert rows[("alexnet", "dgp")]["search_red_pct"] == pytest.approx((1 - 700 / 700) * 100)
    assert rows[("alexnet", "dgp")]["latency_red_pct"] == pytest.approx((1 - 1.3 / 1.5) * 100)


def test_filters(store, tmp_path):
    rows, _ = board(store, tmp_path, "--no-plots", "--model", R18)
    assert {m for m, _ in rows} == {R18}
    rows, _ = board(store, tmp_path, "--no-plots", "--experiment", "zoo2")
    assert set(rows) == {("alexnet", "dgp"), ("alexnet", "random")}
    # --method picks rows; the baseline is still read, so HV stays the same
    rows, _ = board(store, tmp_path, "--no-plots", "--method", "dgp", "--model", R18)
    assert list(rows) == [(R18, "dgp")]
    assert rows[(R18, "dgp")]["hv_vs_baseline"] == pytest.approx(60 / 7)
    rows, _ = board(store, tmp_path, "--no-plots", "--method", "dgp,random", "--target", "cuda")
    assert rows == {}
    assert "No FINISHED runs match the filters." in (tmp_path / "lb" / "leaderboard.md").read_text()
    with pytest.raises(UserError, match="--experiment='nope' is unknown; valid: Default, bench, zoo2"):
        board(store, tmp_path, "--experiment", "nope")


def test_files_markdown_and_plots(store, tmp_path):
    _, markdown = board(store, tmp_path)
    out = tmp_path / "lb"
    assert (out / "leaderboard.md").read_text() == markdown
    assert (out / "leaderboard.csv").stat().st_size > 0
    for png in ("curves_resnet18_llvm.png", "curves_alexnet_llvm.png", "optimum_resnet18_llvm.png",
                "optimum_alexnet_llvm.png", "optimum_mobilenet_llvm.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in markdown
    assert "![fraction of the optimum reached, resnet18 on llvm](optimum_resnet18_llvm.png)" in markdown
    header = next(l for l in markdown.splitlines() if l.startswith("| method"))
    for unit in ("search [h]", "search [s]", "e2e latency [ms]", "speedup vs PyTorch [×]", "TVM default [ms]",
                 "search red. [%]", "HV vs autotvm"):
        assert unit in header
    assert "| dgp | 3 (0,1,2) | 0.50 ± 0.25 | 1800.0 ± 900.0 | 61 |" in markdown
    assert "| autotvm (baseline) | 2 (0,1) |" in markdown
    assert "1 older run(s) with the same (model, target, method, seed) set aside" in markdown
    assert "no curve" not in markdown  # also the run whose records exist only as an artifact


def test_model_curve_definition():
    records, tasks = fixture_records(CURVE_LAT)
    curve = lb.model_curve(records, tasks)
    # aaaa (weight 2) tuned first, then bbbb (weight 1); untouched/invalid-so-far tasks at their first valid
    # latency (aaaa 3 ms, bbbb 5 ms); seconds continue after aaaa's final clock of 3.5 s
    assert curve["trials"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert curve["seconds"].tolist() == pytest.approx([0, 1, 2, 3, 4.5, 5.5, 6.5])
    assert curve["latency_ms"].tolist() == pytest.approx([11, 11, 11, 9, 9, 8, 8])
    # without tasks.json: weights 1, order of first appearance, clocks from the last record
    curve = lb.model_curve(records, [])
    assert curve["latency_ms"].tolist() == pytest.approx([8, 8, 8, 7, 7, 6, 6])
    assert curve["seconds"].tolist() == pytest.approx([0, 1, 2, 3, 4, 5, 6])
    # a task with no valid measurement at all: no curve
    records, tasks = fixture_records({"aaaa": [None, None], "bbbb": [5.0]})
    assert lb.model_curve(records, tasks) is None


def test_median_curve_holds_last_value():
    x, y = lb.median_curve([([1, 2, 3], [9, 8, 7]), ([1, 2], [5, 4]), ([2, 4], [6, 1])])
    assert x.tolist() == [1, 2, 3, 4]
    # at 1: (9, 5) -> 7; at 2: (8, 4, 6) -> 6; at 3: (7, 4, 6) -> 6; at 4: (7, 4, 1) -> 4
    assert y.tolist() == [7, 6, 6, 4]


def test_records_from_artifact_when_path_is_elsewhere(store, tmp_path):
    from mlflow.tracking import MlflowClient

    runs = lb.load_runs(MlflowClient(store))
    run = runs[(runs["model"] == R18) & (runs["method"] == "dgp") & (runs["seed"] == "1")].iloc[0].to_dict()
    assert not os.path.exists(run["record_file"])
    records, tasks = lb.RunFiles(MlflowClient(store), str(tmp_path)).load(run)
    assert len(records) == 6 and [t["weight"] for t in tasks] == [2, 1]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tunebench", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_cli_entry(store, tmp_path):
    out = tmp_path / "cli"
    done = cli("leaderboard", "--tracking-uri", store, "--out", str(out), "--no-plots", "--model", R18)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# tunebench leaderboard") and "## resnet18 on llvm" in done.stdout
    assert (out / "leaderboard.md").exists() and (out / "leaderboard.csv").exists()


def test_store_that_is_not_mlflow_is_refused_untouched(tmp_path):
    empty, garbage = tmp_path / "empty.db", tmp_path / "garbage.db"
    empty.write_bytes(b"")
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(UserError, match="is not an MLflow tracking database"):
        lb.open_store(f"sqlite:///{empty}")
    assert empty.stat().st_size == 0  # MLflow did not turn it into a store
    with pytest.raises(UserError, match="is not a readable SQLite database"):
        lb.open_store(f"sqlite:///{garbage}")


@pytest.mark.parametrize("argv, message", [
    (["leaderboard", "--tracking-uri", "sqlite:////no/such/folder/mlflow.db"], "error: --tracking-uri="),
    (["leaderboard", "--tracking-uri", "bogus://host"], "error: --tracking-uri=bogus://host: unsupported scheme"),
    (["dataset-nope"], "error: unknown command 'dataset-nope'; valid: leaderboard"),
])
def test_cli_errors_are_one_line(argv, message, tmp_path):
    done = cli(*argv, "--out", str(tmp_path)) if argv[0] == "leaderboard" else cli(*argv)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr


def test_hv_cell_marks_a_positive_hv_from_two_negative_reductions():
    from tunebench.report.cells import hv_cell as _hv_cell

    assert _hv_cell({"hv_vs_baseline": 26.25, "search_red_pct": -95.2, "latency_red_pct": -27.6}).endswith("(both worse)")
    assert "worse" not in _hv_cell({"hv_vs_baseline": 3.6423, "search_red_pct": 70.43, "latency_red_pct": 5.17})


# ---------------------------------------------------------------- statistics, noise marks, machine line

def md_cells(markdown: str, title: str) -> dict[str, dict[str, str]]:
    """The table of section ``## title`` as {method: {header: cell}}."""
    section = markdown.split(f"## {title}\n")[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return {cells[0].split(" (")[0]: dict(zip(split[0], cells)) for cells in split[2:]}


def boot_mean_ci(values):
    """Percentile bootstrap of the mean, written out with numpy (seed 0, 2000 resamples)."""
    x = np.asarray(values, dtype=float)
    means = x[np.random.default_rng(0).integers(0, x.size, size=(2000, x.size))].mean(axis=1)
    return tuple(np.quantile(means, [0.025, 0.975]))


def boot_two_groups(method_rows, base_rows):
    """Resampled column means of two independent groups of runs (rows: runs), method first (seed 0)."""
    rng = np.random.default_rng(0)
    m, b = np.asarray(method_rows, dtype=float), np.asarray(base_rows, dtype=float)
    return (m[rng.integers(0, len(m), size=(2000, len(m)))].mean(axis=1),
            b[rng.integers(0, len(b), size=(2000, len(b)))].mean(axis=1))


def test_intervals_over_seeds_match_numpy(store, tmp_path):
    rows, _ = board(store, tmp_path, "--no-plots", "--model", MB)
    ga, rs = rows[(MB, "ga")], rows[(MB, "rs")]
    # speedup vs PyTorch: mean over seeds of speedup_vs_torch, bootstrap of that mean over the seeds
    assert ga["speedup_vs_torch_mean"] == pytest.approx(2.0)
    assert ga["speedup_vs_torch_std"] == pytest.approx(0.1)
    low, high = boot_mean_ci(GA_SPEEDUP)
    assert (ga["speedup_vs_torch_ci_low"], ga["speedup_vs_torch_ci_high"]) == pytest.approx((low, high))
    assert 1.9 - 1e-9 <= low < 2.0 < high <= 2.1 + 1e-9
    # search reduction: ratio of the seed means (ga vs autotvm), reduction interval = [1 - high, 1 - low]
    a, b = boot_two_groups(np.c_[GA_T, GA_L], np.c_[BASE_T, BASE_L])
    q_low, q_high = np.quantile(a[:, 0] / b[:, 0], [0.025, 0.975])
    assert ga["search_red_pct"] == pytest.approx((1 - 1100 / 3300) * 100)
    assert (ga["search_red_ci_low_pct"], ga["search_red_ci_high_pct"]) == pytest.approx(
        ((1 - q_high) * 100, (1 - q_low) * 100))
    assert ga["search_red_ci_low_pct"] < ga["search_red_pct"] < ga["search_red_ci_high_pct"]
    q_low, q_high = np.quantile(a[:, 1] / b[:, 1], [0.025, 0.975])
    assert (ga["latency_red_ci_low_pct"], ga["latency_red_ci_high_pct"]) == pytest.approx(
        ((1 - q_high) * 100, (1 - q_low) * 100))
    # HV from the same resamples: the product of the two reductions per resample
    hv = (1 - a[:, 0] / b[:, 0]) * (1 - a[:, 1] / b[:, 1]) * 100
    assert (ga["hv_ci_low"], ga["hv_ci_high"]) == pytest.approx(tuple(np.quantile(hv, [0.025, 0.975])))
    a, b = boot_two_groups(np.c_[RS_T, RS_L], np.c_[BASE_T, BASE_L])
    hv = (1 - a[:, 0] / b[:, 0]) * (1 - a[:, 1] / b[:, 1]) * 100
    assert (rs["hv_ci_low"], rs["hv_ci_high"]) == pytest.approx(tuple(np.quantile(hv, [0.025, 0.975])))
    assert rs["hv_ci_low"] > 0  # positive although rs is worse on both counts


def test_single_seed_uses_its_within_run_interval_and_gets_no_reduction_interval(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots", "--model", MB)
    sa = rows[(MB, "sa")]
    assert [sa[f"speedup_vs_torch_{s}"] for s in ("mean", "ci_low", "ci_high")] == [2.5, 2.4, 2.6]
    assert sa["speedup_vs_torch_verdict"] == "better"
    for col in ("search_red_ci_low_pct", "latency_red_ci_high_pct", "hv_ci_low", "search_red_verdict"):
        assert pd.isna(sa[col]), col
    cells = md_cells(markdown, "mobilenet on llvm")["sa"]
    assert cells["speedup vs PyTorch [×]"] == "2.50 [2.40, 2.60] better"
    assert cells["search red. [%]"] == "39.39"  # 1 - 2000/3300, point only: no interval, no verdict
    assert cells["speedup vs torch.compile [×]"] == "1.88"  # no within-run interval logged for it
    # the baseline's own row: reductions 0 by definition, no interval, no verdict
    assert md_cells(markdown, "mobilenet on llvm")["autotvm"]["search red. [%]"] == "0.00"


def test_verdict_only_when_the_interval_excludes_one(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots")
    seen = set()
    for (model, method), row in rows.items():
        for name in ("search_red", "latency_red"):
            low, high, word = row[f"{name}_ci_low_pct"], row[f"{name}_ci_high_pct"], row[f"{name}_verdict"]
            if pd.isna(low):
                assert pd.isna(word), (model, method, name)
                continue
            # reduction > 0 everywhere <=> ratio < 1 everywhere
            expected = "better" if low > 0 else "worse" if high < 0 else "n.s."
            assert word == expected, (model, method, name)
            cell = md_cells(markdown, f"{model} on llvm")[method][f"{name.replace('_red', ' red.')} [%]"]
            assert f"] {expected}" in cell
            seen.add((method, name, word))
    assert {("ga", "search_red", "better"), ("ga", "latency_red", "n.s."), ("rs", "search_red", "worse"),
            ("rs", "latency_red", "worse")} <= seen
    cells = md_cells(markdown, "mobilenet on llvm")
    assert cells["ga"]["search red. [%]"].startswith("66.67 [") and cells["ga"]["search red. [%]"].endswith("better")
    assert cells["ga"]["latency red. [%]"].endswith("] n.s.")
    assert not any(w in cells["ga"]["HV vs autotvm"] for w in ("better", "worse", "n.s."))  # HV: interval only


def test_noisy_values_are_marked_in_markdown_and_csv(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots")
    ga, rs, base = rows[(MB, "ga")], rows[(MB, "rs")], rows[(MB, "autotvm")]
    # ga seed 1: noisy PyTorch baseline; ga seed 2: 2 noisy tasks
    assert ga["torch_noisy_any"] is True and ga["e2e_noisy_any"] is False and ga["noisy"] == "torch, tasks"
    assert rs["e2e_noisy_any"] is True and rs["torch_noisy_any"] is False and rs["noisy"] == "e2e"
    assert base["e2e_noisy_any"] is False and pd.isna(base["noisy"])
    assert ga["n_noisy_tasks_mean"] == pytest.approx(2 / 3) and ga["n_noisy_tasks_max"] == 2
    cells = md_cells(markdown, "mobilenet on llvm")
    assert cells["ga"]["speedup vs PyTorch [×]"].endswith("better (noisy)")
    assert "(noisy)" not in cells["ga"]["e2e latency [ms]"] + cells["ga"]["speedup vs torch.compile [×]"]
    assert cells["ga"]["Σ task latency [ms]"].endswith("(noisy)") and cells["ga"]["% peak"] == "42.0 (noisy)"
    assert cells["ga"]["noisy tasks"] == "0.67" and cells["autotvm"]["noisy tasks"] == "0"
    # a noisy tuned model: its latency, every speedup, latency red. and HV; the search time is not a timing
    for col in ("e2e latency [ms]", "speedup vs PyTorch [×]", "speedup vs torch.compile [×]", "latency red. [%]",
                "HV vs autotvm"):
        assert cells["rs"][col].endswith("(noisy)"), col
    assert "(noisy)" not in cells["rs"]["search red. [%]"] and "(noisy)" not in "".join(cells["autotvm"].values())
    # the noisy-tasks column only where some run has noisy tasks
    assert "noisy tasks" not in md_cells(markdown, "resnet18 on llvm")["dgp"]
    assert "(noisy: signals): the value rests on at least one timing the harness marked noisy" in markdown


def test_precision_threads_and_peak_above_each_table(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots", "--model", MB)
    section = markdown.split("## mobilenet on llvm\n")[1]
    line = ("Precision: float32; threads: 1, 2 (differ between runs); device: fixture-cpu; measured peak: "
            "52.0–104.0 GFLOP/s (differs between runs), 20.0 GB/s.")
    assert section.index(line) < section.index("| method")
    cuda = markdown.split("## mobilenet on cuda\n")[1].split("\n## ")[0]
    assert "Precision: float32 (TF32 off); threads: GPU; device: fixture-gpu; measured peak: not recorded." in cuda
    ga, sa = rows[(MB, "ga")], rows[(MB, "sa")]
    assert (ga["precision"], str(ga["threads"]), ga["device"]) == ("float32", "2", "fixture-cpu")
    assert str(sa["threads"]) == "1"
    assert ga["peak_gflops_mean"] == pytest.approx(304 / 3) and ga["pct_peak_mean"] == pytest.approx(42.0)
    # the TF32 column exists where a run has it (cuda), with the run's own interval
    tf32 = md_cells(markdown, "mobilenet on cuda")["autotvm"]["speedup vs PyTorch TF32 [×]"]
    assert tf32 == "0.90 [0.85, 0.95] worse"
    assert "speedup vs PyTorch TF32 [×]" not in md_cells(markdown, "mobilenet on llvm")["ga"]
    cuda_row = board(store, tmp_path, "--no-plots", "--model", MB, target="cuda")[0][(MB, "autotvm")]
    assert cuda_row["speedup_vs_torch_tf32_verdict"] == "worse" and cuda_row["torch_tf32_noisy_any"] is False


def test_old_runs_render_with_blank_protocol_columns(store, tmp_path):
    rows, markdown = board(store, tmp_path, "--no-plots")
    old = rows[("alexnet", "dgp")]
    for col in ("speedup_vs_torch_compile_mean", "speedup_vs_torch_mean", "pct_peak_mean", "peak_gflops_mean",
                "e2e_noisy_any", "torch_noisy_any", "noisy", "n_noisy_tasks_mean", "precision", "threads",
                "search_red_ci_low_pct", "search_red_verdict", "hv_ci_low"):
        assert pd.isna(old[col]), col
    assert ("Precision: not recorded; threads: not recorded; device: fixture; measured peak: not recorded."
            in markdown.split("## alexnet on llvm\n")[1])
    cells = md_cells(markdown, "alexnet on llvm")["dgp"]
    assert cells["speedup vs torch.compile [×]"] == cells["% peak"] == ""
    # runs without speedup_vs_torch: the speedup falls back to torch_latency_ms / e2e_latency_ms per seed
    dgp = rows[(R18, "dgp")]
    speedups = [4.0 / 1.8, 3.8 / 1.9, 3.4 / 1.7]
    assert (dgp["speedup_vs_torch_ci_low"], dgp["speedup_vs_torch_ci_high"]) == pytest.approx(boot_mean_ci(speedups))
    assert "(noisy)" not in markdown.split("## resnet18 on llvm\n")[1].split("Means over seeds")[0]


def test_reduction_product_ci_uses_the_ratio_of_means_draws():
    from tunebench.protocol.stats import ratio_of_means_ci, reduction_product_ci

    t, lat, tb, lb_ = [1.0, 2.0, 3.0], [5.0, 4.0, 6.0], [4.0, 5.0], [6.0, 7.0]
    point, low, high = reduction_product_ci(t, lat, tb, lb_)
    assert point == pytest.approx((1 - 2 / 4.5) * (1 - 5 / 6.5) * 100)
    a, b = boot_two_groups(np.c_[t, lat], np.c_[tb, lb_])
    hv = (1 - a[:, 0] / b[:, 0]) * (1 - a[:, 1] / b[:, 1]) * 100
    assert (low, high) == pytest.approx(tuple(np.quantile(hv, [0.025, 0.975])))
    # the search factor alone: the same resamples as ratio_of_means_ci
    assert ratio_of_means_ci(t, tb)[1:] == pytest.approx(tuple(np.quantile(a[:, 0] / b[:, 0], [0.025, 0.975])))
    # a run without a latency is left out; fewer than 2 runs on a side: the point but no interval
    point, low, high = reduction_product_ci([1.0, 2.0], [5.0, math.nan], tb, lb_)
    assert point == pytest.approx((1 - 1 / 4.5) * (1 - 5 / 6.5) * 100) and math.isnan(low) and math.isnan(high)


def test_a_record_tag_outside_the_trusted_folders_is_not_followed(tmp_path, caplog):
    """A run's ``tunebench.record_file`` tag is followed only into ``records/`` beside the store (or a
    folder named with ``--records-dir``), as ``resume=`` does: a tag naming a file elsewhere, directly or
    through a symlink inside the folder, is read from the run's artifacts instead, with a warning."""
    from mlflow.tracking import MlflowClient

    from tunebench.report.query import records_roots

    store = tmp_path / "work"
    uri = f"sqlite:///{store}/mlflow.db"
    store.mkdir()
    client = MlflowClient(uri)
    exp = client.create_experiment("x", artifact_location=str(store / "art"))
    run_id = client.create_run(exp, tags={"method": "random", "model": R18, "target": "llvm", "seed": "0"}).info.run_id
    own, outside = fixture_records(FLAT_LAT), fixture_records(CURVE_LAT)
    for folder, (records, tasks) in ((store / "records" / run_id, own), (tmp_path / "elsewhere" / run_id, outside)):
        folder.mkdir(parents=True)
        (folder / "records.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in records))
        (folder / "tasks.json").write_text(json.dumps(tasks))
    for name in ("records.jsonl", "tasks.json"):
        client.log_artifact(run_id, str(store / "records" / run_id / name))
    client.set_terminated(run_id)
    (store / "records" / "link").symlink_to(tmp_path / "elsewhere" / run_id)
    for tag in (tmp_path / "elsewhere" / run_id / "records.jsonl", store / "records" / "link" / "records.jsonl"):
        client.set_tag(run_id, lb.RECORD_TAG, str(tag))
        run = lb.load_runs(client).iloc[0].to_dict()
        caplog.clear()
        records, tasks = lb.RunFiles(client, str(tmp_path / "cache")).load(run)
        assert records == own[0] and tasks == own[1]  # the artifacts, not the file the tag names
        assert f"run {run_id}: its record file {tag} is not under" in caplog.text
    args = build_parser().parse_args(["leaderboard", "--records-dir", str(tmp_path / "elsewhere")])
    trusted = records_roots(uri, args.records_dir)  # a folder named on the command line is trusted
    assert lb.RunFiles(client, str(tmp_path / "cache2"), trusted).load(run)[0] == outside[0]
