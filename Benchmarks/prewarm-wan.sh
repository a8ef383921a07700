#!/usr/bin/env bash
# Time to prewarm the 60-second, 3-variant stream of Benchmarks/prewarm.sh from an origin that behaves like one
# across the internet (issue "prewarm that wins on a real network"): every response waits LATENCY before its first
# byte and every connection is capped at RATE (Benchmarks/lib/wan-origin.py; this machine has no netem, so the
# origin itself delays and paces). hlscache fetch against ffmpeg -c copy and streamlink, in the same runs.
#
#   Benchmarks/prewarm-wan.sh [runs]                     (default 3; the median is printed)
#   LATENCY=0.05 RATE_MBIT=20 Benchmarks/prewarm-wan.sh   (the defaults: 50 ms to first byte, 20 Mbit/s per connection)
#   HLSCACHE_BIN=/path/to/hlscache ...                   (an existing build instead of a release build)
#   NARROW=4 Benchmarks/prewarm-wan.sh                   (the extra rows' downloads.resourcesPerItem; default 4, the
#                                                         default before 2026-11-26; the default now is 16)
#
# Loopback only; every command is bounded by the stream's size and the origin's pace.
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib/prewarm-origin.sh
runs=${1:-3}
latency=${LATENCY:-0.05}
rate_mbit=${RATE_MBIT:-20}
narrow=${NARROW:-4}
./scripts/install-deps.sh ffmpeg streamlink curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

make_prewarm_workdir prewarm-wan
make_prewarm_stream "$work/www/vod" 60
bytes=$(du -sb "$work/www/vod" | cut -f1)
best_bytes=$(du -sb "$work/www/vod/v0" | cut -f1)
files=$(find "$work/www/vod" -type f | wc -l)

python3 Benchmarks/lib/wan-origin.py "$work/www" --latency "$latency" --rate-mbit "$rate_mbit" >"$work/origin.port" &
origin_pid=$!
trap 'kill $origin_pid 2>/dev/null || true; sleep 0.2; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do [ -s "$work/origin.port" ] && break; sleep 0.1; done
port=$(cat "$work/origin.port")
url="http://127.0.0.1:$port/vod/master.m3u8"
curl -fsS -o /dev/null "$url"

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_it() {
  local start end
  start=$(now)
  if ! timeout 600 "$@" >"$work/last.log" 2>&1; then echo "FAILED: $* ($(tail -1 "$work/last.log"))" >&2; exit 1; fi
  end=$(now)
  python3 -c "print(f'{$end-$start:.2f}')"
}

declare -A results
for run in $(seq 1 "$runs"); do
  out="$work/out-$run"; mkdir -p "$out"
  results[curl4]+="$(time_it bash -c "cd '$work/www' && find vod -type f | sed 's|^|http://127.0.0.1:$port/|' | xargs -P4 -n8 curl -fsS -o /dev/null") "
  results[hlscache_all]+="$(time_it "$bin" fetch "$url" --cache-dir "$work/cache-$run-all") "
  results[ffmpeg_all]+="$(time_it ffmpeg -hide_banner -loglevel error -nostdin -y -i "$url" -map 0 -c copy -f mpegts "$out/all.ts") "
  results[hlscache_best]+="$(time_it "$bin" fetch "$url" --variants best --cache-dir "$work/cache-$run-best") "
  # Fewer transfers at a time (the old default): what a distant origin punishes (each connection is capped).
  results[hlscache_narrow]+="$(time_it env HLSCACHE_DOWNLOADS_RESOURCES_PER_ITEM=$narrow "$bin" fetch "$url" --cache-dir "$work/cache-$run-narrow") "
  results[hlscache_best_narrow]+="$(time_it env HLSCACHE_DOWNLOADS_RESOURCES_PER_ITEM=$narrow "$bin" fetch "$url" --variants best --cache-dir "$work/cache-$run-best-narrow") "
  results[streamlink_best]+="$(time_it streamlink --loglevel error --force -o "$out/best.ts" "$url" best) "
done

echo "origin: $latency s before each response's first byte, $rate_mbit Mbit/s per connection (Benchmarks/lib/wan-origin.py)"
echo "stream: 60 s, 3 variants, 2 s segments: $files files, $bytes bytes"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); runs: $runs (median shown)"
echo
echo "| what | downloads | seconds (median) | MB/s | hlscache is faster by |"
echo "|---|---|---|---|---|"
med() { echo "${results[$1]}" | tr ' ' '\n' | grep -v '^$' | median; }
row() { # key label downloads bytes [compare-with-key]
  local t; t=$(med "$1")
  local ratio=""
  [ -n "${5:-}" ] && ratio=$(python3 -c "print(f'{$t / $(med "$5"):.1f}×')")
  echo "| $2 | $3 | $t | $(python3 -c "print(f'{$4/1e6/$t:.1f}')") | $ratio |"
}
row curl4 "curl of every file, 4 connections in parallel" "all variants" "$bytes"
row hlscache_all "hlscache fetch URL (the defaults: 16 transfers at a time)" "all variants" "$bytes"
row hlscache_narrow "hlscache fetch URL, downloads.resourcesPerItem $narrow" "all variants" "$bytes"
row ffmpeg_all "ffmpeg -i URL -map 0 -c copy (ratio: against the defaults)" "all variants" "$bytes" hlscache_all
echo "| ffmpeg against resourcesPerItem $narrow | | | | $(python3 -c "print(f'{$(med ffmpeg_all) / $(med hlscache_narrow):.1f}×')") |"
row hlscache_best "hlscache fetch URL --variants best" "best variant" "$best_bytes"
row hlscache_best_narrow "hlscache fetch URL --variants best, downloads.resourcesPerItem $narrow" "best variant" "$best_bytes"
row streamlink_best "streamlink URL best (ratio: against the defaults)" "best variant" "$best_bytes" hlscache_best
echo "| streamlink against resourcesPerItem $narrow | | | | $(python3 -c "print(f'{$(med streamlink_best) / $(med hlscache_best_narrow):.1f}×')") |"
