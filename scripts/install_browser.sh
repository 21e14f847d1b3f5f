#!/usr/bin/env bash
# Debian's chromium and chromium-driver for the HTML leaderboard's browser test (tests/test_report_html.py),
# called by `make install`. Never fails the install: where the browser cannot be installed (no apt-get, not
# root, no network), it prints one line saying that test will be skipped.
set -u
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    echo "browser: chromium and chromedriver found"
    exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log=$(mktemp)
    if { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; } \
            >"$log" 2>&1; then
        rm -f "$log"
        echo "browser: installed chromium and chromium-driver (Debian)"
    else
        echo "browser: apt-get install chromium chromium-driver failed (log: $log); the HTML browser test will be skipped"
    fi
    exit 0
fi
echo "browser: chromium/chromedriver not found and not installable here (needs apt-get as root); the HTML browser test will be skipped"
exit 0
