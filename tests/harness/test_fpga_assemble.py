"""assemble_table: a table from record files (matched by knob values), in index order, without tools."""
import json

import pandas as pd

from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.harness.commands import assemble_table
from tunebench.record_file import read_records, record_line
from tunebench.targets.fpga.tasks import fpga_tasks
from tunebench.task import Measurement, Outcome
from tunebench.testing.fakes import FakeTarget


def test_table_from_records_in_index_order(tmp_path):
    task = fpga_tasks(MODEL_OPTIONS["hls_conv"], "fpga_open")[0]
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for i in reversed(range(task.space.size)):  # written last index first, split over two files
        for f in ("estimate", "synth", "impl"):
            m = Measurement(task.id, task.space.get(i), Outcome.OK, fidelity=f,
                            objectives={"delay_s": 1e-6 * (i + 1), "luts": 100.0 + i, "ffs": 50.0},
                            stage_s={f: 1.0})
            with open(paths[i % 2], "a") as fh:
                rec = record_line(m, task)
                rec["index"] = 10_000 + i  # another space's index: matching goes by knob values
                fh.write(json.dumps(rec) + "\n")
    out = tmp_path / "conv.csv"
    assemble_table.main(["--kernel", "conv", "--reverse", "--out", str(out), *map(str, paths)])
    df = pd.read_csv(out)
    assert list(df["index"]) == list(range(task.space.size))
    assert list(df["impl.luts"]) == [100.0 + i for i in range(task.space.size)]
    assert df.loc[5, "unroll_oy"] == task.space.get(5).to_dict()["unroll_oy"]


FIDS = ("estimate", "synth", "impl")
OBJS = ("delay_s", "luts", "ffs")


def _fake(task, i, f):
    """A synthetic measurement of config ``i`` at ``f`` (impl invalid for every 7th config)."""
    if f == "impl" and i % 7 == 0:
        return Measurement(task.id, task.space.get(i), Outcome.INFEASIBLE, error="impl: does not fit", fidelity=f,
                           stage_s={"impl": 3.0})
    stage = {"estimate": {"estimate": 0.01}, "synth": {"sim": 0.5, "synth": 2.0 + i}, "impl": {"impl": 5.0 + i}}[f]
    return Measurement(task.id, task.space.get(i), Outcome.OK, fidelity=f,
                       objectives={"delay_s": 1e-6 * (i + 1), "luts": 100.0 + i + FIDS.index(f), "ffs": 50.0},
                       stage_s=stage)


class OpenFlowStandIn(FakeTarget):
    """Stands in for fpga_open: the synthetic measurements of :func:`_fake`; records which
    (index, fidelity) it was asked to measure."""

    def __init__(self, task):
        super().__init__(name="fpga_open", objectives=OBJS, fidelities=FIDS, batch_size=1)
        self.task = task

    @property
    def asked(self) -> list[tuple[int, str]]:
        return [(i, fid) for fid, indices in self.calls for i in indices]

    def evaluate(self, configs, fidelity):
        return [{} for _ in configs]  # measurement() makes them

    def measurement(self, task, config, fidelity, values):
        return _fake(task, config.index, fidelity)


def _conv_task():
    return fpga_tasks(MODEL_OPTIONS["hls_conv"], "fpga_open")[0]


def test_earlier_table_is_reused_by_knob_values(tmp_path, monkeypatch):
    """An earlier table of a smaller space (its own indices) plus records of the new designs give the
    whole table with no measurement; stage seconds keep their stages (sim + synth at synth)."""
    from tunebench.targets.fpga.table import write_table

    task = _conv_task()
    n = task.space.size
    everything = [_fake(task, i, f) for i in range(n) for f in FIDS]
    full = tmp_path / "full.csv"
    write_table(str(full), task.space, list(FIDS), list(OBJS), everything)
    df = pd.read_csv(full)
    old = df[df["mul_core"] == "dsp"].copy()  # the earlier space had DSP multipliers only
    old["index"] = range(len(old))
    old_path = tmp_path / "old.csv"
    old.to_csv(old_path, index=False)
    recs = tmp_path / "lut.jsonl"
    with open(recs, "w") as fh:
        for m in everything:
            if m.config.to_dict()["mul_core"] == "lut":
                fh.write(json.dumps(record_line(m, task)) + "\n")
    fake = OpenFlowStandIn(task)
    monkeypatch.setattr(assemble_table, "make_target", lambda cfg: fake)
    out = tmp_path / "conv.csv"
    assemble_table.main(["--kernel", "conv", "--table", str(old_path), "--out", str(out), str(recs)])
    assert fake.asked == []
    got, want = pd.read_csv(out), pd.read_csv(full)
    pd.testing.assert_frame_equal(got, want)
    assert got["impl.valid"].sum() < n  # invalid rows survive the round trip as invalid


def test_shard_and_only_pick_the_missing_configs(tmp_path, monkeypatch):
    task = _conv_task()
    space = task.space
    fake = OpenFlowStandIn(task)
    monkeypatch.setattr(assemble_table, "make_target", lambda cfg: fake)
    assemble_table.main(["--kernel", "conv", "--shard", "1/3", "--only", "unroll_ox=3", "--only", "mul_core=lut",
                         "--new-records", str(tmp_path / "new.jsonl")])
    want = [i for i in range(space.size) if i % 3 == 1 and space.get(i).to_dict()["unroll_ox"] == 3
            and space.get(i).to_dict()["mul_core"] == "lut"]
    assert want and [i for i, f in fake.asked if f == "impl"] == want
    assert len(fake.asked) == 3 * len(want)
    assert len(read_records(str(tmp_path / "new.jsonl"))) == 3 * len(want)


def test_bad_shard_and_only_are_one_line_errors(monkeypatch):
    import pytest

    monkeypatch.setattr(assemble_table, "make_target", lambda cfg: OpenFlowStandIn(_conv_task()))
    for argv, says in ((["--shard", "2/2"], "K must be in 0..N-1"), (["--shard", "x"], "is not K/N"),
                       (["--only", "unroll_ox=5"], "valid values: 1, 2, 3"),
                       (["--only", "colour=red"], "unknown knob"),
                       (["--table", "no/such.csv"], "table 'no/such.csv' does not exist")):
        with pytest.raises(SystemExit, match=says):
            assemble_table.main(["--kernel", "conv", "--out", "unused.csv", *argv])
