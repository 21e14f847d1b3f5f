"""``python -m tunebench knobs``: every knob of every config group, from the settings classes that
declare them (type, default, what it is and where its default comes from). ``docs/KNOBS.md`` is its
output; a test keeps the two equal, so the reference never drifts from the code."""

from __future__ import annotations

import argparse
import os
import sys

from tunebench.config.arguments import check_out
from tunebench.config.experiment import ExperimentConfig
from tunebench.config.knobs import knob_docs

INTRO = """# Knobs

Every setting of a run, generated from the settings classes that declare it (`python -m tunebench
knobs > docs/KNOBS.md`). Set any of them on the command line: `python run.py method=autotvm
method.plan_size=32 target.runner.repeat=3`. Every number a knob holds, inside lists and mappings too,
must be finite: `inf` and `nan` are refused before the run. Bracketed keys cite docs/REFERENCES.md.
"""
GROUP_DOC = {"method": "the tuning method: `method=<name>`", "model": "the model whose tasks are tuned: "
             "`model=<name>`", "target": "where configs are measured: `target=<name>`"}


def _cell(value) -> str:
    text = "(required)" if value == "???" else repr(value) if not isinstance(value, str) else value
    return text.replace("|", "\\|").replace("\n", " ")


def _table(cls, prefix: str) -> list[str]:
    rows = ["| knob | type | default | what it is, and its source |", "|---|---|---|---|"]
    for key, kind, default, doc in knob_docs(cls):
        if key == "name" and prefix:
            continue
        rows.append(f"| `{prefix}{key}` | {_cell(kind)} | `{_cell(default)}` | {_cell(doc)} |")
    return rows


def _doc_line(cls) -> str:
    return " ".join((cls.__doc__ or "").split())


def _harness() -> list[str]:
    """The experiment's own knobs (top level, budget, tracking, measure, e2e); the groups come after."""
    rows = _table(ExperimentConfig, "")
    keep = rows[:2] + [r for r in rows[2:] if r.split("`")[1].split(".")[0] not in GROUP_DOC]
    return ["## The experiment", "", _doc_line(ExperimentConfig), "", *keep, ""]


def _group(group: str, options: dict) -> list[str]:
    out = [f"## {group}", "", GROUP_DOC[group] + ".", ""]
    for name, node in sorted(options.items()):
        cls = node if isinstance(node, type) else type(node)
        out += [f"### {group}={name}", "", _doc_line(cls), ""]
        defaults = node if not isinstance(node, type) else None
        rows = _table(cls, f"{group}.")
        if defaults is not None:  # an option that is an instance: its own values are the defaults
            rows = rows[:2] + [_with_default(r, defaults) for r in rows[2:]]
        out += rows + [""]
    return out


def _with_default(row: str, obj) -> str:
    cells = row.split(" | ")
    key = cells[0].strip("| `").split(".", 1)[1]
    value = obj
    for part in key.split("."):
        value = getattr(value, part)
    cells[2] = f"`{_cell(value)}`"
    return " | ".join(cells)


def _presets() -> list[str]:
    """The budget presets (``budget=<name>``: YAML files in conf/budget/) with their header comment."""
    from tunebench.harness.setup.store import CONF_DIR

    out = ["## budget presets", "", "`budget=<name>` sets the `budget.*` knobs above together (conf/budget/):", ""]
    folder = os.path.join(CONF_DIR, "budget")
    for name in sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml")):
        with open(os.path.join(folder, f"{name}.yaml")) as fh:
            head = [ln[1:].strip() for ln in fh.read().splitlines() if ln.startswith("#")]
        out.append(f"- `budget={name}`: {' '.join(head)}")
    return out + [""]


def knobs_markdown() -> str:
    """The whole reference (docs/KNOBS.md)."""
    from tunebench.harness.setup.store import registered_options

    lines = INTRO.splitlines() + [""] + _harness() + _presets()
    for group, options in registered_options().items():
        lines += _group(group, options)
    return "\n".join(lines).rstrip() + "\n"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="write the reference here (default: print it)")


def cmd_knobs(args: argparse.Namespace) -> None:
    """Print the reference, or write it to ``--out`` (checked first; its folder created)."""
    if not args.out:
        sys.stdout.write(knobs_markdown())
        return
    check_out(args.out)
    text = knobs_markdown()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        fh.write(text)
