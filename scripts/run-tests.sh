#!/usr/bin/env bash
# Runs the whole test suite (after `swift build --build-tests`) and fails it on any skip not listed, with its
# reason, in Tests/allowed-skips.txt: a machine without a conditional test's dependency must not go green with the
# test not run. A parameterized test that found no cases is reported as skipped, so it fails the run too.
# The skipped tests are printed at the end either way.
#
# usage: scripts/run-tests.sh [extra swift test arguments]       env: SWIFT (default swift)
# Exits with swift test's status, or 1 when it passed but skipped something unlisted.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ALLOWED=$ROOT/Tests/allowed-skips.txt
# The tests' temporary files (streams, caches, fixtures) go to one directory, removed after the run either way.
tmp=$(mktemp -d /tmp/hlscache-tests.XXXXXX) || exit 1
log=$(mktemp /tmp/hlscache-test-log.XXXXXX) || exit 1
trap 'rm -rf "$tmp" "$log"' EXIT
TMPDIR=$tmp ${SWIFT:-swift} test --skip-build --parallel --num-workers 2 "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
scripts/check-skips.sh "$log" "$ALLOWED" || { [ "$status" = 0 ] && status=1; }
exit "$status"
