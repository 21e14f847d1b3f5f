"""Leaderboard tests on a hand-made MLflow store.

Every run below is a TEST FIXTURE with invented metric values (no tuning happened): two models on
``llvm``, methods autotvm (the baseline), dgp and random, several seeds, plus a FAILED run, an old run
(2024), an older duplicate of autotvm seed 0, and a run whose record file exists only as an artifact.
"""

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest

from tunebench.__main__ import build_parser
from tunebench.errors import UserError
from tunebench.harness import leaderboard as lb

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
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


def spec(exp, model, method, seed, start, lat=FLAT_LAT, status="FINISHED", local=True, **metrics):
    """One fixture run: where it goes, its tags, start time (ms), invented metrics and record latencies;
    ``local=False`` tags a record path that is not on this machine (the artifact must be used)."""
    return dict(exp=exp, model=model, method=method, seed=seed, start=start, lat=lat, status=status,
                local=local, metrics=metrics)


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
                                tags={"method": r["method"], "model": r["model"], "target": "llvm",
                                      "seed": str(r["seed"]), "device": "fixture", "git_commit": "fixture"})
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


def board(store, tmp_path, *options):
    """Run the leaderboard through the CLI parser; returns (rows as dicts keyed by (model, method), markdown)."""
    args = build_parser().parse_args(["leaderboard", "--tracking-uri", store, "--out", str(tmp_path / "lb"),
                                      *options])
    markdown = lb.run_leaderboard(args)
    table = pd.read_csv(tmp_path / "lb" / "leaderboard.csv")
    return {(r["model"], r["method"]): r for r in table.to_dict("records")}, markdown


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
    for png in ("curves_resnet18_llvm.png", "curves_alexnet_llvm.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in markdown
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
    from tunebench.harness.leaderboard import _hv_cell

    assert _hv_cell({"hv_vs_baseline": 26.25, "search_red_pct": -95.2, "latency_red_pct": -27.6}).endswith("(both worse)")
    assert "worse" not in _hv_cell({"hv_vs_baseline": 3.6423, "search_red_pct": 70.43, "latency_red_pct": 5.17})
