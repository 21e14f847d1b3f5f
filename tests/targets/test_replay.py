"""``target=replay`` with ``model=measured``: a Kernel Tuner cache read as a measured space, replayed with
its recorded latencies and seconds; random search on it against its analytic expectation; the TVM-space
methods unchanged on a listed (explicit) space; bad caches are one line before any run."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from tunebench.config.experiment import Budget
from tunebench.datasets.kt_cache import read_cache
from tunebench.datasets.measured import resolve
from tunebench.datasets.models import MeasuredModel
from tunebench.errors import UserError
from tunebench.harness.loop import tune_task
from tunebench.harness.setup.preflight import preflight
from tunebench.methods import make_method
from tunebench.protocol.stats import expected_best_of_random
from tunebench.targets.replay import ReplaySettings, ReplayTarget

SHIPPED = "kernel_tuner/convolution_MI50.json.gz"


def _entry(a, b, mode, time, compile_ms=100.0, bench_ms=50.0):
    return {"a": a, "b": b, "mode": mode, "time": time, "times": [time] * 3 if isinstance(time, float) else [],
            "compile_time": compile_ms, "benchmark_time": bench_ms, "GFLOP/s": 2.0 / time if isinstance(time, float)
            else 0}


def small_cache() -> dict:
    """8 of the 12 configs of a 3 x 2 x 2 space; one failed (InvalidConfig), times in ms."""
    entries = [_entry(1, 1, "x", 4.0), _entry(1, 2, "x", 3.0), _entry(2, 1, "x", 2.5), _entry(2, 2, "x", 5.0),
               _entry(3, 1, "x", "InvalidConfig", 20.0, 0.0), _entry(1, 1, "y", 1.5), _entry(2, 1, "y", 2.0),
               _entry(3, 2, "y", 6.0, 300.0, 200.0)]
    return {"device_name": "Test GPU", "kernel_name": "tiny", "tune_params_keys": ["a", "b", "mode"],
            "tune_params": {"a": [1, 2, 3], "b": [1, 2], "mode": ["x", "y"]}, "objective": "time",
            "cache": {f"{e['a']},{e['b']},{e['mode']}": e for e in entries}}


@pytest.fixture
def cache_file(tmp_path):
    path = tmp_path / "tiny.json.gz"
    path.write_bytes(gzip.compress(json.dumps(small_cache()).encode()))
    return str(path)


def test_a_cache_is_read_as_a_measured_space(cache_file):
    m = read_cache(cache_file)
    assert (m.name, m.device, m.space.size, m.space.full_size, m.n_valid) == ("tiny", "Test GPU", 8, 12, 7)
    assert [k.name for k in m.space.knobs] == ["a", "b", "mode"] and m.space.get(5).to_dict() == \
        {"a": 1, "b": 1, "mode": "y"}
    assert m.rows[4].latency_s is None and m.rows[4].error == "InvalidConfig"
    assert math.isclose(m.rows[0].latency_s, 4e-3) and math.isclose(m.rows[7].compile_s + m.rows[7].benchmark_s, 0.5)
    assert m.flops == 2_000_000  # GFLOP/s x time


def _tune(path, method, trials, seed=0):
    """One task of the measured space ``path`` tuned by ``method`` on a fresh replay target."""
    target = ReplayTarget(ReplaySettings())
    task = target.load_tasks(MeasuredModel(path=path))[0][0]
    return task, tune_task(task, method, target, Budget(trials), np.random.default_rng(seed))


def test_replay_gives_the_recorded_latencies_and_charges_the_recorded_seconds(cache_file):
    _, result = _tune(cache_file, make_method("random"), 8)
    rows = read_cache(cache_file).rows
    assert len(result.measurements) == 8 and result.stop_reason in ("trials", "exhausted")
    for m in result.measurements:
        row = rows[m.config.index]
        assert m.valid == (row.latency_s is not None) and (not m.valid or m.latency_s == row.latency_s)
        assert m.cost_s == row.compile_s + row.benchmark_s
    recorded = sum(r.compile_s + r.benchmark_s for r in rows)
    assert recorded <= result.search_s < recorded + 5.0  # the replayed seconds, plus the harness's own time
    assert min(m.latency_s for m in result.measurements) == 1.5e-3


def test_random_search_on_replay_follows_the_analytic_expected_best_so_far():
    lat = np.array([r.latency_s if r.latency_s is not None else np.inf for r in read_cache(resolve(SHIPPED)).rows])
    seeds, trials = 40, 60
    curves = []
    for seed in range(seeds):
        _, result = _tune(SHIPPED, make_method("random"), trials, seed)
        curves.append(np.minimum.accumulate([m.latency_s if m.valid else np.inf for m in result.measurements]))
    curves = np.array(curves)
    for k in (1, 5, 20, 60):
        got, sem = curves[:, k - 1].mean(), curves[:, k - 1].std(ddof=1) / math.sqrt(seeds)
        want = expected_best_of_random(lat, k)
        assert abs(got - want) <= 4 * sem + 1e-9, f"best after {k}: {got:.4g} vs analytic {want:.4g} (sem {sem:.2g})"


FAST = {"autotvm": {"plan_size": 8, "sa_n_iter": 40, "sa_parallel_size": 16, "num_boost_round": 50},
        "chameleon": {"plan_size": 8, "sa_n_iter": 40, "sa_parallel_size": 16, "num_boost_round": 50,
                      "iteration_opt": 4, "episode_rl": 8, "step_rl": 20, "k_range": [2, 6]},
        "flextensor": {"n_init": 8, "epochs": 2}, "random": {}}


@pytest.mark.parametrize("name", sorted(FAST))
def test_tvm_space_methods_run_unchanged_on_a_listed_space(name):
    task, result = _tune(SHIPPED, make_method(name, **FAST[name]), 24)
    indices = [m.config.index for m in result.measurements]  # chameleon ends after its last iteration (exhausted)
    assert 8 < len(indices) <= 24 and len(set(indices)) == len(indices) and result.stop_reason in ("trials", "exhausted")
    assert all(0 <= i < task.space.size for i in indices)


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"\x1f\x8b\x08garbage", "not a readable JSON cache"),
    (json.dumps({"results": []}).encode(), "not a Kernel Tuner cache \\(needs keys tune_params_keys"),
    (json.dumps({**small_cache(), "cache": {"9,9,x": {"a": 9, "b": 9, "mode": "x", "time": 1.0}}}).encode(),
     "cache entry '9,9,x': parameters outside tune_params"),
    (json.dumps({**small_cache(), "cache": {"1,1,x": {"a": 1, "b": 1, "mode": "x", "time": None}}}).encode(),
     "cache entry '1,1,x': time=None: neither milliseconds nor an error name"),
])
def test_a_bad_cache_is_one_line_before_any_run(tmp_path, content, message):
    path = tmp_path / "cache.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        preflight(["target=replay", "model=measured", f"model.path={path}", f"workdir={tmp_path}"])
    assert not (tmp_path / "mlflow.db").exists()


def test_the_calculated_random_baseline_on_a_hand_made_case():
    # 4 values, 2 draws: the best is 1 unless both draws miss it (3 of 6 pairs: {2,3}, {2,inf}, {3,inf})
    assert math.isclose(expected_best_of_random([3.0, 1.0, np.inf, 2.0], 2), (3 * 1.0 + 2 * 2.0 + 1 * 3.0) / 6)
    assert expected_best_of_random([5.0, 4.0], 2) == 4.0 and expected_best_of_random([np.inf, 1.0], 1) == math.inf


def test_the_leaderboard_scores_replay_runs_by_the_methodology(tmp_path, cache_file):
    """Runs of random and autotvm on a replayed space: the leaderboard's methodology score of each method is
    the score of its runs' records against the space's calculated baseline ([Willemsen-FGCS24]), with its
    interval over seeds, in the table and as a figure."""
    from mlflow.tracking import MlflowClient

    from tunebench.__main__ import build_parser
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config
    from tunebench.protocol.methodology import baseline_over_fevals, curve_on_fevals, score
    from tunebench.record_file import read_records
    from tunebench.report import run_leaderboard
    from tunebench.report.aggregate import aggregate
    from tunebench.report.methodology import add_scores
    from tunebench.report.query import RunFiles, load_runs

    for method in ("random", "autotvm"):
        for seed in (0, 1):
            run_experiment(compose_config([f"workdir={tmp_path}", "progress=false", "target=replay",
                                           "model=measured", f"model.path={cache_file}", f"method={method}",
                                           f"seed={seed}", "budget.trials_per_task=5"]))
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = load_runs(client)
    table, _ = aggregate(runs, baseline="random")
    add_scores(table, runs, RunFiles(client, str(tmp_path / "cache")))
    measured = read_cache(cache_file)
    space = measured.stats()
    base = baseline_over_fevals(space, np.arange(1, 6))
    for method in ("random", "autotvm"):
        curves = []
        for run in runs[runs["method"] == method].sort_values("seed").to_dict("records"):
            recs = sorted(read_records(run["record_file"]), key=lambda r: r["trial"])
            lat = [r["latency_s"] if r["valid"] else math.inf for r in recs]
            curves.append([curve_on_fevals(np.minimum.accumulate(lat), 5)])
        expected = score(curves, [base], [space])
        row = table[table["method"] == method].iloc[0]
        assert row["method_score_evals_mean"] == pytest.approx(expected.mean)
        assert row["method_score_evals_ci_low"] == pytest.approx(expected.ci_low)
        assert math.isfinite(row["method_score_time_mean"])
    args = build_parser().parse_args(["leaderboard", "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
                                      "--out", str(tmp_path / "lb"), "--baseline", "random"])
    markdown = run_leaderboard(args)
    assert "methodology score [evals]" in markdown and (tmp_path / "lb" / "score_measured_tiny_replay.png").exists()  # model=measured:<file>


def test_a_space_file_tells_methods_the_device_it_was_measured_on():
    """The replayed task's target info carries the recorded TVM target (glimpse's Blueprint reads it); a
    Kernel Tuner cache records none."""
    from tunebench.methods.tensor_programs.glimpse.blueprint import hardware_of

    target = ReplayTarget(ReplaySettings())
    task = target.load_tasks(MeasuredModel(path="spaces/llvm_dense_1x512x1000.jsonl"))[0][0]
    info = target.task_info(task)
    assert info.tvm_target == {"kind": "llvm", "num-cores": 2, "mcpu": "rocketlake"}
    assert hardware_of(info.tvm_target, info.device_name).name == "rocketlake/2t"
    kt = ReplayTarget(ReplaySettings())
    assert kt.task_info(kt.load_tasks(MeasuredModel(path=SHIPPED))[0][0]).tvm_target is None


def test_glimpse_with_its_model_runs_unchanged_on_a_measured_space(tmp_path):
    """A Glimpse model trained on three shipped 3x3 convolution spaces (their records labelled as two CPU
    variants), then tuning the fourth on replay: its prior conditions on the recorded device."""
    from tunebench.datasets.space_file import read_measured
    from tunebench.methods.tensor_programs.glimpse.blueprint import hardware_of
    from tunebench.methods.tensor_programs.glimpse.dataset import group_from_values
    from tunebench.methods.tensor_programs.glimpse.train import TrainSettings, train

    names = ["llvm_conv2d_1x128x28x28x128x3x1x1x1", "llvm_conv2d_1x512x7x7x512x3x1x1x1",
             "llvm_conv2d_1x64x56x56x64x3x1x1x1"]
    groups = []
    for mcpu in ("haswell", "nehalem"):
        for name in names:
            m = read_measured(resolve(f"spaces/{name}.jsonl"))
            rows = [(i, r) for i, r in enumerate(m.rows) if r.latency_s is not None][::4]
            task = {"task_id": m.digest, **m.meta["task"]}
            groups.append(group_from_values(hardware_of({"kind": "llvm", "mcpu": mcpu, "num-cores": 2}), task,
                                            [m.space.get(i).to_dict() for i, _ in rows], [True] * len(rows),
                                            [m.flops / r.latency_s / 1e9 for _, r in rows]))
    path = str(tmp_path / "glimpse.pt")
    train(groups, TrainSettings(prior_epochs=20, acq_batches=4, acq_episodes=2, steps=4, validity_epochs=4)).save(path)
    method = make_method("glimpse", pretrained=path, sa_n_iter=30)
    task, result = _tune(resolve("spaces/llvm_conv2d_1x512x14x14x512x3x1x1x1.jsonl"), method, 16)
    indices = [m.config.index for m in result.measurements]
    assert len(indices) == 16 == len(set(indices)) and result.stop_reason == "trials"
    assert method.hardware.name == "rocketlake/2t" and len(method.theta) > 0
