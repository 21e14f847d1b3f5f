"""``python -m tunebench leaderboard``: its options and :func:`run_leaderboard`.

``python -m tunebench leaderboard [--tracking-uri URI] [--experiment NAME] [--model M] [--target T]
[--method A,B] [--since YYYY-MM-DD] [--baseline autotvm] [--out leaderboard/] [--no-plots]
[--layout standard|paper-tables] [--norm ann] [--html]``

Layouts
    ``standard`` (default): per (model, target) one row per method over its seeds (see
    :mod:`tunebench.report.aggregate`); writes ``leaderboard.md`` (also printed), ``leaderboard.csv``
    and the PNG plots of :mod:`tunebench.report.plots`. When several FINISHED runs share (model,
    target, method, seed), only the most recent one counts (the Markdown says how many were set
    aside). ``--method`` chooses the rows shown; the baseline's runs are always read, so reductions
    against it stay defined.
    ``paper-tables``: the FPGA tables of :mod:`tunebench.report.paper_tables` (normalized ADRS,
    hours, evaluations per kernel and method; ``--method`` picks and orders the columns, ``--norm``
    the method ADRS is normalized to); writes ``paper_tables.md`` (also printed).

``--html`` also writes ``leaderboard.html`` (:mod:`tunebench.report.html`): the same tables,
sortable, with the plots inline as SVG, in one self-contained file.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from tunebench.errors import UserError
from tunebench.report import html as html_page
from tunebench.report import methodology, paper_tables, tool_budget
from tunebench.report.aggregate import aggregate, machine_line
from tunebench.report.figure import Plot
from tunebench.report.markdown import COLUMNS_NOTE, EMPTY, FOOTNOTE, to_markdown, write_csv
from tunebench.report.plots import make_plots, safe_name, write_pngs
from tunebench.report.query import RunFiles, load_runs, open_store, parse_since, records_roots, select_runs

LAYOUTS = ("standard", "paper-tables")
HTML_FILE = "leaderboard.html"


def _names(values: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated option values -> one list (None when not given)."""
    out = [v.strip() for value in values or [] for v in value.split(",") if v.strip()]
    return out or None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``leaderboard`` subcommand's options."""
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow tracking URI (default: sqlite:///./mlflow.db, as the harness)")
    parser.add_argument("--experiment", action="append", help="MLflow experiment name(s) (default: all)")
    parser.add_argument("--model", action="append", help="only these models (comma-separated or repeated)")
    parser.add_argument("--target", action="append", help="only these targets")
    parser.add_argument("--method", action="append", help="only these methods' rows (the baseline is still read); "
                        "paper-tables: these columns, in this order")
    parser.add_argument("--since", help="only runs started on or after this day (YYYY-MM-DD, 00:00 UTC)")
    parser.add_argument("--baseline", default="autotvm", help="method the reductions and HV compare against")
    parser.add_argument("--out", default="leaderboard", help="output folder (leaderboard.md, .csv, PNGs)")
    parser.add_argument("--no-plots", action="store_true", help="skip the best-so-far plots")
    parser.add_argument("--layout", choices=LAYOUTS, default="standard",
                        help="standard: per-method rows, CSV and plots; paper-tables: the FPGA DSE tables "
                             "(normalized ADRS, hours, evaluations) in paper_tables.md")
    parser.add_argument("--norm", default="ann", help="paper-tables: the method ADRS is normalized to (= 1.00)")
    parser.add_argument("--tool-budgets", default="0.25,0.5,1.0", type=tool_budget.parse_budgets,
                        help="paper-tables: tool hours at which ADRS and hypervolume are compared (comma-separated)")
    parser.add_argument("--records-dir", action="append", default=None,
                        help="also read record files where a run's tag says when they lie in this folder (repeatable); "
                             "trusted without it: records/ beside the store's mlflow.db (else ./records); any "
                             "other run's files are read from its MLflow artifacts")
    parser.add_argument("--html", action="store_true",
                        help=f"also write {HTML_FILE}: sortable tables and inline SVG plots in one file")


def _out_folder(path: str) -> str:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out={path}: cannot create the output folder ({exc.strerror})") from None
    return path


def _write(path: str, content: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(content)


def _header(client, filters: dict, runs, n_dupes: int, baseline: str | None) -> list[str]:
    """The lines under the title: store, filters, baseline and how many runs count."""
    shown = ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in filters.items() if v)
    base = f"baseline: `{baseline}`; " if baseline else ""
    header = [f"Tracking store: `{client.tracking_uri}`; filters: {shown or 'none'}; {base}"
              f"{len(runs)} FINISHED run(s)."]
    if n_dupes:
        header.append(f"{n_dupes} older run(s) with the same (model, target, method, seed) set aside.")
    return header


def run_leaderboard(args: argparse.Namespace) -> str:
    """Build the leaderboard in ``args.layout`` (default standard) into ``args.out``; returns the
    Markdown. Bad input raises :class:`UserError`."""
    since = args.since
    parse_since(since)  # a bad date fails before the store is touched
    client = open_store(args.tracking_uri)
    models, targets, methods = _names(args.model), _names(args.target), _names(args.method)
    experiments = _names(args.experiment)
    runs, n_dupes = select_runs(load_runs(client, experiments, since), models, targets)
    filters = {"experiment": experiments, "model": models, "target": targets, "method": methods, "since": since}
    trusted = records_roots(client.tracking_uri, getattr(args, "records_dir", None))
    if getattr(args, "layout", "standard") == "paper-tables":
        return _paper_tables(args, client, runs, methods, _header(client, filters, runs, n_dupes, None), trusted)
    return _standard(args, client, runs, methods, _header(client, filters, runs, n_dupes, args.baseline), trusted)


def _standard(args, client, runs, methods, header: list[str], trusted: list[str]) -> str:
    """The standard layout: leaderboard.md, leaderboard.csv, PNGs (and leaderboard.html)."""
    table, notes = aggregate(runs, args.baseline, methods)
    out = _out_folder(args.out)
    want_html = getattr(args, "html", False)
    plots = {} if args.no_plots or table.empty else make_plots(client, runs, methods, notes, fpga=want_html,
                                                                 trusted=trusted)
    if not table.empty:
        with tempfile.TemporaryDirectory(prefix="tunebench-score-") as tmp:
            scored = methodology.add_scores(table, runs, RunFiles(client, tmp, trusted))
        for (model, target), found in ({} if args.no_plots else scored).items():
            plots.setdefault((model, target), []).append(
                Plot("methodology score", f"score_{safe_name(model)}_{safe_name(target)}.png",
                     methodology.score_figure(model, target, found)))
    machine = {key: machine_line(group) for key, group in runs.groupby(["model", "target"])}
    markdown = to_markdown(table, notes, header, write_pngs(plots, out), machine)
    _write(os.path.join(out, "leaderboard.md"), markdown)
    write_csv(table, notes, os.path.join(out, "leaderboard.csv"))
    if want_html:
        sections = html_page.leaderboard_sections(table, notes, machine, plots)
        page = html_page.render_page("tunebench leaderboard", header, sections, [COLUMNS_NOTE, FOOTNOTE],
                                     empty=EMPTY)
        _write(os.path.join(out, HTML_FILE), page)
    return markdown


def _paper_tables(args, client, runs, methods, header: list[str], trusted: list[str]) -> str:
    """The paper-tables layout: paper_tables.md (and leaderboard.html)."""
    norm = getattr(args, "norm", "ann")
    out = _out_folder(args.out)
    with tempfile.TemporaryDirectory(prefix="tunebench-lb-") as tmp:
        rows = paper_tables.rows_from_store(client, runs, RunFiles(client, tmp, trusted))
    models, columns, means = paper_tables.summarize(rows, methods)
    budgets = getattr(args, "tool_budgets", tool_budget.DEFAULT_BUDGETS_H)
    extra = tool_budget.budget_tables(models, columns, tool_budget.budget_stats(rows, budgets), budgets)
    markdown = paper_tables.render(models, columns, means, norm, extra)
    fig = None if getattr(args, "no_plots", False) else tool_budget.cost_figure(rows, columns)
    if fig is not None:
        fig.savefig(os.path.join(out, tool_budget.FIGURE), dpi=110)
        markdown += f"\n\n![ADRS and hypervolume against tool hours]({tool_budget.FIGURE})"
    _write(os.path.join(out, "paper_tables.md"), markdown + "\n")
    if getattr(args, "html", False):
        sections = html_page.paper_sections(paper_tables.tables(models, columns, means, norm))
        sections += [html_page.Section(title, headers, cells) for title, headers, cells in extra]
        page = html_page.render_page("tunebench FPGA tables", header, sections, [paper_tables.runs_per_cell(means)],
                                     empty=EMPTY)
        _write(os.path.join(out, HTML_FILE), page)
    return markdown
