"""``space merge``: a space measured in two sittings (two seeded samples on llvm) and merged into one file that
``target=replay`` reads; the refusal to merge parts measured on another device (another CPU model; for a GPU,
another model or driver) or parts of another space: one ``error:`` line, exit 2, nothing written."""

from __future__ import annotations

import json
import os

import pytest

from tunebench.datasets.space_file import read_space_file, space_file_lines, write_space_file
from tunebench.harness.commands.space_merge import device_of, merge_parts

LAYER = "model.layers=[{in_features:16,out_features:8}]"


def _main(argv, capsys):
    from tunebench.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.fixture(scope="module")
def sittings(tmp_path_factory):
    """One space measured in two sittings: the two disjoint parts (``--part 1/2``, ``2/2``) of one seeded sample of 6
    configs, into two folders."""
    from tunebench.__main__ import main

    root = tmp_path_factory.mktemp("sittings")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        paths = []
        for k in (1, 2):
            main(["space", "measure", "--out", f"part{k}", "--sample", "6", "--part", f"{k}/2", LAYER, "seed=0",
                  "progress=false"])
            (name,) = os.listdir(root / f"part{k}")
            paths.append(str(root / f"part{k}" / name))
    finally:
        os.chdir(cwd)
    return paths


def _rewritten(path: str, out: str, **changes) -> str:
    """A copy of the space file at ``path`` whose header has ``changes`` (nested dicts replace whole keys)."""
    head, rows = space_file_lines(path)
    write_space_file(out, {**{k: v for k, v in head.items() if k not in ("format", "version", "configs")},
                           **changes}, rows)
    return out


@pytest.mark.slow
def test_a_space_measured_in_two_sittings_merges_into_one_replayable_file(sittings, tmp_path, capsys):
    out = tmp_path / "merged.jsonl"
    from tunebench.__main__ import main

    main(["space", "merge", "--out", str(out), *sittings])
    assert capsys.readouterr().out.split() == [str(out)]
    (h0, r0), (h1, r1) = (space_file_lines(p) for p in sittings)
    head, rows = space_file_lines(str(out))
    first = {tuple(r["digits"]) for r in r0}
    assert rows[:3] == r0 and rows[3:] == [r for r in r1 if tuple(r["digits"]) not in first]  # the first sitting's kept
    assert head["configs"] == len({tuple(r["digits"]) for r in r0 + r1}) and head["subspace"] == {"merged": 2}
    assert [s["run_id"] for s in head["sittings"]] == [h0["run_id"], h1["run_id"]]
    assert [s["kept"] for s in head["sittings"]] == [3, 3] and not first & {tuple(r["digits"]) for r in r1}
    assert [s["subspace"]["part"] for s in head["sittings"]] == ["1/2", "2/2"]
    assert head["measured"] == [min(h0["measured"][0], h1["measured"][0]), max(h0["measured"][1], h1["measured"][1])]
    assert head["device"] == h0["device"] and device_of(head) == {"CPU": h0["machine"]["cpu"]}
    measured = read_space_file(str(out))
    assert measured.space.size == len(rows) and measured.device == h0["device"]["name"]


@pytest.mark.slow
def test_parts_from_another_cpu_or_of_another_space_are_refused(sittings, tmp_path, capsys):
    head = space_file_lines(sittings[1])[0]
    other = _rewritten(sittings[1], str(tmp_path / "other.jsonl"), machine={**head["machine"], "cpu": "Other CPU 9000"},
                       device={"name": "Other CPU 9000"})
    out = tmp_path / "merged.jsonl"
    code, err = _main(["space", "merge", "--out", str(out), sittings[0], other], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and "CPU Other CPU 9000" in err[0]
    assert "from one device" in err[0] and not out.exists()
    wider = _rewritten(sittings[1], str(tmp_path / "wider.jsonl"), space_size=head["space_size"] + 1)
    code, err = _main(["space", "merge", "--out", str(out), sittings[0], wider], capsys)
    assert code == 2 and err == [f"error: {wider}: header space_size differs from {sittings[0]}'s: not the same "
                                 "space (merge sittings of one space only)"] and not out.exists()
    code, err = _main(["space", "merge", "--out", str(out), sittings[0], sittings[0]], capsys)
    assert code == 2 and "given twice" in err[0] and not out.exists()


@pytest.mark.slow
def test_gpu_parts_merge_only_with_the_same_gpu_model_and_driver(sittings, tmp_path, capsys):
    """GPU parts (their recorded device facts faked): the same model and driver merge; another driver, another
    model, or a part that records no driver do not."""
    head = space_file_lines(sittings[0])[0]
    gpu = {"target": {**head["target"], "kind": "cuda"}}

    def part(i: int, file: str, **device) -> str:
        return _rewritten(sittings[i], str(tmp_path / file), **gpu, device=device)

    h100 = {"name": "NVIDIA H100 80GB HBM3", "driver": "12080"}
    a, b = part(0, "a.jsonl", **h100), part(1, "b.jsonl", **h100)
    out = tmp_path / "merged.jsonl"
    from tunebench.__main__ import main

    main(["space", "merge", "--out", str(out), a, b])
    assert device_of(space_file_lines(str(out))[0]) == {"GPU": "NVIDIA H100 80GB HBM3", "driver": "12080"}
    for file, device, says in (("driver.jsonl", {**h100, "driver": "12040"}, "driver 12040"),
                               ("model.jsonl", {**h100, "name": "NVIDIA H200"}, "GPU NVIDIA H200")):
        code, err = _main(["space", "merge", "--out", str(tmp_path / "no.jsonl"), a, part(1, file, **device)], capsys)
        assert code == 2 and len(err) == 1 and says in err[0] and "from one device" in err[0]
    nodriver = part(0, "nodriver.jsonl", name=h100["name"])
    code, err = _main(["space", "merge", "--out", str(tmp_path / "no.jsonl"), nodriver, b], capsys)
    assert code == 2 and len(err) == 1 and "records no driver" in err[0]
    assert not (tmp_path / "no.jsonl").exists()
    assert json.loads(open(a).readline())["device"] == h100


def test_a_config_measured_in_two_sittings_keeps_the_first_measurement():
    def part(run_id: str, digits: list) -> tuple[str, dict, list]:
        head = {"run_id": run_id, "date": "2026-11-29", "measured": ["a", "b"], "subspace": {"sample": 2}}
        return f"{run_id}.jsonl", head, [{"digits": d, "latency_s": float(len(run_id))} for d in digits]

    head, rows = merge_parts([part("r1", [[0], [1]]), part("run2", [[1], [2]])])
    assert [(r["digits"], r["latency_s"]) for r in rows] == [([0], 2.0), ([1], 2.0), ([2], 4.0)]
    assert [(s["configs"], s["kept"]) for s in head["sittings"]] == [(2, 2), (2, 1)]


def test_parts_differing_only_in_the_template_files_tunebench_imports_merge(tmp_path, capsys):
    """Two parts whose template code digests agree merge though the whole template file's digests differ (a
    tunebench module moved between the sittings); another code digest is another space."""
    from helpers import write_tiny_space

    a, b, c = (str(tmp_path / f"{n}.jsonl") for n in "abc")
    write_tiny_space(a)
    write_tiny_space(b, sha="2" * 64)
    write_tiny_space(c, code_sha="3" * 64)
    out = tmp_path / "merged.jsonl"
    code, err = _main(["space", "merge", "--out", str(out), a, c], capsys)
    assert code == 2 and err == [f"error: {c}: header task differs from {a}'s: not the same space (merge sittings "
                                 "of one space only)"] and not out.exists()
    from tunebench.__main__ import main

    main(["space", "merge", "--out", str(out), a, b])
    assert read_space_file(str(out)).meta["task"] == space_file_lines(a)[0]["task"]
