"""target=accel against DOSA's FireSim data: the reader on an excerpt (units, failure markers), the shipped file's
checksum, one row's mapping as a hand-computed tiling evaluated by ZigZag, a row the mapspace cannot express."""

from __future__ import annotations

import os
import shutil

import pytest

from tunebench.errors import UserError
from tunebench.resources import data_dir
from tunebench.targets.accel import dosa

HEADER_AND_ROWS = 3  # header + the first two rows of the shipped file in the excerpt


def excerpt(tmp_path, extra: list[str] = ()) -> str:
    lines = open(data_dir(*dosa.FILE)).read().splitlines()
    path = tmp_path / "excerpt.csv"
    path.write_text("\n".join(lines[:HEADER_AND_ROWS] + list(extra)) + "\n")
    return str(path)


def with_cycles(line: str, gemmini_cycle: str) -> str:
    """A data row with its ``target.gemmini_cycle`` (the last column) replaced."""
    return line.rsplit(",", 1)[0] + "," + gemmini_cycle


def test_reader_on_an_excerpt_units_and_failure_markers(tmp_path):
    first = open(data_dir(*dosa.FILE)).read().splitlines()[1]
    rows = dosa.read_rows(excerpt(tmp_path, [with_cycles(first, "nan"), with_cycles(first, ""),
                                             with_cycles(first, "-1")]))
    assert len(rows) == 5
    r = rows[0]  # BERT's 128 x 768 x 768 product as Timeloop's cnn-layer
    assert r.loops == {"B": 1, "K": 768, "C": 768, "OY": 1, "OX": 128, "FY": 1, "FX": 1} and r.stride == 1
    assert r.array == 16
    assert r.accumulator_kib == 256 * 32 * 16 / 8192 == 16  # mem1: depth x width x instances bits
    assert r.scratchpad_kib == 6912 * 128 / 8192 == 108  # mem2: depth x width bits
    assert r.accumulator_bw_bits == 2 * 32 * 16 and r.scratchpad_bw_bits == 32 * 8
    assert r.timeloop_cycles == 294912 and r.timeloop_energy_uj == pytest.approx(196.615)
    assert r.firesim_cycles == 566626 and r.firesim_auto_cycles == 370440
    # levels inner to outer (registers .. DRAM), loops outer to inner as written; spatial factors apart
    assert r.levels == ((("OX", 8),), (("C", 48), ("OX", 16)), (), (("K", 48),))
    assert r.spatial == {"K": 16, "C": 16} and r.problem is None
    assert [x.firesim_cycles for x in rows[2:]] == [None, None, None]  # failed entries are no numbers


def test_unreadable_mapping_is_a_problem_not_an_exception():
    levels, spatial, problem = dosa.parse_mapping("L3[WIO] K48 - L2[WI] K16X")
    assert problem == "2 levels, not 4"
    assert dosa.parse_mapping("L3[WIO] K4 - L2[WI] N1 K16X - L1[O] Z4 C16X - L0[W] N1")[2] == \
        "loop 'Z4' is not <dim><factor>[X]"


def test_missing_column_missing_file_and_edited_shipped_file(tmp_path, monkeypatch):
    bad = tmp_path / "bad.csv"
    bad.write_text("target.cycle,mapping.mapping\n1,x\n")
    with pytest.raises(UserError, match="column prob.N is missing"):
        dosa.read_rows(str(bad))
    with pytest.raises(UserError, match="is missing"):
        dosa.read_rows(str(tmp_path / "none.csv"))
    assert len(dosa.read_rows()) == 222  # the shipped file passes its own check
    # a copy of the shipped folder standing in for data/: one edited byte is one error
    root = tmp_path / "data"
    shutil.copytree(data_dir("dosa_firesim"), root / "dosa_firesim")
    monkeypatch.setattr("tunebench.datasets.shipped.data_dir", lambda *p: os.path.join(str(root), *p))
    path = root / "dosa_firesim" / "dataset.csv"
    assert len(dosa.read_rows(str(path))) == 222
    path.write_text(path.read_text().replace("566626.0", "566627.0", 1))
    with pytest.raises(UserError, match="sha256 .* edited or is corrupt"):
        dosa.read_rows(str(path))


def test_benchmark_exit_code_of_a_bad_file(tmp_path, capsys):
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from _common import run_main

    assert run_main(lambda: dosa.read_rows(str(tmp_path / "none.csv"))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: DOSA data ")


def test_one_row_evaluated_by_zigzag_as_the_hand_computed_tiling():
    pytest.importorskip("zigzag")
    from tunebench.datasets.models import LayersModel
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import AccelTarget

    row = dosa.read_rows()[0]  # L3[WIO] K48 - L2[WI] N1 K16X - L1[O] C48 P16 C16X - L0[W] P8
    r = dosa.evaluate_row(row, AccelSettings())
    # by hand: K 768 = 16 (columns) x 48 (DRAM); C 768 = 16 (rows) x 48 (accumulator); P 128 = 16 x 8;
    # per level inner to outer, loops inner to outer
    assert r["nest"] == [[("OX", 8)], [("OX", 16), ("C", 48)], [], [("K", 48)]]
    assert r["fits"]
    macs = 768 * 768 * 128
    assert r["cycles"] >= macs / 256  # never faster than every PE busy every cycle (Timeloop's 294912)
    # the same mapping through target=accel itself, on the row's accelerator, gives the same cycles
    settings = dosa.settings_of(row, AccelSettings())
    target = AccelTarget(settings)
    task = target.load_tasks(LayersModel(name="dosa0", layers=[dosa.layer_spec(row)]))[0][0]
    config = dosa.to_config(row, task.mod)
    assert task.mod.nest(config) == r["nest"]
    assert target.evaluate(task, config)["cycles"] == r["cycles"]
    # the row's own bandwidths matter: target=accel's (wider DRAM bus) gives fewer cycles
    own = dosa.evaluate_row(row, AccelSettings(), dosa_bandwidths=False)
    assert own["nest"] == r["nest"] and own["cycles"] < r["cycles"]


def test_a_row_with_a_smaller_spatial_unrolling_is_reported_not_raised():
    from tunebench.targets.accel.settings import AccelSettings

    row = next(r for r in dosa.read_rows() if r.spatial.get("K") == 12)
    out = dosa.evaluate_row(row, AccelSettings())
    assert out == {"not_expressible": "unrolls K by 12; target=accel unrolls 16"}


def test_every_file_of_the_folder_is_listed_with_its_sha256():
    import hashlib

    folder = data_dir("dosa_firesim")
    listed = dict(line.split("  ")[::-1] for line in open(os.path.join(folder, "SHA256SUMS")).read().splitlines())
    assert set(listed) == set(os.listdir(folder)) - {"SHA256SUMS", "README.md", "__pycache__"}
    for name, digest in listed.items():
        assert hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest() == digest, name
