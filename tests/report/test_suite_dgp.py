"""dgp in ``python -m tunebench suite``: its groups on measured spaces (same kernel and knobs), a space
with no source refused with the reason (and a set with none refused before any run), the preparation
done once per space off the seeds' clocks and read back from its file, and dgp's scores kept apart
from the aggregate of the methods that ran on every space."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from test_suite import write_cache

from tunebench.__main__ import main
from tunebench.report import suite_dgp


def _more_knobs(path) -> str:
    """The cache at ``path`` with a third knob ``e`` (the same kernel with other knobs)."""
    data = json.loads(open(path).read())
    data["tune_params_keys"], data["tune_params"]["e"] = ["a", "b", "e"], [0, 1]
    data["cache"] = {f"{k},{e}": {**v, "e": e} for k, v in data["cache"].items() for e in (0, 1)}
    with open(path, "w") as fh:
        json.dump(data, fh)
    return str(path)


@pytest.fixture
def spaces(tmp_path):
    """a, b: kernel k on two 'GPUs'; c: kernel k with a third knob; d: another kernel."""
    folder = tmp_path / "spaces"
    folder.mkdir()
    out = {n: write_cache(folder / f"small_{n}.json", i) for i, n in enumerate("abcd", 1)}
    _more_knobs(out["c"])
    data = json.loads(open(out["d"]).read())
    data["kernel_name"] = "other"
    (folder / "small_d.json").write_text(json.dumps(data))
    return out


def test_groups_are_the_same_kernel_with_the_same_knobs(spaces):
    groups = {n: suite_dgp.space_group(p) for n, p in spaces.items()}
    assert groups["a"] == groups["b"] == ("measured", "k", ("a", "b"))
    assert groups["c"] == ("measured", "k", ("a", "b", "e")) and groups["d"] == ("measured", "other", ("a", "b"))
    sources, skipped = suite_dgp.source_spaces(groups)
    assert sources == {"a": ["b"], "b": ["a"]}
    assert skipped["c"] == "no source: no other space of the set is in its group (k (a, b, e))"
    assert set(skipped) == {"c", "d"}


def test_the_shipped_sets_group_as_the_paper_and_by_gpu():
    from tunebench.datasets.shipped import space_set

    groups = {p.split("/")[-1].split(".json")[0]: suite_dgp.space_group(p) for p in space_set("all")}
    sources, skipped = suite_dgp.source_spaces(groups)
    assert sources["convolution_milo_A100"] == ["convolution_milo_A4000", "convolution_milo_MI250X",
                                                "convolution_milo_W6600"]
    assert len(sources["dedispersion_milo_W6600"]) == 3
    assert set(skipped) == {"convolution_MI50", "llvm_conv2d_1x64x56x56x128x1x2x0x1", "llvm_dense_1x512x1000"}
    assert sources["llvm_conv2d_1x512x7x7x512x3x1x1x1"] == ["llvm_conv2d_1x128x28x28x128x3x1x1x1",
                                                           "llvm_conv2d_1x512x14x14x512x3x1x1x1",
                                                           "llvm_conv2d_1x64x56x56x64x3x1x1x1"]


def test_a_set_where_no_space_has_a_source_is_refused_before_any_run(tmp_path, spaces, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(SystemExit) as stop:
        main(["suite", "--spaces", spaces["a"], spaces["c"], "--methods", "dgp", "--budget", "10"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1
    assert lines[0].startswith("error: --methods dgp: no space has a source") and "small_c: no source" in lines[0]
    assert os.listdir(work) == []  # no MLflow store, records or summary


def _count_pretraining(monkeypatch) -> list:
    from tunebench.methods.tensor_programs.dgp.model import DeepGP

    calls, fit = [], DeepGP.fit

    def counted(self, x, y, *args, **kw):
        if kw.get("prior") is None:  # pre-training (the MAP transfer passes its prior)
            calls.append(len(y))
        return fit(self, x, y, *args, **{**kw, "epochs": 2})  # a few epochs: the test is about who trains when

    monkeypatch.setattr(DeepGP, "fit", counted)
    return calls


@pytest.mark.slow  # ~30-60 s on 2 cores: 17 tracked runs and two preparations
def test_dgp_is_prepared_once_per_space_and_skipped_where_it_has_no_source(tmp_path, spaces, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    calls = _count_pretraining(monkeypatch)
    args = ["suite", "--spaces", spaces["a"], spaces["b"], spaces["c"], "--methods", "random,dgp", "--seeds", "3",
            "--budget", "10", "--jobs", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert calls == [10, 10]  # a and b, each on the other's autotvm seed-0 run, once for its 3 seeds
    assert out.count("[prepare]") == 2 and out.count("[source]") == 2
    assert "suite: dgp is not run on small_c: no source" in out
    result = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert result["not_run"] == {"dgp": {"small_c": "no source: no other space of the set is in its group (k (a, b, e))"}}
    assert len(result["run_ids"]) == 3 * 3 + 2 * 3  # random everywhere, dgp on a and b; sources not scored
    prepared = result["dgp"]["prepared"]
    assert set(prepared) == {"small_a", "small_b"} and result["dgp"]["sources"] == {"small_a": ["small_b"],
                                                                                    "small_b": ["small_a"]}
    sc = result["scores"]
    assert sc["aggregate"]["dgp"]["spaces"] == 2 and "dgp" not in sc["per_space"]["small_c"]
    assert [d["a"] + d["b"] for d in sc["differences"]] == []  # dgp ran on fewer spaces: no difference with it
    (sub,) = sc["subsets"]
    assert sub["spaces"] == ["small_a", "small_b"] and sub["methods_on"] == ["dgp"]
    assert {(d["a"], d["b"]) for d in sub["differences"]} == {("random", "dgp")}
    assert "| small_c | 80 | 74 | " in result["markdown"] and "not run |" in result["markdown"]
    for key in ("small_a|dgp|0", "small_b|dgp|2"):  # the runs used the prepared model: no pre-training on a clock
        tasks = _tasks_json(tmp_path, result["run_ids"][key])
        assert tasks["pretrain_cached"] == 1.0 and tasks["pretrain_s"] == 0.0 and tasks["role"] == "target"


def _tasks_json(work, run_id: str) -> dict:
    """The method's report of the run's one task."""
    (task,) = json.loads((work / "records" / run_id / "tasks.json").read_text())
    return task["method_report"]


def test_the_prepared_file_gives_the_same_model(tmp_path, spaces):
    from tunebench.methods.tensor_programs.dgp.model import DeepGP
    from tunebench.methods.tensor_programs.dgp.prepared import load_pretrained, save_pretrained

    rng = np.random.default_rng(0)
    x, y = rng.random((30, 3)).astype(np.float32), rng.random(30)
    model = DeepGP(x, hidden_dims=2, num_inducing=8, seed=3).fit(x, y, epochs=3)
    save_pretrained(str(tmp_path / "m.pt"), ("dgp", "k"), model)
    key, back, _ = load_pretrained(str(tmp_path / "m.pt"))
    assert key == repr(("dgp", "k"))
    assert np.array_equal(back.predict_mean(x, samples=4), model.predict_mean(x, samples=4))
    (tmp_path / "bad.pt").write_bytes(b"not a file")
    with pytest.raises(Exception, match="method.pretrained .*bad.pt: refused"):
        load_pretrained(str(tmp_path / "bad.pt"))


def test_the_schedule_prepares_once_after_the_sources_and_before_the_seeds():
    units = {(n, m): {"method": {"name": m}} for n in "abc" for m in ("random", "autotvm", "dgp")}
    del units[("c", "dgp")]
    dgp = suite_dgp.DgpPlan("dgp", {"a": ["b"], "b": ["a"]}, {"c": "no source"}, "autotvm", folder="/x")
    sched, order = suite_dgp.Schedule(units, 3, dgp), []
    assert [sched.pop(), sched.pop()] == [("run", ("a", "autotvm"), 0), ("run", ("b", "autotvm"), 0)]
    order += [("run", ("a", "autotvm"), 0), ("run", ("b", "autotvm"), 0)]
    sched.done(order[0], ("id", [], "/r/a.jsonl"))
    assert sched.ready[0] == ("prepare", "b")  # b's source is done: b's preparation first
    sched.done(order[1], ("id", [], "/r/b.jsonl"))
    while (job := sched.pop()) is not None:
        order.append(job)
        fn, *args = sched.call(job)
        if job[0] == "prepare":
            assert fn is suite_dgp.prepare and args[1] == ("/r/a.jsonl" if job[1] == "b" else "/r/b.jsonl")
            assert args[2].startswith("/x/" + job[1] + ".")
        elif job[1][1] == "dgp":  # after its preparation, with its file and sources
            assert ("prepare", job[1][0]) in order and args[0]["method"]["pretrained"] == sched.prepared[job[1][0]][1]
        sched.done(job, ("id", [], "/r/x.jsonl"))
    assert sorted(j for j in order if j[0] == "prepare") == [("prepare", "a"), ("prepare", "b")]  # once each
    runs = [j for j in order if j[0] == "run"]
    assert len(runs) == len(set(runs)) == len(units) * 3  # every run once, sources included
