"""assemble_table: a table from record files (matched by knob values), in index order, without tools."""
import json

import pandas as pd

from tunebench.fpga import assemble_table
from tunebench.fpga.tasks import fpga_tasks
from tunebench.harness.records import record_line
from tunebench.task import Measurement


def test_table_from_records_in_index_order(tmp_path):
    task = fpga_tasks({"name": "hls_conv", "kernel": "conv"}, "fpga_open")[0]
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for i in reversed(range(task.space.size)):  # written last index first, split over two files
        for f in ("estimate", "synth", "impl"):
            m = Measurement(task.id, task.space.get(i), valid=True, latency_s=1e-6 * (i + 1), fidelity=f,
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
