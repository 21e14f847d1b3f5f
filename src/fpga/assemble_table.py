"""Assemble a design-space table from earlier record files plus live measurements of what is missing.

``python -m tunebench.fpga.assemble_table --kernel gemm --out data/fpga/gemm.csv records/<run>/records.jsonl ...``

Every (config, fidelity) of the kernel's current pruned space found in the record files (matched by
knob values, so records of an earlier, larger space count) is reused; the rest is measured with
``target=fpga_open`` (conf/target/fpga_open.yaml) in index order, as ``method=exhaustive`` would.
The result equals an exhaustive run for the same tool versions (nextpnr's placer seed is fixed);
only the recorded tool seconds differ with machine load. ``--new-records <file>`` appends every live
measurement to a record file as it arrives, so an interrupted run can be resumed by passing that file
back among the record files.
"""

from __future__ import annotations

import argparse
import logging
import os

import yaml

from tunebench.fpga.table import write_table
from tunebench.fpga.tasks import fpga_tasks
from tunebench.harness.records import RecordFile, read_records
from tunebench.targets import make_target
from tunebench.task import Measurement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--new-records", default=None, help="append live measurements here (JSON lines)")
    ap.add_argument("--reverse", action="store_true",
                    help="measure the missing configs from the last index down (a second worker beside a forward run)")
    ap.add_argument("records", nargs="*")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    with open(os.path.join(ROOT, "conf", "target", "fpga_open.yaml")) as fh:
        tcfg = yaml.safe_load(fh)
    tcfg["workdir"] = args.workdir
    target = make_target(tcfg)
    task = fpga_tasks({"name": f"hls_{args.kernel}", "kernel": args.kernel}, "fpga_open")[0]
    space = task.space
    have: dict[tuple[int, str], Measurement] = {}
    for path in args.records:
        for rec in read_records(path):  # a killed worker's half line is left out
            try:
                cfg = space.from_dict(rec["config"])
            except (ValueError, KeyError):
                continue  # a config of the earlier space that this space prunes
            rec = {**rec, "index": cfg.index}
            have[(cfg.index, rec["fidelity"])] = Measurement.from_record(rec, space)
    logging.info("%s: %d configs x %d fidelities, %d reused from records", args.kernel, space.size,
                 len(target.fidelities), len(have))
    new_records = RecordFile(args.new_records) if args.new_records else None
    out = []
    for i in (reversed(range(space.size)) if args.reverse else range(space.size)):
        for f in target.fidelities:
            if (i, f) not in have:
                m = target.measure(task, [space.get(i)], f)[0]
                logging.info("config %d %s: %s %s", i, f, m.objectives, m.error)
                if new_records:
                    new_records.append(m, task)
                have[(i, f)] = m
            out.append(have[(i, f)])
    target.close()
    if new_records:
        new_records.close()
    out.sort(key=lambda m: m.config.index)  # stable: fidelities stay in order within a config
    write_table(args.out, space, target.fidelities, target.objectives, out)
    logging.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
