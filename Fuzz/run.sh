#!/usr/bin/env bash
# Builds the playlist fuzzer with libFuzzer + AddressSanitizer and runs it for N seconds (default 60).
#   Fuzz/run.sh 600        # ten minutes
# Crashing inputs land in Fuzz/artifacts/; copy them to Tests/HLSPlaylistTests/FuzzRegressions/ so the test
# suite replays them forever.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=.build-fuzz
mkdir -p "$out" Fuzz/corpus-work Fuzz/artifacts
swiftc -O -parse-as-library -sanitize=fuzzer,address -D FUZZING -module-name PlaylistFuzzer \
  Sources/HLSPlaylist/*.swift Tests/HLSPlaylistTests/PlaylistProperty.swift Fuzz/PlaylistFuzzer.swift \
  -o "$out/playlist-fuzzer" 2> >(grep -v "Cannot export local symbol" >&2)
# Seed corpus: every fixture and regression input.
"$out/playlist-fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix=Fuzz/artifacts/ -dict=Fuzz/hls.dict \
  Fuzz/corpus-work Tests/HLSPlaylistTests/Fixtures Tests/HLSPlaylistTests/FuzzRegressions 2>&1 \
  | grep -E "^#[0-9]+.*(DONE|pulse)|^Done|ERROR|SUMMARY|Test unit written|property violated" | tail -n 15
