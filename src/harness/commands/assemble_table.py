"""Assemble a design-space table from earlier record files plus live measurements of what is missing.

``python -m tunebench.harness.commands.assemble_table --kernel gemm --out data/fpga/gemm.csv records/<run>/records.jsonl ...``

Every (config, fidelity) of the kernel's current pruned space found in the record files or in an
earlier table (``--table``; both matched by knob values, so the measurements of an earlier space count)
is reused; the rest (or the part of it ``--shard K/N`` and ``--only KNOB=VALUE`` select) is measured with
``target=fpga_open`` (conf/target/fpga_open.yaml) by the harness's tuning loop with ``method=exhaustive``.
The result equals an exhaustive run for the same tool versions (nextpnr's placer seed is fixed);
only the recorded tool seconds differ with machine load. ``--new-records <file>`` appends every live
measurement to a record file as it arrives, so an interrupted run can be resumed by passing that file
back among the record files.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.errors import UserError
from tunebench.harness.observers import Observer
from tunebench.record_file import RecordFile, read_records
from tunebench.targets import make_target
from tunebench.targets.fpga.settings import FPGAOpenSettings
from tunebench.targets.fpga.table import table_measurements, write_table
from tunebench.targets.fpga.tasks import fpga_tasks
from tunebench.task import Measurement


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", default=None, help="write the table here (CSV); without it only --new-records is written")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--new-records", default=None, help="append live measurements here (JSON lines)")
    ap.add_argument("--reverse", action="store_true",
                    help="measure the missing configs from the last index down (a second worker beside a forward run)")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="measure only the missing configs whose index is K modulo N (one of N parallel workers)")
    ap.add_argument("--only", action="append", default=[], metavar="KNOB=VALUE",
                    help="measure only the missing configs with this knob value (e.g. the new value of an extended "
                         "knob); repeatable, all must hold")
    ap.add_argument("--table", action="append", default=[],
                    help="reuse the rows of an earlier table (CSV) whose knobs are in the space; repeatable")
    ap.add_argument("records", nargs="*")
    args = ap.parse_args(argv)
    shard = _parse_shard(args.shard)
    only = _parse_only(args.only)
    if not args.out and not args.new_records:
        ap.error("give --out, --new-records or both (otherwise nothing measured is kept)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    target = make_target(FPGAOpenSettings(workdir=args.workdir))
    task = fpga_tasks(MODEL_OPTIONS[f"hls_{args.kernel}"], "fpga_open")[0]
    space = task.space
    for knob, value in only.items():
        valid = [str(v) for v in space.knobs[space.names.index(knob)].entities] if knob in space.names else None
        if valid is None or value not in valid:
            raise SystemExit(f"error: --only {knob}={value}: " + (f"valid values: {', '.join(valid)}" if valid else
                             f"unknown knob; valid: {', '.join(space.names)}"))
    have: dict[tuple[int, str], Measurement] = {}
    for path in args.records:
        for rec in read_records(path):  # a killed worker's half line is left out
            try:
                cfg = space.from_dict(rec["config"])
            except (ValueError, KeyError):
                continue  # a config of the earlier space that this space prunes
            rec = {**rec, "index": cfg.index}
            have[(cfg.index, rec["fidelity"])] = Measurement.from_record(rec, space)
    for path in args.table:
        try:
            reused = table_measurements(path, task, target.fidelities, target.objectives)
        except UserError as exc:
            raise SystemExit(f"error: {exc}") from None
        for m in reused:
            have.setdefault((m.config.index, m.fidelity), m)
    logging.info("%s: %d configs x %d fidelities, %d reused from records and tables", args.kernel, space.size,
                 len(target.fidelities), len(have))
    part = {"reverse": args.reverse, "shard": shard, "only": only, "skip": frozenset(have)}
    out = _measure_missing(target, task, part, args.new_records) + [m for m in have.values() if m.fidelity in target.fidelities]
    out.sort(key=lambda m: (m.config.index, target.fidelities.index(m.fidelity)))
    if args.out:
        write_table(args.out, space, target.fidelities, target.objectives, out)
        logging.info("wrote %s (%d of %d configs x fidelities measured)", args.out, len(out),
                     space.size * len(target.fidelities))


class _LogEach(Observer):
    """One log line per measurement (a table takes hours: the log shows it moving)."""

    def batch_measured(self, batch, result) -> None:
        for m in batch:
            logging.info("config %d %s: %s %s", m.config.index, m.fidelity, m.objectives, m.error)


def _measure_missing(target, task, part: dict, new_records_path: str | None) -> list[Measurement]:
    """Measure the (config, fidelity) pairs ``part`` selects (:func:`~tunebench.methods.exhaustive.exhaustive_queue`) through the harness loop with
    ``method=exhaustive``; each is appended to ``--new-records`` as it arrives."""
    from tunebench.harness.loop import tune_task
    from tunebench.harness.observers import RecordWriter
    from tunebench.methods.base import Budget
    from tunebench.methods.exhaustive import Exhaustive, exhaustive_queue

    n = len(exhaustive_queue(task.space, target.fidelities, **part))
    if n == 0:
        target.close()
        return []
    new_records = RecordFile(new_records_path) if new_records_path else None
    observers = [_LogEach()] + ([RecordWriter(new_records, task)] if new_records else [])
    target.start()
    try:
        result = tune_task(task, Exhaustive(**part), target, Budget(trials_per_task=n), np.random.default_rng(0),
                           observers=observers)
    finally:
        target.close()
        if new_records:
            new_records.close()
    return result.measurements


def _parse_only(items: list[str]) -> dict[str, str]:
    """``["unroll_ox=6", ...]`` -> {"unroll_ox": "6", ...} (values compared as text)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"error: --only {item!r} is not KNOB=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _parse_shard(text: str | None) -> tuple[int, int]:
    """``"K/N"`` -> (K, N) with 0 <= K < N; None -> (0, 1)."""
    if text is None:
        return 0, 1
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise SystemExit(f"error: --shard={text!r} is not K/N (two whole numbers, e.g. 0/2)") from None
    if not 0 <= k < n:
        raise SystemExit(f"error: --shard={text!r}: K must be in 0..N-1")
    return k, n


if __name__ == "__main__":
    main()
