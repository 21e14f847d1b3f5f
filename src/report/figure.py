"""A figure the leaderboard shows: its caption, its PNG file, the matplotlib figure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Plot:
    """A figure of a group: its caption, its PNG file name (None: drawn for the HTML page only)."""

    caption: str
    file: str | None
    figure: object  # matplotlib.figure.Figure
