#!/usr/bin/env bash
# How the console copes with many items: headless Chromium opens it on a server holding N paused items and the
# test prints when the last page of GET /items arrived and when every row was drawn (the page's own clock,
# performance.now(), from the start of navigation). Figures only: nothing is asserted on them.
#
# usage: scripts/console-scale.sh [N ...]     (default 1000 10000; needs a `swift build --build-tests` and chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
for n in "${@:-1000 10000}"; do
  for count in $n; do
    HLSCACHE_CONSOLE_ITEMS=$count swift test --skip-build --filter 'ConsoleBrowserTests/manyItems' 2>&1 | grep -E '^console:|✘' || true
  done
done
