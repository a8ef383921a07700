#!/usr/bin/env bash
# Playlist engine benchmark (release build): parse, rewrite and serialize a 5,000-segment media playlist and a
# 50-variant master playlist. Usage: Benchmarks/run-playlist-bench.sh [iterations]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product PlaylistBenchmark >/dev/null
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(swift --version 2>/dev/null | head -1)"
.build/release/PlaylistBenchmark "${1:-500}"
