"""``python -m tunebench space merge --out FILE A B [...]``: one space file from a space measured in several
sittings (``space measure`` into several folders, e.g. seeded samples when one sitting on a lent GPU is too
short for all of it).

The parts must be the same space (name, task and template file, target, knobs, TVM version; of the template
the sha256 of its code when both parts record it, else the whole file's) measured on the same device: for a
GPU the same model and driver, for a CPU the same CPU model; anything else is one ``error:`` line and nothing
is written. A configuration measured in more than one sitting keeps the first part's measurement (the order
given). The merged header is the first part's, with ``measured`` spanning all
parts, ``subspace`` saying it is merged, and ``sittings``: each part's run, commit, dates, machine, subspace,
number of configs and verdicts (best config's check, calibration, noisy best).
"""

from __future__ import annotations

import argparse
import os

from tunebench.errors import UserError

#: header keys that must be equal in every part (what space was measured, with what)
SAME = ("name", "task", "target", "knobs", "space_size", "tvm")
#: what a sitting keeps of its part's header
SITTING = ("run_id", "commit", "date", "measured", "machine", "subspace", "best_check", "calibration", "best_noisy")


def add_merge_parser(sub) -> None:
    parser = sub.add_parser("merge", help="merge the space files of one space measured in several sittings",
                            description="merge the space files of one space measured in several sittings, on "
                                        "the same device (GPU model and driver; CPU model)")
    parser.add_argument("--out", required=True, help="the merged space file (.jsonl or .jsonl.gz)")
    parser.add_argument("parts", nargs="+", metavar="FILE", help="space files of the sittings (two or more)")


def device_of(head: dict) -> dict:
    """What must match for two parts' timings to be one space's: a GPU's model and driver, a CPU's model."""
    device = head.get("device") if isinstance(head.get("device"), dict) else {}
    if (head.get("target") or {}).get("kind") == "cuda":
        return {"GPU": device.get("name"), "driver": device.get("driver")}
    return {"CPU": (head.get("machine") or {}).get("cpu")}


def _check_parts(parts: list[tuple[str, dict, list]]) -> None:
    """Every part is the first one's space, measured on its device (module docstring)."""
    first_path, first, _ = parts[0]
    want = device_of(first)
    if None in want.values():
        missing = [k for k, v in want.items() if v is None]
        raise UserError(f"{first_path}: records no {' and '.join(missing)} of the device it was measured on: "
                        "its sittings cannot be shown to come from one device (measure it again)")
    for path, head, _ in parts[1:]:
        for key in SAME:
            if _compared(key, head) != _compared(key, first):
                raise UserError(f"{path}: header {key} differs from {first_path}'s: not the same space "
                                "(merge sittings of one space only)")
        if device_of(head) != want:
            raise UserError(f"{path}: measured on {_named(device_of(head))}, {first_path} on {_named(want)}: "
                            "a space's timings come from one device (merge sittings on the same device only)")


def _compared(key: str, head: dict):
    """What of header ``key`` must be equal: all of it, except that a task whose template code's sha256 is
    recorded is compared without the whole template file's (two sittings may differ in the template's
    tunebench import lines only: :mod:`tunebench.targets.tvm.template_files`)."""
    value = head.get(key)
    if key == "task" and isinstance(value, dict) and value.get("template_code_sha256"):
        return {k: v for k, v in value.items() if k != "template_sha256"}
    return value


def _named(device: dict) -> str:
    return ", ".join(f"{k} {v if v is not None else 'unknown'}" for k, v in device.items())


def merge_parts(parts: list[tuple[str, dict, list]]) -> tuple[dict, list[dict]]:
    """The merged header and rows of checked ``parts`` (``(path, header, rows)``; module docstring)."""
    seen, rows, sittings = set(), [], []
    for path, head, body in parts:
        new = [r for r in body if tuple(r["digits"]) not in seen]
        seen.update(tuple(r["digits"]) for r in new)
        rows += new
        sittings.append({"file": os.path.basename(path), **{k: head.get(k) for k in SITTING},
                         "configs": len(body), "kept": len(new)})
    spans = [s["measured"] for s in sittings if isinstance(s["measured"], list) and len(s["measured"]) == 2]
    head = {k: v for k, v in parts[0][1].items() if k not in ("format", "version", "configs")}
    head.update(subspace={"merged": len(parts)}, sittings=sittings,
                date=min(s["date"] for s in sittings if s["date"]) if any(s["date"] for s in sittings) else None,
                measured=[min(a for a, _ in spans), max(b for _, b in spans)] if spans else head.get("measured"))
    return head, rows


def cmd_merge(args: argparse.Namespace) -> None:
    """Check every part, then write the merged file (whole or not at all); prints its path."""
    from tunebench.config.arguments import check_out
    from tunebench.datasets.space_file import space_file_lines, write_space_file

    if len(args.parts) < 2:
        raise UserError(f"space merge: {len(args.parts)} file given; give the space files of two or more sittings")
    if len(set(map(os.path.abspath, args.parts))) < len(args.parts):
        raise UserError("space merge: a file is given twice; give each sitting's file once")
    check_out(args.out, "--out")
    try:
        parts = [(path, *space_file_lines(path)) for path in args.parts]
    except UserError as exc:  # the reader names the file as model.path=
        raise UserError(str(exc).removeprefix("model.path=")) from None
    _check_parts(parts)
    head, rows = merge_parts(parts)
    write_space_file(args.out, head, rows)
    print(args.out, flush=True)
