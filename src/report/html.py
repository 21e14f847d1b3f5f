"""``leaderboard.html``: the leaderboard as one self-contained HTML page.

Everything is inline: the style, a small script that sorts a table by the clicked column (numbers
by value, text alphabetically, blanks last; a second click reverses), and the plots as SVG
(:func:`tunebench.report.plots.svg_text`). Nothing is loaded from the network or from other files.
Every text taken from the runs (names, tags, notes, cells) is escaped with :func:`html.escape`;
Markdown code spans (```x```) in notes become ``<code>``. Cells whose text carries ``(noisy…)`` or
``(unchecked)`` keep that text and get the CSS class ``noisy`` / ``unchecked`` (tinted).
"""

from __future__ import annotations

import datetime as dt
import html
import re
from dataclasses import dataclass, field

NUMBER = re.compile(r"^[-−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #1d2329; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { font-size: 1.25em; margin-top: 1.6em; }
p.meta, p.conditions { color: #3a4650; margin: .3em 0; }
p.conditions { background: #eef3f8; border-left: 4px solid #5a7fa8; padding: .35em .6em; }
table { border-collapse: collapse; margin: .6em 0; font-variant-numeric: tabular-nums; }
div.scroll { overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #c9d1d9; padding: .25em .5em; text-align: left; vertical-align: top; }
td { white-space: nowrap; } th { min-width: 4em; max-width: 11em; }
thead th { background: #f1f4f7; cursor: pointer; user-select: none; position: sticky; top: 0; }
thead th::after { content: " \\2195"; color: #9aa5b1; }
thead th[aria-sort=ascending]::after { content: " \\25B2"; color: #1d2329; }
thead th[aria-sort=descending]::after { content: " \\25BC"; color: #1d2329; }
tfoot td { font-weight: 600; background: #f7f9fb; }
td.noisy { background: #fff1c7; } td.unchecked { background: #fbd9dc; }
td.noisy.unchecked { background: linear-gradient(90deg, #fff1c7 50%, #fbd9dc 50%); }
span.key { padding: 0 .4em; border: 1px solid #c9d1d9; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: #3a4650; font-size: .95em; }
ul.notes { color: #3a4650; } p.footnote { color: #4d5a66; font-size: .9em; max-width: 75em; }
"""

SCRIPT = """
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-sort');
    return v === null ? null : (v === '' ? '' : (isNaN(Number(v)) ? v : Number(v)));
  }
  function compare(a, b) {
    if (a === b) return 0;
    if (a === '' || a === null) return 1;
    if (b === '' || b === null) return -1;
    if (typeof a === 'number' && typeof b === 'number') return a - b;
    return String(a).localeCompare(String(b));
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener('click', function () {
        var dir = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', dir);
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var a = key(r1.cells[col]), b = key(r2.cells[col]);
          if (a === '' || b === '') return compare(a, b);
          return dir === 'ascending' ? compare(a, b) : compare(b, a);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
"""


@dataclass
class Section:
    """One part of the page: a titled table with its run conditions, notes and figures."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    conditions: str | None = None
    notes: list[str] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (caption, <svg> text)
    footer: list[list[str]] = field(default_factory=list)  # rows kept below the sorted ones (averages)


def text(value: str) -> str:
    """Escaped text; Markdown code spans become ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(value)))


def sort_key(cell: str) -> str:
    """The value a column sorts by: the cell's leading number, else its text; blank for blank cells."""
    stripped = cell.strip()
    if stripped in ("", "—"):
        return ""
    match = NUMBER.match(stripped)
    return match.group(0).replace("−", "-") if match else stripped.lower()


def _cell(cell: str) -> str:
    classes = [c for c, mark in (("noisy", "(noisy"), ("unchecked", "(unchecked)")) if mark in cell]
    attr = f' class="{" ".join(classes)}"' if classes else ""
    return f'<td{attr} data-sort="{html.escape(sort_key(cell))}">{html.escape(cell)}</td>'


def table_html(headers: list[str], rows: list[list[str]], footer: list[list[str]] = ()) -> str:
    """A sortable table (the script above sorts its body; the footer rows stay below)."""
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    foot = "\n".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in footer)
    return (f'<div class="scroll"><table class="sortable">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n'
            '</tbody>\n' + (f"<tfoot>\n{foot}\n</tfoot>\n" if footer else "") + "</table></div>")


def _section(section: Section, index: int) -> str:
    parts = [f'<section id="group-{index}">', f"<h2>{html.escape(section.title)}</h2>"]
    if section.conditions:
        parts.append(f'<p class="conditions">{text(section.conditions)}</p>')
    parts.append(table_html(section.headers, section.rows, section.footer))
    if section.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{text(n)}</li>" for n in section.notes) + "</ul>")
    for caption, svg in section.figures:
        parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.append("</section>")
    return "\n".join(parts)


LEGEND = ('<p class="meta">Marked cells: <span class="key" style="background:#fff1c7">(noisy: …)</span> the value '
          'rests on a timing the harness marked noisy, and the signals that fired; <span class="key" style="background:#fbd9dc">(unchecked)'
          '</span> it rests on a task best whose output check could not be performed. Click a column header to '
          'sort.</p>')


def render_page(title: str, header: list[str], sections: list[Section], footnotes: list[str],
                generated: dt.datetime | None = None, empty: str = "") -> str:
    """The whole page. ``header``: lines below the title (store, filters, run counts); ``empty``: the
    text shown when there are no sections; ``generated``: the date shown (default: now, UTC)."""
    when = (generated or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>{html.escape(title)}</h1>", f'<p class="meta">Generated {when}.</p>',
            *(f'<p class="meta">{text(line)}</p>' for line in header), LEGEND]
    if len(sections) > 1:
        links = " · ".join(f'<a href="#group-{i}">{html.escape(s.title)}</a>' for i, s in enumerate(sections))
        body.append(f'<p class="meta">Contents: {links}</p>')
    body += [_section(s, i) for i, s in enumerate(sections)] or [f"<p>{html.escape(empty)}</p>"]
    body += [f'<p class="footnote">{text(f)}</p>' for f in footnotes]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


# ---------------------------------------------------------------- the leaderboard's pages

def leaderboard_sections(table, notes: dict, machine: dict, plots: dict) -> list[Section]:
    """The standard layout's sections: per (model, target) its conditions line, table, notes and
    figures (``plots``: {(model, target): [Plot, ...]}, drawn here as SVG)."""
    from tunebench.report.cells import group_tables
    from tunebench.report.plots import svg_text

    sections = []
    for (model, target), headers, cells in group_tables(table):
        figures = [(f"{p.caption}, {model} on {target}", svg_text(p.figure)) for p in plots.get((model, target), [])]
        sections.append(Section(f"{model} on {target}", headers, cells, conditions=machine.get((model, target)),
                                notes=list(notes.get((model, target), [])), figures=figures))
    return sections


def paper_sections(tables: list[tuple[str, list[str], list[list[str]]]]) -> list[Section]:
    """The paper-tables layout's sections: each table with its Average row kept below the others."""
    return [Section(title, headers, rows[:-1], footer=rows[-1:]) for title, headers, rows in tables]
