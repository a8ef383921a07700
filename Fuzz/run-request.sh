#!/usr/bin/env bash
# Builds the HTTP request fuzzer (proxied targets and Range headers, see Fuzz/RequestFuzzer.swift) with
# libFuzzer + AddressSanitizer and runs it for N seconds (default 60).
#   Fuzz/run-request.sh 600        # ten minutes
# Crashing inputs land in Fuzz/artifacts/request-*.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=.build-fuzz
src=$out/request-src
mkdir -p "$out" "$src" Fuzz/corpus-request Fuzz/artifacts
# One module: the sources without their cross-module imports.
rm -f "$src"/*.swift
for f in Sources/HLSPlaylist/*.swift Sources/HLSCacheCore/*.swift Sources/HLSProxy/Resources/RangeRequest.swift; do
  sed -e '/^import HLSPlaylist$/d' "$f" > "$src/$(basename "$(dirname "$f")")-$(basename "$f")"
done
swiftc -O -parse-as-library -sanitize=fuzzer,address -D FUZZING -module-name RequestFuzzer \
  "$src"/*.swift Fuzz/RequestFuzzer.swift -o "$out/request-fuzzer" 2> >(grep -v "Cannot export local symbol" >&2)
# Seeds: a few real targets and ranges.
printf 'http/127.0.0.1:8080/live/index.m3u8?token=1' > Fuzz/corpus-request/seed-target
printf 'cdn.example.com/a/%%2e%%2e/b.ts' > Fuzz/corpus-request/seed-traversal
printf '[::1]:443/x' > Fuzz/corpus-request/seed-ipv6
printf 'bytes=0-1023' > Fuzz/corpus-request/seed-range
printf -- '-500' > Fuzz/corpus-request/seed-suffix
SWIFT_BACKTRACE=enable=no "$out/request-fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix=Fuzz/artifacts/request- Fuzz/corpus-request 2>&1 \
  | grep -E "^#[0-9]+.*(DONE|pulse)|^Done|ERROR|SUMMARY|Test unit written|Fatal error" | tail -n 15
