"""Measured TVM spaces as versioned files: written and read back (plain and gzipped), replayed with their
recorded latencies, noise marks and seconds, refused when truncated, corrupt, edited, of another version
or of a changed template; ``method=exhaustive``'s bounded and sampled subspaces; ``space measure`` on a
tiny dense layer end to end (measured, written, replayed) and its one-line refusals."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from helpers import tiny_space, write_tiny_space
from tunebench.config.arguments import parse_part
from tunebench.config.experiment import Budget
from tunebench.datasets.models import MeasuredModel
from tunebench.datasets.space_file import read_measured, read_space_file
from tunebench.errors import UserError
from tunebench.harness.loop import tune_task
from tunebench.methods import make_method
from tunebench.methods.exhaustive import exhaustive_queue
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.targets.replay import ReplaySettings, ReplayTarget, check_template
from tunebench.targets.tvm.template_files import template_code_digest, template_source_digest


def _file(tmp_path, name="s.jsonl", sha=None, code_sha=None) -> tuple[str, list[dict]]:
    path = str(tmp_path / name)
    return path, write_tiny_space(path, sha=sha, code_sha=code_sha)


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.gz"])
def test_a_space_file_reads_back_with_the_templates_own_knobs(tmp_path, name):
    path, rows = _file(tmp_path, name)
    if name.endswith(".gz"):
        assert open(path, "rb").read(2) == b"\x1f\x8b"
    m = read_space_file(path)
    assert m.space.size == 8 and m.device == "Test CPU" and m.flops == 2_000_000
    assert [k.describe() for k in m.space.knobs] == tiny_space().describe()  # split knob: its log features
    assert m.space.features([0]).tolist() == tiny_space().features([0]).tolist()
    assert [r.latency_s for r in m.rows] == [r["latency_s"] for r in rows]
    assert m.rows[3].error == "build: boom" and m.rows[1].noisy and not m.rows[0].noisy
    assert m.meta["task"]["template"] == "packed" and m.meta["configs"] == 8


def test_replay_serves_recorded_latencies_noise_marks_and_seconds(tmp_path):
    path, rows = _file(tmp_path)
    target = ReplayTarget(ReplaySettings())
    task = target.load_tasks(MeasuredModel(path=path))[0][0]
    assert task.kind == "dense" and task.shape["batch"] == 1 and task.shape["template"] == "packed"
    res = tune_task(task, make_method("random"), target, Budget(8), np.random.default_rng(0))
    assert len(res.measurements) == 8
    for m in res.measurements:
        row = rows[m.config.index]
        assert m.config.to_dict() == row["config"]
        assert m.cost_s == pytest.approx(row["build_s"] + row["run_s"])
        assert m.valid == (row["latency_s"] is not None) and m.noisy == row["noisy"]
        if m.valid:
            assert m.latency_s == row["latency_s"] and m.gflops == pytest.approx(2e6 / row["latency_s"] / 1e9)
    assert res.measurements[-1].search_s >= sum(r["build_s"] + r["run_s"] for r in rows)


def test_a_space_of_a_changed_template_is_refused(tmp_path):
    """The template's code digest decides; the whole file's digest is then only a record."""
    path, _ = _file(tmp_path, code_sha="0" * 64)
    with pytest.raises(UserError, match=r"template packed from targets/tvm/templates/cpu_packed.py \(code sha256 "
                                        r"000000000000\), which differs.*re-measure it") as exc:
        ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))
    assert "\n" not in str(exc.value)
    path, _ = _file(tmp_path, name="t.jsonl", sha="0" * 64)
    assert ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))[0][0].space.size == 8


def test_a_file_without_the_code_digest_is_checked_by_the_whole_files(tmp_path):
    """A space file written before ``template_code_sha256`` existed: its ``template_sha256`` (the whole
    template file's) must be this checkout's file's, else it is refused in one line."""
    path, _ = _file(tmp_path, code_sha="")
    assert "template_code_sha256" not in read_space_file(path).meta["task"]
    assert ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))[0][0].space.size == 8
    path, _ = _file(tmp_path, name="old.jsonl", sha="1" * 64, code_sha="")
    with pytest.raises(UserError, match=r"^model.path=.*old.jsonl: measured with template packed from "
                                        r"targets/tvm/templates/cpu_packed.py \(sha256 111111111111\), which differs "
                                        r"from this checkout's \(\w{12}\).*re-measure it") as exc:
        ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))
    assert "\n" not in str(exc.value)


def test_the_shipped_spaces_name_a_known_version_of_this_checkouts_template():
    """The six CPU spaces (measured before the code digest existed; their bytes, and so their task ids and seeded
    replays, as measured) record a whole-file sha256 that names a known version of the template whose code
    digest is this checkout's, so they replay; the same file naming an unknown version is refused."""
    from tunebench.datasets.shipped import space_set
    from tunebench.targets.tvm.template_files import KNOWN_SOURCES

    for path in space_set("cpu"):
        task = read_measured(path).meta["task"]
        assert "template_code_sha256" not in task and task["template_sha256"] in KNOWN_SOURCES, path
        assert KNOWN_SOURCES[task["template_sha256"]] == template_code_digest(task["template_file"]), path
        check_template(task, path)
    with pytest.raises(UserError, match="differs from this checkout's"):
        check_template({**task, "template_sha256": "2" * 64}, path)


def _rewrite(path: str, edit) -> None:
    lines = open(path).read().splitlines(keepends=True)
    open(path, "w").write("".join(edit(lines)))


@pytest.mark.parametrize("edit, message", [
    (lambda L: L[:-1], "7 measured configs, the header says 8: the file is truncated"),
    (lambda L: L[:4] + ["{not json\n"] + L[5:], r":5: not JSON \(corrupt or truncated file\)"),
    (lambda L: L[:5] + [L[5].replace('"unroll":1', '"unroll":0')] + L[6:], "is not what digits"),
    (lambda L: [L[0].replace('"version":1', '"version":7')] + L[1:], "space file version 7; this tunebench reads "
                                                                     "version 1"),
    (lambda L: [L[0].replace('"type":"split"', '"type":"spiral"')] + L[1:], "is not a knob description"),
])
def test_a_broken_space_file_is_one_error(tmp_path, edit, message):
    path, _ = _file(tmp_path)
    _rewrite(path, edit)
    with pytest.raises(UserError, match=message):
        read_space_file(path)


def test_read_measured_tells_space_files_from_kernel_tuner_caches(tmp_path):
    path, _ = _file(tmp_path)
    assert read_measured(path).meta["name"] == "layers/tiny"
    assert read_measured("kernel_tuner/convolution_MI50.json.gz").meta == {}
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(UserError, match="not a Kernel Tuner cache"):
        read_measured(str(other))
    gz = tmp_path / "g.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"format":"tunebench-space","version":1}\n'))
    with pytest.raises(UserError, match="the header has no name"):
        read_measured(str(gz))


def test_exhaustive_bounds_and_samples_the_space():
    space = Space([SplitKnob("a", 16, 3), ChoiceKnob("b", (0, 1))])
    everything = exhaustive_queue(space, ["hw"])
    assert len(everything) == space.size
    bounded = exhaustive_queue(space, ["hw"], max_factor=2)
    assert bounded and all(max(space.get(i)["a"][1:]) <= 2 for i, _ in bounded)
    assert len(bounded) < space.size
    sample = exhaustive_queue(space, ["hw"], sample=(5, 7))
    assert len(sample) == 5 and sample == exhaustive_queue(space, ["hw"], sample=(5, 7))
    assert sample != exhaustive_queue(space, ["hw"], sample=(5, 8))
    assert [i for i, _ in sample] == sorted(i for i, _ in sample)


def test_exhaustive_parts_split_one_seeded_sample_into_disjoint_pieces():
    """``part=(K, N)``: the N parts of the same seeded sample (or of the whole space) do not overlap, are within
    one config of each other's size and together make the whole; (1, 1) is everything."""
    space = Space([SplitKnob("a", 16, 3), ChoiceKnob("b", (0, 1))])
    for sample in ((7, 3), None):
        whole = exhaustive_queue(space, ["hw"], sample=sample)
        assert exhaustive_queue(space, ["hw"], sample=sample, part=(1, 1)) == whole
        parts = [exhaustive_queue(space, ["hw"], sample=sample, part=(k, 3)) for k in (1, 2, 3)]
        assert sorted(sum(parts, [])) == sorted(whole) and len(set(sum(parts, []))) == len(whole)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert [parse_part(t) for t in ("1/2", "2/2", " 3 / 4 ", "0/2", "3/2", "1", "a/b", "-1/2")] == [
        (1, 2), (2, 2), (3, 4), None, None, None, None, None]


def _main(argv, capsys):
    from tunebench.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("args, message", [
    (["method=random"], "space measure sets method itself"),
    (["budget.trials_per_task=4"], "sets budget.trials_per_task itself"),
    (["--sample", "0"], "--sample=0: must be a whole number >= 1"),
    (["--part", "3/2"], "--part=3/2: must be K/N with whole numbers 1 <= K <= N"),
])
def test_space_measure_refuses_what_it_sets_itself(tmp_path, capsys, args, message):
    code, err = _main(["space", "measure", "--out", str(tmp_path / "out"), *args], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and message in err[0]
    assert not (tmp_path / "out").exists()


def test_space_measure_resumes_on_the_same_machine_only(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".measuring.json").write_text(json.dumps({"run_id": "r1", "records": "x", "commit": "c",
                                                     "machine": {"cpu": "Other CPU", "cores": 64, "host": "elsewhere"},
                                                     "overrides": []}))
    code, err = _main(["space", "measure", "--out", str(out)], capsys)
    assert code == 2 and len(err) == 1 and "timings come from one machine" in err[0] and "Other CPU" in err[0]
    assert sorted(os.listdir(out)) == [".measuring.json"]


def test_space_measure_refuses_an_out_it_cannot_use_and_leaves_nothing(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, err = _main(["space", "measure", "--out", str(afile)], capsys)
    assert code == 2 and err == [f"error: --out={afile}: is a file; give a folder"]
    code, err = _main(["space", "measure", "--out", str(afile / "sub")], capsys)
    assert code == 2 and len(err) == 1 and "cannot be written" in err[0]
    code, err = _main(["space", "measure", "--out", str(tmp_path / "new"), "model=nope"], capsys)  # refused run
    assert code == 2 and len(err) == 1 and "model='nope' is unknown" in err[0]
    assert sorted(os.listdir(tmp_path)) == ["afile"]  # no empty --out folder left behind


def test_a_second_space_measure_into_one_folder_is_refused_naming_the_first(tmp_path, capsys):
    from tunebench.targets.devicelock import lock_now

    out = tmp_path / "out"
    out.mkdir()
    held = lock_now(str(out / ".measuring.lock"))  # the first one, measuring
    try:
        code, err = _main(["space", "measure", "--out", str(out)], capsys)
    finally:
        held.close()
    assert code == 2 and len(err) == 1 and "another space measure is measuring into it" in err[0]
    assert f"pid {os.getpid()} " in err[0]
    assert sorted(os.listdir(out)) == [".measuring.lock"]  # the first one's lock, untouched


def test_space_measure_then_replay_reproduces_the_measurements(tmp_path, monkeypatch, capsys):
    """A 3-config sample of a tiny dense layer measured on llvm, written, and replayed by random search."""
    monkeypatch.chdir(tmp_path)
    from tunebench.__main__ import main

    main(["space", "measure", "--out", "spaces", "--sample", "3", "model.layers=[{in_features:16,out_features:8}]",
          "progress=false"])
    written = capsys.readouterr().out.split()
    assert len(written) == 1 and written[0].endswith("llvm_dense_1x16x8.jsonl")
    assert sorted(os.listdir("spaces")) == ["llvm_dense_1x16x8.jsonl"]  # the state file is gone
    lines = [json.loads(line) for line in open(written[0])]
    head, rows = lines[0], lines[1:]
    assert head["configs"] == 3 == len(rows) and head["subspace"]["sample"] == 3 and head["best_check"]["ok"]
    assert head["task"]["template_sha256"] == template_source_digest(head["task"]["template_file"])
    assert head["task"]["template_code_sha256"] == template_code_digest(head["task"]["template_file"])
    target = ReplayTarget(ReplaySettings())
    task = target.load_tasks(MeasuredModel(path=written[0]))[0][0]
    res = tune_task(task, make_method("random"), target, Budget(3), np.random.default_rng(1))
    by_config = {json.dumps(r["config"], sort_keys=True): r for r in rows}
    for m in res.measurements:
        row = by_config[json.dumps(m.config.to_dict(), sort_keys=True)]
        assert m.latency_s == row["latency_s"] and m.cost_s == pytest.approx(row["build_s"] + row["run_s"])
