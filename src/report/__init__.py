"""Reports from the tracking store: ``python -m tunebench leaderboard``.

Modules, by role:

- :mod:`~tunebench.report.query`: FINISHED runs from the store into a frame; a run's files.
- :mod:`~tunebench.report.aggregate`: one row per (model, target, method) over seeds, intervals,
  verdicts, noise and the run conditions line.
- :mod:`~tunebench.report.curves`: best-so-far and fraction-of-optimum curve math.
- :mod:`~tunebench.report.cells`: the text of each table cell (Markdown and HTML alike).
- :mod:`~tunebench.report.markdown`: ``leaderboard.md`` and ``leaderboard.csv``.
- :mod:`~tunebench.report.plots`, :mod:`~tunebench.report.fpga_plots`: matplotlib figures (PNG, SVG).
- :mod:`~tunebench.report.html`: ``leaderboard.html``, one self-contained page.
- :mod:`~tunebench.report.paper_tables`: the ``--layout paper-tables`` FPGA tables.
- :mod:`~tunebench.report.cli`: the subcommand's options and :func:`run_leaderboard`.

The names below are the package's entry points.
"""

from tunebench.report.cli import add_arguments, run_leaderboard
from tunebench.report.curves import median_curve, model_curve
from tunebench.report.query import RunFiles, load_runs, open_store, select_runs
from tunebench.run_lookup import RECORD_TAG

__all__ = ["RECORD_TAG", "RunFiles", "add_arguments", "load_runs", "median_curve", "model_curve", "open_store",
           "run_leaderboard", "select_runs"]
