"""benchmarks/replay_compare.py: methods on measured spaces over seeds, the methodology score per space
and aggregated (the suite's scoring, tests/report/test_suite.py), dgp's source histories."""
import os
import sys

from conftest import ROOT
from helpers import write_tiny_space

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import replay_compare as rc


def test_two_methods_on_two_spaces(tmp_path, monkeypatch, capsys):
    paths = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    write_tiny_space(paths[0])
    write_tiny_space(paths[1], scale=3.0)
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["replay_compare.py", "--seeds", "3", "--budget", "5", "--methods",
                                      "random,autotvm", "--spaces", ",".join(paths), "--out", str(out)])
    rc.main()
    import json

    res = json.load(open(out))
    agg = res["aggregates"]["All spaces"]
    assert res["spaces"] == ["a", "b"] and set(agg["evals"]) == {"random", "autotvm"} == set(agg["time"])
    assert res["optimum_ms"]["a"] == 1.0 and res["optimum_ms"]["b"] == 3.0
    row = res["per_space"]["a"]["random"]
    assert len(row["runs"]) == 3 and all(r["evaluations"] == 5 for r in row["runs"])
    assert all(r["end_s"] > 0 for r in row["runs"])  # the replay clock: recorded build + run seconds
    assert all(r["steps"][0][0] == 1 and [s[2] for s in r["steps"]] == sorted((s[2] for s in r["steps"]),
                                                                               reverse=True) for r in row["runs"])
    assert len(agg["differences"]) == 1 and "| random |" in res["markdown"]
    assert [r["configs"] for r in res["space_rows"]] == [8, 8] and res["space_rows"][0]["failed"] == 1


def test_improvements_keep_what_the_scores_need():
    out = rc.improvements([5.0, 5.0, 3.0, 3.0, 2.0], [1.0, 2.0, 3.0, 4.0, 5.5])
    assert out == {"evaluations": 5, "end_s": 5.5, "steps": [[1, 1.0, 5.0], [3, 3.0, 3.0], [5, 5.5, 2.0]]}


def test_dgp_transfers_from_autotvm_on_the_other_spaces_of_its_group():
    groups = {"a": ("conv2d", (3, 3)), "b": ("conv2d", (3, 3)), "c": ("dense",)}
    assert rc.dgp_history("c", groups, {}, 0) is None  # alone in its group: no source


def test_dgp_sources_are_one_shared_history_or_one_per_seed(monkeypatch):
    """``one``: seed 0's history object for every seed (its model cache keeps the one pre-trained DGP);
    ``per-seed``: seed s's own."""
    import argparse

    monkeypatch.setattr(rc, "dgp_history", lambda name, groups, runs, seed: object() if seed == 0 else ("h", seed))
    one = rc.dgp_histories("a", {}, {}, argparse.Namespace(dgp_sources="one", seeds=3))
    assert len(one) == 3 and one[0] is one[1] is one[2]
    per_seed = rc.dgp_histories("a", {}, {}, argparse.Namespace(dgp_sources="per-seed", seeds=3))
    assert per_seed[1:] == [("h", 1), ("h", 2)] and per_seed[0] is not one[0]
