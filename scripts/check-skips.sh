#!/usr/bin/env bash
# Lists the skipped tests in a `swift test` log (Swift Testing prints `➜ Test name() skipped: "reason"` and
# `➜ Suite Name skipped: "reason"`; a parameterized test with no cases is `skipped: "No test cases found."`) and
# fails when one is not named in the allowed-skips file (lines `Test name() | reason` or `Suite Name | reason`).
#
# usage: scripts/check-skips.sh TEST-LOG ALLOWED-SKIPS      exit 0: every skip listed; 1: an unlisted skip
set -euo pipefail
log=$1 allowed=$2
skipped=$(sed -nE 's/^[^ ]+ ((Test|Suite) .+) skipped(: "(.*)")?\.?$/\1\t\4/p' "$log" | sort -u)
echo
if [ -z "$skipped" ]; then
    echo "skipped tests: none"
    exit 0
fi
echo "skipped tests:"
unlisted=0
while IFS=$'\t' read -r name reason; do
    if grep -v '^#' "$allowed" | awk -F' [|] ' -v n="$name" '$1 == n && $2 != "" {found = 1} END {exit !found}'; then
        echo "  $name — allowed: $reason"
    else
        echo "  $name — NOT ALLOWED: $reason (not listed in ${allowed#"$PWD"/})"
        unlisted=$((unlisted + 1))
    fi
done <<<"$skipped"
if [ $unlisted -gt 0 ]; then
    echo "FAIL: $unlisted skipped test(s) not listed in $allowed"
    exit 1
fi
