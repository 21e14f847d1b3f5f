"""The HTML leaderboard (``python -m tunebench leaderboard --html``).

Without a browser: the page is one self-contained file, text from the runs is escaped, and noisy and
unchecked cells carry their CSS class and their mark; the ``paper-tables`` layout prints what
``benchmarks/fpga_tables.py`` prints. In headless Chromium (Selenium): a real 3-method FPGA sweep on
the shipped tables renders its table, a click on a column header reorders the rows, and the plots
are inline SVG with a size. The browser tests are skipped when Debian's
``chromium`` / ``chromium-driver`` or Selenium are missing (``make install`` brings them where it can:
``scripts/install_browser.sh``).
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from test_leaderboard import JUNE_2025, store  # noqa: F401  (the synthetic-store fixture)

from conftest import ROOT
from tunebench.__main__ import build_parser
from tunebench.report import html as page
from tunebench.run_lookup import RECORD_TAG

SWEEP = ["method=random,exhaustive,nsga2", "target=table", "model=hls_gemm", "budget.trials_per_task=8",
         "e2e.enabled=false", "progress=false"]
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def leaderboard(uri: str, out, *options) -> str:
    """Run the leaderboard with ``--html``; returns the page's text."""
    from tunebench.report.cli import run_leaderboard

    run_leaderboard(build_parser().parse_args(["leaderboard", "--tracking-uri", uri, "--out", str(out), "--html",
                                               *options]))
    return (out / "leaderboard.html").read_text(encoding="utf-8")


# ---------------------------------------------------------------- without a browser

def test_page_is_self_contained(store, tmp_path):  # noqa: F811
    text = leaderboard(store, tmp_path / "lb")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    # nothing fetched: no external scripts, styles, images, frames or imports
    assert not re.search(r"<(link|img|iframe|object|embed)\b", text)
    assert not re.search(r"<script[^>]*\bsrc=", text) and "@import" not in text
    assert not re.search(r"""(href|src)=["']?(https?:)?//""", text)
    assert not re.search(r"xlink:href=[\"'](?!#)", text)  # SVG references stay inside the page
    # one table per (model, target) group, the plots inline as SVG, the date and the run conditions
    assert text.count('<table class="sortable">') == 4
    assert text.count("<svg") == 8 and "<?xml" not in text
    assert re.search(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert "Precision: float32; threads: 1, 2 (differ between runs); device: fixture-cpu" in text
    # noisy cells: class and text; the CSV/Markdown mark stays in the cell
    noisy = re.findall(r'<td class="noisy"[^>]*>([^<]*)</td>', text)
    assert "2.00 [1.90, 2.10] better (noisy)" in noisy and all(c.endswith("(noisy)") for c in noisy)


def test_cells_are_classed_and_text_escaped():
    rows = [["<img src=x onerror=alert(1)>", "1.2345 (noisy) (unchecked)", "7.5 (unchecked)", "3"]]
    section = page.Section("<b>m</b> on llvm", ["method", "Σ task latency [ms]", "% peak", "n"], rows,
                           conditions="Precision: <float32>; threads: 2", notes=["`<run>`: a note & more"])
    text = page.render_page("t<itle>", ["store `sqlite:///a<b>.db`"], [section], ["foot & <note>"])
    assert "<img" not in text and "<b>m</b>" not in text and "<float32>" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "&lt;b&gt;m&lt;/b&gt; on llvm" in text
    assert "<code>&lt;run&gt;</code>: a note &amp; more" in text and "<code>sqlite:///a&lt;b&gt;.db</code>" in text
    assert '<td class="noisy unchecked" data-sort="1.2345">1.2345 (noisy) (unchecked)</td>' in text
    assert '<td class="unchecked" data-sort="7.5">7.5 (unchecked)</td>' in text
    assert page.sort_key("0.50 ± 0.25") == "0.50" and page.sort_key("—") == "" and page.sort_key("ga") == "ga"
    assert page.sort_key("−27.60 [−30.1, −20.0] worse") == "-27.60"


def test_run_tags_are_escaped_end_to_end(tmp_path):
    """A run whose method and model tags are HTML: escaped in the tables, absent from the SVG."""
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    exp = client.create_experiment("x", artifact_location=str(tmp_path / "art"))
    evil = "<script>alert(1)</script>"
    run_id = client.create_run(exp, start_time=JUNE_2025, tags={"method": evil, "model": "<i>m</i>",
                                                                "target": "llvm", "seed": "0"}).info.run_id
    folder = tmp_path / "records" / run_id
    folder.mkdir(parents=True)
    lines = [{"task_id": "t", "trial": i, "valid": True, "latency_s": 1e-3 / (i + 1), "search_s": i + 1.0}
             for i in range(3)]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    client.log_batch(run_id, tags=[RunTag(RECORD_TAG, str(folder / "records.jsonl"))],
                     metrics=[Metric("search_time_s", 3.0, JUNE_2025, 0), Metric("e2e_latency_ms", 1.0, JUNE_2025, 0)])
    client.set_terminated(run_id)
    text = leaderboard(uri, tmp_path / "lb")
    assert evil not in text and "<i>m</i>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;i&gt;m&lt;/i&gt; on llvm" in text
    assert text.count("<svg") == 2 and text.count("<script>") == 1  # the page's own sorting script only


# ---------------------------------------------------------------- in headless Chromium

needs_browser = pytest.mark.skipif(
    not (BROWSER and DRIVER), reason="chromium and chromedriver not found (Debian packages chromium, chromium-driver; "
                                     "scripts/install_browser.sh): the HTML browser test is skipped")


def chrome(width=1400, height=1800):
    """Headless Chromium driven by the system chromedriver (no driver download)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def command(cwd, *argv, timeout=600) -> str:
    """Run a command as a user types it; returns its stdout."""
    done = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The folder of a real sweep: random, exhaustive, nsga2 on the shipped GEMM table, 8 trials each."""
    work = tmp_path_factory.mktemp("sweep")
    command(work, os.path.join(ROOT, "run.py"), "-m", *SWEEP)
    return work


@pytest.fixture(scope="module")
def sweep_page(sweep):
    """The sweep's ``leaderboard.html``, made by ``python -m tunebench leaderboard --html``."""
    command(sweep, "-m", "tunebench", "leaderboard", "--html", "--out", "lb", timeout=300)
    return sweep / "lb" / "leaderboard.html"


def test_paper_tables_layout(sweep):
    """``--layout paper-tables`` prints what ``benchmarks/fpga_tables.py`` prints from the records folder."""
    printed = command(sweep, "-m", "tunebench", "leaderboard", "--layout", "paper-tables", "--html", "--out", "pt",
                      "--method", "random,nsga2,exhaustive", "--norm", "random", timeout=300)
    script = command(sweep, os.path.join(ROOT, "benchmarks", "fpga_tables.py"), "records",
                     "--methods", "random,nsga2,exhaustive", "--norm", "random")
    figure = "\n\n![ADRS and hypervolume against tool hours](tool_hours.png)"
    assert printed == script.rstrip("\n") + figure + "\n" and (sweep / "pt" / "tool_hours.png").exists()
    assert (sweep / "pt" / "paper_tables.md").read_text() == printed
    assert printed.count("| kernel | random | nsga2 | exhaustive |") == 9
    assert "| hls_gemm | 1.00 |" in printed and "Runs per cell: [1]" in printed
    # ADRS and hypervolume at equal tool time: one row per tool budget
    assert printed.count("| kernel @ tool budget | random | nsga2 | exhaustive |") == 2
    assert "| hls_gemm @ 0.25 h |" in printed and "| hls_gemm @ 1 h |" in printed
    text = (sweep / "pt" / "leaderboard.html").read_text(encoding="utf-8")
    assert text.count('<table class="sortable">') == 11 and text.count("<tfoot>") == 9  # Average rows stay below
    assert not (sweep / "pt" / "leaderboard.md").exists()


def column(driver, index: int) -> list[str]:
    from selenium.webdriver.common.by import By

    return [row.find_elements(By.TAG_NAME, "td")[index].text
            for row in driver.find_elements(By.CSS_SELECTOR, "table.sortable tbody tr")]


@needs_browser
def test_sweep_page_in_chromium(sweep_page):
    """The table renders (3 rows), header clicks reorder them, the 2 SVG plots have a size."""
    from selenium.webdriver.common.by import By

    driver = chrome()
    try:
        driver.get(sweep_page.as_uri())
        assert driver.title == "tunebench leaderboard"
        assert len(driver.find_elements(By.CSS_SELECTOR, "table.sortable")) == 1
        headers = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "table.sortable thead th")]
        assert headers[:4] == ["method", "seeds", "ADRS", "hypervolume"]
        assert len(driver.find_elements(By.CSS_SELECTOR, "table.sortable tbody tr")) == 3
        before = column(driver, 0)
        assert sorted(before) == ["exhaustive", "nsga2", "random"]
        assert before != sorted(before)  # rows come by ADRS, not by name
        head = driver.find_elements(By.CSS_SELECTOR, "table.sortable thead th")
        head[0].click()
        assert column(driver, 0) == sorted(before)
        assert head[0].get_attribute("aria-sort") == "ascending"
        head[0].click()
        assert column(driver, 0) == sorted(before, reverse=True)
        head[3].click()  # hypervolume, by value
        values = [float(v.split()[0]) for v in column(driver, 3)]
        assert values == sorted(values)
        svgs = driver.find_elements(By.CSS_SELECTOR, "figure svg")
        assert len(svgs) == 2  # ADRS/hypervolume so far and the Pareto designs
        for svg in svgs:
            assert svg.size["width"] > 300 and svg.size["height"] > 200
            assert svg.find_elements(By.TAG_NAME, "path")
        assert "Precision:" in driver.find_element(By.CSS_SELECTOR, "p.conditions").text
    finally:
        driver.quit()


@needs_browser
def test_marked_cells_are_tinted_in_chromium(store, tmp_path):  # noqa: F811
    """Cells marked (noisy) are tinted: their background differs from a plain cell's."""
    from selenium.webdriver.common.by import By

    leaderboard(store, tmp_path / "lb", "--model", "mobilenet", "--target", "llvm")
    driver = chrome()
    try:
        driver.get((tmp_path / "lb" / "leaderboard.html").as_uri())
        noisy = driver.find_elements(By.CSS_SELECTOR, "td.noisy")
        assert noisy and all(cell.text.endswith("(noisy)") for cell in noisy)
        plain = driver.find_element(By.CSS_SELECTOR, "tbody td:not(.noisy)").value_of_css_property("background-color")
        assert noisy[0].value_of_css_property("background-color") != plain
        assert len(driver.find_elements(By.CSS_SELECTOR, "figure svg")) == 2
    finally:
        driver.quit()
