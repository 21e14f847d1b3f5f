"""[Sun-PhD] Tables 3.2-3.4 layout from FPGA run records (docs/REFERENCES.md): a thin wrapper of the
leaderboard's ``paper-tables`` layout (:mod:`tunebench.report.paper_tables`) that reads a records
folder instead of the tracking store.

Reads every ``<records_dir>/<run>/config.yaml`` + ``pareto_<kernel>.json`` (written by the harness's
FPGA metrics) and prints, per kernel and method over seeds:
  Table 3.2: ADRS mean and its standard deviation, each divided by ann's (ann = 1.00);
  Table 3.3: algorithm hours and tool (FPGA) hours (means over seeds);
  Table 3.4: overall hours (algorithm + tool);
plus raw ADRS, hypervolume and top-fidelity evaluations, and ADRS / hypervolume at equal tool hours
(``--tool-budgets``; ``--plot PNG``: the curves against tool hours).

    python benchmarks/fpga_tables.py records [--methods ann,bt,...] [--norm ann] [--tool-budgets 0.25,0.5,1]
        [--plot tool_hours.png] [--intervals]

The same tables from the tracking store (FINISHED runs, the latest per seed, the leaderboard's filters):
``python -m tunebench leaderboard --layout paper-tables [--method ann,bt,...] [--norm ann]``.
"""

from __future__ import annotations

import argparse

from tunebench.report import tool_budget
from tunebench.report.paper_tables import interval_table, render, rows_from_folder, summarize


def main() -> None:
    ap = argparse.ArgumentParser(description="FPGA DSE tables ([Sun-PhD] Tables 3.2-3.4) from a records folder")
    ap.add_argument("records_dir")
    ap.add_argument("--methods", default=None, help="these columns, in this order (default: every method)")
    ap.add_argument("--norm", default="ann", help="the method ADRS is normalized to (= 1.00)")
    ap.add_argument("--tool-budgets", default="0.25,0.5,1.0", type=tool_budget.parse_budgets,
                    help="tool hours at which ADRS and hypervolume are compared (comma-separated)")
    ap.add_argument("--plot", default=None, help="write ADRS and hypervolume against tool hours to this PNG")
    ap.add_argument("--intervals", action="store_true",
                    help="add normalized ADRS with 95 %% bootstrap intervals over seeds and the ratio of medians")
    a = ap.parse_args()
    rows = rows_from_folder(a.records_dir)
    models, methods, out = summarize(rows, a.methods.split(",") if a.methods else None)
    stats = tool_budget.budget_stats(rows, a.tool_budgets)
    extra = tool_budget.budget_tables(models, methods, stats, a.tool_budgets)
    if a.intervals:
        extra = [interval_table(rows, models, methods, a.norm), *extra]
    print(render(models, methods, out, a.norm, extra))
    fig = tool_budget.cost_figure(rows, methods) if a.plot else None
    if fig is not None:
        fig.savefig(a.plot, dpi=110)


if __name__ == "__main__":
    main()
