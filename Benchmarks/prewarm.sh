#!/usr/bin/env bash
# Time to prewarm a 60-second, 3-variant HLS stream from a local origin: hlscache fetch vs ffmpeg -c copy vs
# streamlink, in the same run, plus the origin's own loopback throughput (all files with curl, 4 in parallel).
#
#   Benchmarks/prewarm.sh [runs]      (default 3; the median is printed)
#   HLSCACHE_BIN=/path/a HLSCACHE_BIN_B=/path/b Benchmarks/prewarm.sh 7   (A/B: a second build's fetch, same runs)
#   STREAM_SECONDS=300 Benchmarks/prewarm.sh 5    (a longer stream: throughput once the fixed start-up is small)
#
# nginx serves the stream on 127.0.0.1. ffmpeg and streamlink write to a file (what they are used for); hlscache
# writes into a new cache directory (files fsynced, index rows committed), and again into a cache directory an earlier
# command already set up (the usual case). Loopback only, bounded by the stream's size.
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib/prewarm-origin.sh
runs=${1:-3}
./scripts/install-deps.sh nginx-light ffmpeg streamlink curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

make_prewarm_workdir prewarm

stream_seconds=${STREAM_SECONDS:-60}
make_prewarm_stream "$work/www/vod" "$stream_seconds"
bytes=$(du -sb "$work/www/vod" | cut -f1)
segments=$(find "$work/www/vod" -name '*.ts' | wc -l)

start_static_nginx "$work"
url="http://127.0.0.1:$port/vod/master.m3u8"

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_it() {  # name, command... → prints seconds
  local start end
  start=$(now)
  if ! "$@" >"$work/last.log" 2>&1; then echo "FAILED: $* ($(tail -1 "$work/last.log"))" >&2; exit 1; fi
  end=$(now)
  python3 -c "print(f'{$end-$start:.3f}')"
}

declare -A results
# Every run writes into new directories, and nothing is deleted until the script exits: on ext4 without a
# journal (this machine's root), creating an inode skips every inode deleted in the last 1–6 minutes, one by one
# (fs/ext4/ialloc.c, recently_deleted), so removing the previous run's cache made the next run's ~190 file and
# directory creations the largest cost of a prewarm (docs/benchmarks.md, 2026-11-23).
for run in $(seq 1 "$runs"); do
  out="$work/out-$run"; mkdir -p "$out"
  results[origin]+="$(time_it bash -c "cd '$work/www' && find vod -type f | sed 's|^|http://127.0.0.1:$port/|' | xargs -P4 -n8 curl -fsS -o /dev/null") "
  # The same bytes into files, each fsynced (coreutils `sync FILE...`), as hlscache stores them: the floor for a
  # store that keeps what it downloads across a power cut.
  results[origin_files]+="$(time_it bash -c "cd '$work/www' && find vod -type f | awk -v d='$work/files-$run' -v u='http://127.0.0.1:$port' '{print \"-o\"; print d \"/\" \$0; print u \"/\" \$0}' | xargs -P4 -n24 curl -fsS --create-dirs && find '$work/files-$run' -type f -print0 | xargs -0 sync") "
  results[hlscache_all]+="$(time_it "$bin" fetch "$url" --cache-dir "$work/cache-$run-all") "
  # The usual case: a cache directory some earlier command already set up (its SQLite files created and migrated).
  "$bin" ls --cache-dir "$work/cache-$run-existing" >/dev/null
  results[hlscache_existing]+="$(time_it "$bin" fetch "$url" --cache-dir "$work/cache-$run-existing") "
  if [ -n "${HLSCACHE_BIN_B:-}" ]; then
    results[hlscache_b_all]+="$(time_it "$HLSCACHE_BIN_B" fetch "$url" --cache-dir "$work/cache-$run-b") "
  fi
  results[hlscache_best]+="$(time_it "$bin" fetch "$url" --variants best --cache-dir "$work/cache-$run-best") "
  results[ffmpeg_all]+="$(time_it ffmpeg -hide_banner -loglevel error -nostdin -y -i "$url" -map 0 -c copy -f mpegts "$out/all.ts") "
  results[streamlink_best]+="$(time_it streamlink --loglevel error --force -o "$out/best.ts" "$url" best) "
done

echo "stream: $stream_seconds s, 3 variants (1.5 Mbit/s, 600 kbit/s, 200 kbit/s, each with its own AAC track), 2 s segments: $segments files, $bytes bytes"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); runs: $runs (median shown)"
echo
echo "| what | downloads | seconds (median) | MB/s |"
echo "|---|---|---|---|"
row() {
  local t; t=$(echo "${results[$1]}" | tr ' ' '\n' | grep -v '^$' | median)
  echo "| $2 | $3 | $t | $(python3 -c "print(f'{$4/1e6/$t:.1f}')") |"
}
best_bytes=$(du -sb "$work/www/vod/v0" | cut -f1)
row origin "origin: curl of every file, 4 in parallel" "all variants" "$bytes"
row origin_files "origin into files: the same curl, each file written and fsynced" "all variants" "$bytes"
row hlscache_all "hlscache fetch URL" "all variants" "$bytes"
row hlscache_existing "hlscache fetch URL, into a cache directory already set up" "all variants" "$bytes"
if [ -n "${HLSCACHE_BIN_B:-}" ]; then row hlscache_b_all "B: $HLSCACHE_BIN_B fetch URL" "all variants" "$bytes"; fi
row ffmpeg_all "ffmpeg -i URL -map 0 -c copy" "all variants" "$bytes"
row hlscache_best "hlscache fetch URL --variants best" "best variant" "$best_bytes"
row streamlink_best "streamlink URL best" "best variant" "$best_bytes"
