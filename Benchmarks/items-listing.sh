#!/usr/bin/env bash
# Listing 10,000 items (issue 27): `hlscache ls` and pages of `GET /api/v1/items` (filters, sorts, offsets) on a
# real items.sqlite holding N items, next to the same query run by the sqlite3 shell on the same file (the floor:
# what the database alone costs).
#
#   Benchmarks/items-listing.sh [items...]       (default: 10000; 5 runs each, the median is printed)
#   HLSCACHE_BIN=/path/to/hlscache Benchmarks/items-listing.sh     (measure another build, e.g. a debug one)
#
# The items are copies of one item recorded by `hlscache fetch --detach` (nothing is downloaded: no origin), with
# states, tags, titles and playback records varied by SQL, created a second apart, each with 60 resource rows
# (one of them a key, which the listing looks up in the key store for `playableOffline`). Items are settled (cached,
# failed, paused, …) so the scheduler of `serve` leaves them alone.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10000)
runs=5
./scripts/install-deps.sh sqlite3 curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary
work=$(mktemp -d /tmp/hlscache-listing.XXXXXX)
trap 'kill $serve_pid 2>/dev/null || true; rm -rf "$work"' EXIT
serve_pid=

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() {  # command... -> wall milliseconds, median of $runs
  local times=() start end
  for _ in $(seq 1 "$runs"); do
    start=$(now)
    "$@" >/dev/null 2>&1
    end=$(now)
    times+=("$(python3 -c "print(f'{($end-$start)*1000:.1f}')")")
  done
  printf '%s\n' "${times[@]}" | median
}
curl_ms() {  # url -> milliseconds to the last byte, median of $runs (curl's own timer: no process start-up)
  local times=()
  for _ in $(seq 1 "$runs"); do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' "$1" | python3 -c 'import sys; print(f"{float(sys.stdin.read())*1000:.1f}")')")
  done
  printf '%s\n' "${times[@]}" | median
}

cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }
serve_cpu() {  # url -> CPU milliseconds serve spends per request (20 requests; /proc ticks of 10 ms), load-independent
  local before after
  before=$(cpu_ms "$serve_pid")
  for _ in $(seq 1 20); do curl -s -o /dev/null "$1"; done
  after=$(cpu_ms "$serve_pid")
  python3 -c "print(f'{($after - $before) / 20:.1f}')"
}
api_row() {  # label, query -> a table row: wall time, serve's CPU per request, the sqlite3 shell on the same query
  echo "| $1 | $(curl_ms "$api/items$2") ms | $(serve_cpu "$api/items$2") ms | $3 |"
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); binary: $bin; runs: $runs (median)"
for n in "${sizes[@]}"; do
  cache="$work/cache-$n"
  "$bin" fetch "http://127.0.0.1:9/vod/master.m3u8" --cache-dir "$cache" --id seed --detach >/dev/null
  sqlite3 "$cache/items.sqlite" <<SQL
UPDATE items SET state = 'cached', bytes_done = 12000000, bytes_total = 12000000, segments_done = 90, segments_total = 90
WHERE id = 'seed';
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $n)
INSERT INTO items (id, url, selection, renditions, precache_seconds, expires_at, locked, headers, state, error_code, error_message,
  bytes_done, bytes_total, segments_done, segments_total, created_at, updated_at, owner_pid, owner_token, title, tags)
SELECT 'item-' || i, 'https://cdn.example.com/course' || (i % 50) || '/lesson' || i || '/master.m3u8', selection, renditions,
  precache_seconds, expires_at, locked, headers,
  CASE i % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'paused' WHEN 2 THEN 'partiallyCached' ELSE 'cached' END,
  CASE i % 10 WHEN 0 THEN 'notFound' END, error_message, bytes_done + i, bytes_total + i, segments_done, segments_total,
  created_at + i, updated_at + (i * 7919 % $n), NULL, NULL, 'Lesson ' || i,
  json_array('course' || (i % 50), 'week' || (i % 12))
FROM items, n WHERE id = 'seed';
DELETE FROM items WHERE id = 'seed';
-- 60 resources per item, as a 2-minute rendition has: 4 playlists, a key, 55 segments (the listing reads the keys).
WITH RECURSIVE r(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM r WHERE j < 59)
INSERT INTO item_resources (item_id, key, url, kind, size, done, position)
SELECT id, url || '#' || j, replace(url, 'master.m3u8', 'r' || j),
  CASE WHEN j < 4 THEN 'playlist' WHEN j = 4 THEN 'key' ELSE 'segment' END, 200000, 1, j
FROM items, r;
INSERT INTO item_consumption (item_id, last_played_at, served)
SELECT id, created_at, '[[0,30]]' FROM items WHERE CAST(substr(id, 6) AS INTEGER) % 3 = 0;
SQL
  "$bin" ls --cache-dir "$cache" --state failed >/dev/null  # any migration happens here, outside the timings
  "$bin" serve --listen 127.0.0.1:0 --cache-dir "$cache" --log-level error --no-access-log >"$work/serve.log" 2>&1 &
  serve_pid=$!
  api=""
  for _ in $(seq 1 600); do
    api=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 || true)
    [ -n "$api" ] && curl -sf "$api/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  api="$api/api/v1"
  db="$cache/items.sqlite"
  echo
  echo "$n items"
  echo
  echo "| listing | hlscache (wall) | sqlite3 shell, same query (wall) |"
  echo "|---|---|---|"
  echo "| \`hlscache ls\` (all $n) | $(ms "$bin" ls --cache-dir "$cache") ms | $(ms sqlite3 "$db" "SELECT * FROM items ORDER BY created_at, id") ms |"
  echo "| \`hlscache ls --tag week3 --limit 100\` | $(ms "$bin" ls --cache-dir "$cache" --tag week3 --limit 100) ms | $(ms sqlite3 "$db" "SELECT * FROM items WHERE id IN (SELECT item_id FROM item_tags WHERE tag = 'week3') ORDER BY created_at, id LIMIT 100") ms |"
  echo
  echo "| \`GET /api/v1/items?…\` | wall (curl) | serve CPU per request | sqlite3 shell, same query (wall) |"
  echo "|---|---|---|---|"
  api_row "\`limit=100\` (first page)" "?limit=100" "$(ms sqlite3 "$db" "SELECT COUNT(*) FROM items; SELECT * FROM items ORDER BY created_at, id LIMIT 100") ms"
  api_row "\`limit=100&offset=$((n - 100))\` (last page)" "?limit=100&offset=$((n - 100))" "$(ms sqlite3 "$db" "SELECT * FROM items ORDER BY created_at, id LIMIT 100 OFFSET $((n - 100))") ms"
  # The last page again, by cursor (`after=` the nextCursor of the page before it): a range from the index, no offset.
  cursor=$(curl -sf "$api/items?limit=100&offset=$((n - 200))" | python3 -c 'import json, sys; print(json.load(sys.stdin)["nextCursor"])')
  api_row "\`limit=100&after=…\` (last page by cursor)" "?limit=100&after=$cursor" "$(ms sqlite3 "$db" "SELECT * FROM items WHERE (created_at, id) > (SELECT created_at, id FROM items ORDER BY created_at, id LIMIT 1 OFFSET $((n - 101))) ORDER BY created_at, id LIMIT 101") ms"
  api_row "\`state=failed,paused&sort=-updatedAt&limit=100\`" "?state=failed,paused&sort=-updatedAt&limit=100" "$(ms sqlite3 "$db" "SELECT * FROM items WHERE state IN ('failed','paused') ORDER BY updated_at DESC, id DESC LIMIT 100") ms"
  api_row "\`tag=course7&limit=100\`" "?tag=course7&limit=100" "$(ms sqlite3 "$db" "SELECT * FROM items WHERE id IN (SELECT item_id FROM item_tags WHERE tag = 'course7') ORDER BY created_at, id LIMIT 100") ms"
  api_row "\`played=false&sort=title&limit=100\`" "?played=false&sort=title&limit=100" "$(ms sqlite3 "$db" "SELECT * FROM items WHERE NOT EXISTS (SELECT 1 FROM item_consumption c WHERE c.item_id = items.id) ORDER BY title IS NULL, title COLLATE NOCASE, id LIMIT 100") ms"
  api_row "\`url=lesson4321\` (one item)" "?url=lesson4321" "$(ms sqlite3 "$db" "SELECT * FROM items WHERE instr(url, 'lesson4321') > 0") ms"
  echo "| every item (no \`limit\`) | $(curl_ms "$api/items") ms | — | — |"
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
  serve_pid=
done
