"""``python -m tunebench suite``: two small Kernel Tuner caches x 2 methods x 3 seeds end to end (tracked
runs, the summary files, the leaderboard's score columns agreeing with the suite's), the score against
the autotuning-methodology package where the bench extra is installed, and every bad input refused in
one line before any run."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pandas as pd
import pytest

from tunebench.__main__ import main
from tunebench.report.suite import share_cores

N_A, N_B = 8, 5  # knob values: 40 configurations per space


def write_cache(path, seed: int, time_of=None) -> str:
    """A Kernel Tuner cache of 40 configurations (two knobs); ``time_of(i, t)`` replaces config i's time."""
    rng = np.random.default_rng(seed)
    cache = {}
    for i, (a, b) in enumerate((a, b) for a in range(N_A) for b in range(N_B)):
        t = float(rng.lognormal(0.0, 0.6))
        t = "RuntimeFailedConfig" if i % 13 == 5 else t
        entry = {"a": a, "b": b, "time": t if time_of is None else time_of(i, t), "times": [],
                 "compile_time": float(rng.uniform(100, 300)), "benchmark_time": 50.0}
        if entry["time"] is None:
            del entry["time"]
        cache[f"{a},{b}"] = entry
    data = {"device_name": "test GPU", "kernel_name": "k", "tune_params_keys": ["a", "b"],
            "tune_params": {"a": list(range(N_A)), "b": list(range(N_B))}, "objective": "time", "cache": cache}
    with open(path, "w") as fh:
        json.dump(data, fh)
    return str(path)


@pytest.fixture
def spaces(tmp_path):
    folder = tmp_path / "spaces"
    folder.mkdir()
    return [write_cache(folder / "small_a.json", 1), write_cache(folder / "small_b.json", 2)]


def _records(workdir, run_id: str) -> list[dict]:
    with open(os.path.join(workdir, "records", run_id, "records.jsonl")) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_suite_end_to_end(tmp_path, spaces, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["suite", "--spaces", *spaces, "--methods", "random,autotvm", "--seeds", "3", "--budget", "10"]) == 0
    out = capsys.readouterr().out
    assert "[12/12] small_b autotvm seed 2" in out and "s left" in out  # progress with the time left
    result = json.loads((work / "suite" / "suite.json").read_text())
    assert (work / "suite" / "suite.md").read_text().strip() == result["markdown"]
    assert (work / "suite" / "suite.png").read_bytes()[:4] == b"\x89PNG"
    assert len(result["run_ids"]) == 12 and result["spaces"] == ["small_a", "small_b"]
    agg = result["scores"]["aggregate"]
    for method in ("random", "autotvm"):
        for axis in ("evals", "time"):
            s = agg[method][axis]
            assert len(s["per_seed"]) == 3 and s["ci"][0] <= s["mean"] <= s["ci"][1]
    # the aggregate is the mean of the per-space standardised curves: with equal ranges, the mean of the spaces
    per = result["scores"]["per_space"]
    assert agg["random"]["evals"]["mean"] == pytest.approx(
        np.mean([per[n]["random"]["evals"]["mean"] for n in ("small_a", "small_b")]))
    (diff,) = result["scores"]["differences"]
    assert diff["diff"] == pytest.approx(agg["random"]["evals"]["mean"] - agg["autotvm"]["evals"]["mean"])
    for key, run_id in result["run_ids"].items():  # every run tracked and recorded at the budget
        assert len(_records(work, run_id)) == 10, key

    # the leaderboard shows each space as its own group with the same score
    assert main(["leaderboard", "--experiment", "suite", "--no-plots", "--out", str(tmp_path / "lb")]) == 0
    table = pd.read_csv(tmp_path / "lb" / "leaderboard.csv")
    for space in ("small_a", "small_b"):
        for method in ("random", "autotvm"):
            row = table[(table["model"] == f"measured:{space}") & (table["method"] == method)]
            assert len(row) == 1
            assert row["method_score_evals_mean"].iloc[0] == pytest.approx(per[space][method]["evals"]["mean"])


def test_suite_score_matches_the_package(tmp_path, spaces, monkeypatch, capsys):
    """Each seed's score on a space, recomputed from its records with the package's calculated baseline
    and standardised curves, equals the suite's."""
    pytest.importorskip("autotuning_methodology", reason="the bench extra (autotuning-methodology) is not installed")
    import types

    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    from tunebench.datasets.space_file import read_measured

    monkeypatch.chdir(tmp_path)
    assert main(["suite", "--spaces", spaces[0], "--methods", "random", "--seeds", "3", "--budget", "10"]) == 0
    capsys.readouterr()
    result = json.loads((tmp_path / "suite" / "suite.json").read_text())
    values = np.array([r.latency_s for r in read_measured(spaces[0]).rows if r.latency_s is not None])
    stats = types.SimpleNamespace(
        objective_performances_total_sorted_nan=np.sort(values), objective_performances_total_sorted=np.sort(values),
        minimization=True, total_performance_absolute_optimum=lambda: float(values.min()),
        get_time_per_feval=lambda operator: 1.0)
    pkg = RandomSearchCalculatedBaseline(stats)
    fevals = np.arange(1, 11)
    theirs = []
    for seed in range(3):
        recs = sorted(_records(tmp_path, result["run_ids"][f"small_a|random|{seed}"]), key=lambda r: r["trial"])
        curve = np.minimum.accumulate([r["latency_s"] if r["valid"] else values.max() for r in recs])
        (std,) = pkg.get_standardised_curves(fevals, [curve], "fevals")
        theirs.append(float(np.mean(std)))
    ours = result["scores"]["per_space"]["small_a"]["random"]["evals"]["per_seed"]
    assert ours == pytest.approx(theirs)


def test_a_plug_in_method_runs_beside_a_registered_one(tmp_path, spaces, monkeypatch, capsys):
    from conftest import ROOT

    monkeypatch.syspath_prepend(os.path.join(ROOT, "examples", "my_method"))
    monkeypatch.chdir(tmp_path)
    assert main(["suite", "--spaces", spaces[0], "--methods", "random,my_method:SimulatedAnnealing", "--seeds", "2",
                 "--budget", "8"]) == 0
    capsys.readouterr()
    result = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert result["methods"] == ["random", "my_sa"]  # a plug-in by its settings' name, as its runs are tagged
    assert len(result["scores"]["aggregate"]["my_sa"]["evals"]["per_seed"]) == 2
    assert all(len(_records(tmp_path, result["run_ids"][f"small_a|my_sa|{s}"])) == 8 for s in range(2))


@pytest.mark.slow
def test_runs_side_by_side_score_as_one_after_the_other(tmp_path, spaces, monkeypatch, capsys):
    """--jobs 2 (spawned processes) gives the same runs, hence the same scores over evaluations, as --jobs 1
    (over time they differ a little: the replay clock includes the methods' own computing seconds)."""
    scores = []
    for jobs in ("1", "2"):
        work = tmp_path / f"jobs{jobs}"
        work.mkdir()
        monkeypatch.chdir(work)
        assert main(["suite", "--spaces", *spaces, "--methods", "random,autotvm", "--seeds", "2", "--budget", "6",
                     "--jobs", jobs]) == 0
        scores.append(json.loads((work / "suite" / "suite.json").read_text())["scores"])
    capsys.readouterr()
    assert scores[0]["differences"] == scores[1]["differences"]
    for a, b in ((scores[0]["aggregate"], scores[1]["aggregate"]),
                 *((scores[0]["per_space"][n], scores[1]["per_space"][n]) for n in ("small_a", "small_b"))):
        assert {m: a[m]["evals"] for m in a} == {m: b[m]["evals"] for m in b}


def test_differences_survive_only_outside_the_noise():
    from tunebench.report.suite_score import differences

    rng = np.random.default_rng(0)
    agg = {"good": {"per_seed": list(0.8 + 0.01 * rng.standard_normal(30))},
           "bad": {"per_seed": list(0.1 + 0.01 * rng.standard_normal(30))},
           "bad_too": {"per_seed": list(0.1 + 0.01 * rng.standard_normal(30))}}
    diffs = {(d["a"], d["b"]): d for d in differences(agg)}
    assert diffs[("good", "bad")]["survives"] and diffs[("good", "bad")]["ci"][0] > 0.6
    assert not diffs[("bad", "bad_too")]["survives"]
    assert len(diffs) == 3


def _one_error(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert exc.value.code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


@pytest.mark.parametrize("case,needle", [
    (["gpus"], "set 'gpus' is unknown; valid: cpu, gpu, all"),
    ([], "give a set (cpu, gpu, all) or --spaces FILE"),
    (["gpu", "--spaces", "{a}"], "not both"),
    (["--spaces", "{a}", "--methods", "random,nope"], "method='nope' is unknown; valid:"),
    (["--spaces", "{a}", "--methods", "no_such_pkg.mod:MyMethod"], "module 'no_such_pkg.mod' does not import"),
    (["--spaces", "{a}", "--methods", "metaschedule"], "--methods metaschedule:"),
    (["--spaces", "{a}", "--methods", "random,random"], "a method is named twice"),
    (["--spaces", "{failed}"], "none of its 40 configurations has a measured latency"),
    (["--spaces", "{no_time}"], "time=None: neither milliseconds nor an error name"),
    (["--spaces", "{text_time}"], "none of its 40 configurations has a measured latency"),
    (["--spaces", "{a}", "--seeds", "0"], "--seeds=0: must be a whole number >= 1"),
    (["--spaces", "{a}", "--budget", "41"], "--budget=41: larger than space small_a (40 configs)"),
    (["--spaces", "{a}", "--budget", "0"], "--budget=0: must be"),
    (["--spaces", "{a}", "--jobs", "0"], "--jobs=0: must be"),
    (["--spaces", "/nonexistent/cache.json"], "/nonexistent/cache.json: no such file"),
    (["--spaces", "{a}", "--out", "{a}"], "is a file; give a folder"),
])
def test_bad_input_is_one_line_before_any_run(tmp_path, spaces, monkeypatch, capsys, case, needle):
    files = {"a": spaces[0],
             "failed": write_cache(tmp_path / "failed.json", 3, lambda i, t: "CompilationFailedConfig"),
             "no_time": write_cache(tmp_path / "no_time.json", 3, lambda i, t: None),
             "text_time": write_cache(tmp_path / "text_time.json", 3, lambda i, t: "n/a")}
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    budget = [] if "--budget" in case else ["--budget", "10"]  # the default (100) is larger than these spaces
    _one_error(capsys, ["suite", *[c.format(**files) for c in case], *budget], needle)
    assert sorted(os.listdir(work)) == []  # no MLflow store, records or summary


def test_the_shipped_sets_are_checked_before_any_run(tmp_path, monkeypatch, capsys):
    """The gpu set reads (each file checksummed) and its smallest space bounds the budget."""
    monkeypatch.chdir(tmp_path)
    _one_error(capsys, ["suite", "gpu", "--budget", "2443"], "--budget=2443: larger than space convolution_MI50 "
                                                             "(2442 configs)")
    _one_error(capsys, ["suite", "cpu", "--budget", "401"], "larger than space llvm_conv2d_1x512x7x7x512x3x1x1x1")
    assert os.listdir(tmp_path) == []


def test_gzip_caches_are_read_like_plain_ones(tmp_path, spaces):
    from tunebench.datasets.space_file import read_measured

    gz = tmp_path / "small_a.json.gz"
    gz.write_bytes(gzip.compress(open(spaces[0], "rb").read()))
    assert read_measured(str(gz)).space.size == read_measured(spaces[0]).space.size == N_A * N_B


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores this process may use")
def test_suite_workers_share_the_cores():
    """Worker i of J keeps every J-th core from the i-th (checked in child processes: it pins the caller);
    which worker starts first is up to the OS."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("i", 0)
    with ctx.Pool(1, initializer=share_cores, initargs=(counter, 2)) as first, \
            ctx.Pool(1, initializer=share_cores, initargs=(counter, 2)) as second:
        mine = [sorted(p.apply(os.sched_getaffinity, (0,))) for p in (first, second)]
    cores = sorted(os.sched_getaffinity(0))
    assert sorted(mine) == sorted([cores[0::2], cores[1::2]])
