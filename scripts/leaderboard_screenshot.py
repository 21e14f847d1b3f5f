"""A PNG screenshot of a leaderboard HTML page in headless Chromium (Selenium).

    python scripts/leaderboard_screenshot.py leaderboard/leaderboard.html docs/leaderboard_html.png [--size 1400x1800]

Needs Debian's ``chromium`` and ``chromium-driver`` (``scripts/install_browser.sh``) and Selenium
(``pip install -e '.[test]'``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys


def chrome(width: int, height: int):
    """A headless Chromium driven by the system chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html")
    parser.add_argument("png")
    parser.add_argument("--size", default="1400x1800", help="window WIDTHxHEIGHT in pixels")
    args = parser.parse_args(argv)
    if not (shutil.which("chromium") or shutil.which("chromium-browser")) or not shutil.which("chromedriver"):
        print("error: chromium and chromedriver not found (scripts/install_browser.sh)", file=sys.stderr)
        return 2
    width, height = (int(v) for v in args.size.lower().split("x"))
    driver = chrome(width, height)
    try:
        driver.get("file://" + os.path.abspath(args.html))
        driver.save_screenshot(args.png)
    finally:
        driver.quit()
    print(args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
