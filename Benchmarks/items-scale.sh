#!/usr/bin/env bash
# How the number of items changes the cost of the item commands and of an idle `serve`: caches holding N items
# (a real `hlscache fetch` of the 60-second, 3-variant stream, then N copies of its row made with sqlite3), and
#   - `hlscache ls --state failed` (lists nothing: the cost is reading the table),
#   - `hlscache fetch` of the same (cached) stream as a new item,
#   - `serve`: CPU used and RSS while idle, from 10 s to 20 s after start (its scheduler and admin poll run every
#     second), and the CPU of its start-up (the first 10 s).
#
#   Benchmarks/items-scale.sh [items...]       (default: 1000 10000; 3 runs each, the median is printed)
#   HLSCACHE_BIN=/path/to/hlscache Benchmarks/items-scale.sh     (measure another build, e.g. an older commit's)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib/prewarm-origin.sh
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(1000 10000)
runs=3
./scripts/install-deps.sh nginx-light ffmpeg sqlite3 >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

make_prewarm_workdir items
make_prewarm_stream "$work/www/vod"
start_static_nginx "$work"
url="http://127.0.0.1:$port/vod/master.m3u8"
"$bin" fetch "$url" --cache-dir "$work/seed" --id seed --header 'Cookie: a=b' >/dev/null

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() {  # command... -> wall seconds
  local start end
  start=$(now)
  "$@" >/dev/null 2>&1
  end=$(now)
  python3 -c "print(f'{$end-$start:.3f}')"
}
make_cache() {  # dir, items: the seed cache with N copies of the seed item's row
  rm -rf "$1"
  cp -r "$work/seed" "$1"
  sqlite3 "$1/items.sqlite" <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
INSERT INTO items (id, url, selection, renditions, precache_seconds, expires_at, locked, headers, state, error_code, error_message,
  bytes_done, bytes_total, segments_done, segments_total, created_at, updated_at, owner_pid, owner_token)
SELECT 'copy-' || i, url, selection, renditions, precache_seconds, expires_at, locked, headers, state, error_code, error_message,
  bytes_done, bytes_total, segments_done, segments_total, created_at + i, updated_at, owner_pid, owner_token
FROM items, n WHERE id = 'seed';
SQL
}
cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); binary: $bin; runs: $runs (median)"
echo
echo "| items | ls --state failed | fetch (new item, stream cached) | serve start-up CPU (first 10 s) | serve idle CPU per second | serve idle RSS |"
echo "|---|---|---|---|---|---|"
for n in "${sizes[@]}"; do
  cache="$work/cache-$n"
  make_cache "$cache" "$n"
  "$bin" ls --cache-dir "$cache" --state failed >/dev/null  # any migration happens here, outside the timings
  ls_times=() fetch_times=()
  for run in $(seq 1 "$runs"); do
    ls_times+=("$(seconds "$bin" ls --cache-dir "$cache" --state failed)")
    fetch_times+=("$(seconds "$bin" fetch "$url" --cache-dir "$cache" --id "new-$run")")
  done
  "$bin" serve --listen 127.0.0.1:0 --cache-dir "$cache" --log-level error >/dev/null 2>&1 &
  serve_pid=$!
  sleep 10
  startup=$(cpu_ms "$serve_pid")
  sleep 10
  idle=$(( ($(cpu_ms "$serve_pid") - startup) / 10 ))
  rss=$(awk '/VmRSS/ {printf "%.0f MB", $2 / 1024}' "/proc/$serve_pid/status")
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
  echo "| $n | $(printf '%s\n' "${ls_times[@]}" | median) s | $(printf '%s\n' "${fetch_times[@]}" | median) s | ${startup} ms | ${idle} ms | $rss |"
done
