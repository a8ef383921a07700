#!/usr/bin/env bash
# How the cache's size changes the cost of using it: `hlscache ls` (open + close) and a prewarm of the
# 60-second, 3-variant stream of Benchmarks/prewarm.sh, into an empty cache and into caches already holding N
# objects — with room to spare, and full (the cap set to what is stored, so every write evicts, as in a proxy's
# steady state).
#
#   Benchmarks/store-scale.sh [objects...]      (default: 10000 50000; 3 runs each, the median is printed)
#   HLSCACHE_BIN=/path/to/hlscache Benchmarks/store-scale.sh    (measure another build, e.g. an older commit's)
#   SEGMENTS="1000 5000" Benchmarks/store-scale.sh                 (the long-item table's sizes; default 1000 5000)
#
# A second table has `hlscache serve` on the same caches at their cap: the time until /healthz answers, and 90
# segment misses through the proxy (curl, 4 in parallel; each miss stores its segment and evicts).
#
# A third table prewarms single media playlists of 1,000 and 5,000 small segments (1,880 bytes each): the cost of
# an item's own bookkeeping as it gets longer.
#
# The prefilled objects are real index rows (inserted with sqlite3, through the schema's triggers) and real
# files of the rows' sizes (sparse, so 50,000 objects of ~225 KB take no disk). They are cleanly closed: no
# recovery pass is due. Each prewarm goes to a new URL (a copy of the stream) so nothing is cached yet.
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib/prewarm-origin.sh
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10000 50000)
runs=3
./scripts/install-deps.sh nginx-light ffmpeg >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

make_prewarm_workdir scale
make_prewarm_stream "$work/www/vod"
copies=$(( (${#sizes[@]} + 1) * (runs * 2 + 1) ))
segment_counts=(${SEGMENTS:-1000 5000})
python3 - "$work/www" "${segment_counts[@]}" <<'PY'
import os, sys
root, counts = sys.argv[1], [int(n) for n in sys.argv[2:]]
for n in counts:
    folder = f"{root}/long{n}"
    os.makedirs(folder, exist_ok=True)
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
    for i in range(n):
        with open(f"{folder}/seg{i:05d}.ts", "wb") as f:
            f.write(b"G" + bytes(1879))
        lines += ["#EXTINF:2.0,", f"seg{i:05d}.ts"]
    lines.append("#EXT-X-ENDLIST")
    with open(f"{folder}/index.m3u8", "w") as f:
        f.write("\n".join(lines) + "\n")
PY
for i in $(seq 1 "$copies"); do cp -r "$work/www/vod" "$work/www/vod$i"; done

start_static_nginx "$work"
# Let the copies' writeback drain: on this VM an fsync queued behind it takes seconds, not the ~0.5 ms it costs.
sync; sleep 5

prefill() {  # cache-dir, objects
  "$bin" ls --cache-dir "$1" >/dev/null  # creates the directory, the schema and a clean session record
  python3 - "$1" "$2" <<'PY'
import hashlib, os, sqlite3, sys, time
cache, n = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(cache + "/index.sqlite")
now = time.time()
rows = []
for i in range(n):
    key = f"https://cdn.example.invalid/prefill/{i}.ts"
    h = hashlib.sha256(key.encode()).hexdigest()
    os.makedirs(f"{cache}/objects/{h[:2]}", exist_ok=True)
    size = 200_000 + (i * 7919) % 50_000
    with open(f"{cache}/objects/{h[:2]}/{h[2:]}", "wb") as f:
        f.truncate(size)
    rows.append((h, key, size, "video/mp2t", f'"{h[:16]}"', None, now - n + i, now - n + i, None, 0, "segment"))
db.executemany("INSERT INTO objects (key_hash, key, size, content_type, etag, last_modified, created_at, last_access,"
               " expires_at, locked, kind) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
db.commit()
PY
}

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
elapsed() { python3 -c "print(f'{$2-$1:.3f}')"; }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); runs: $runs (median shown)"
echo
echo "| objects already cached | hlscache ls (s) | hlscache fetch, 93 files, 19.9 MB (s) | the same into the full cache (s) |"
echo "|---|---|---|---|"
copy=0
for objects in 0 "${sizes[@]}"; do
  cache="$work/cache-$objects"
  if [ "$objects" -gt 0 ]; then prefill "$cache" "$objects"; else "$bin" ls --cache-dir "$cache" >/dev/null; fi
  sync; sleep 3  # the prefill's own writeback must not land in the timings
  ls_times=(); fetch_times=(); full_times=()
  for run in $(seq 1 "$runs"); do
    copy=$((copy + 1))
    start=$(now); "$bin" ls --cache-dir "$cache" --max-cache-size 100GiB >/dev/null; end=$(now)
    ls_times+=("$(elapsed "$start" "$end")")
    start=$(now)
    "$bin" fetch "http://127.0.0.1:$port/vod$copy/master.m3u8" --cache-dir "$cache" --max-cache-size 100GiB >"$work/last.log" 2>&1 \
      || { echo "fetch failed: $(tail -1 "$work/last.log")" >&2; exit 1; }
    end=$(now)
    fetch_times+=("$(elapsed "$start" "$end")")
  done
  for run in $(seq 1 "$runs"); do
    copy=$((copy + 1))
    cap=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT SUM(size) FROM objects').fetchone()[0])" "$cache/index.sqlite")
    start=$(now)
    "$bin" fetch "http://127.0.0.1:$port/vod$copy/master.m3u8" --cache-dir "$cache" --max-cache-size "$cap" >"$work/last.log" 2>&1 \
      || { echo "fetch failed: $(tail -1 "$work/last.log")" >&2; exit 1; }
    end=$(now)
    full_times+=("$(elapsed "$start" "$end")")
  done
  echo "| $objects | $(printf '%s\n' "${ls_times[@]}" | median) | $(printf '%s\n' "${fetch_times[@]}" | median) | $(printf '%s\n' "${full_times[@]}" | median) |"
done

echo
echo "| objects already cached | serve ready (s) | 90 misses through serve into the full cache (s) |"
echo "|---|---|---|"
serve_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
for objects in 0 "${sizes[@]}"; do
  cache="$work/cache-$objects"
  copy=$((copy + 1))
  cap=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT SUM(size) FROM objects').fetchone()[0])" "$cache/index.sqlite")
  sync; sleep 2
  start=$(now)
  "$bin" serve --listen "127.0.0.1:$serve_port" --cache-dir "$cache" --max-cache-size "$cap" >"$work/serve.log" 2>&1 &
  serve_pid=$!
  until curl -fs "http://127.0.0.1:$serve_port/healthz" >/dev/null 2>&1; do
    kill -0 "$serve_pid" 2>/dev/null || { echo "serve failed: $(tail -1 "$work/serve.log")" >&2; exit 1; }
    sleep 0.005
  done
  ready=$(elapsed "$start" "$(now)")
  start=$(now)
  (cd "$work/www" && find "vod$copy" -name '*.ts' | sed "s|^|http://127.0.0.1:$serve_port/http/127.0.0.1:$port/|" | xargs -P4 -n8 curl -fsS >/dev/null)
  misses=$(elapsed "$start" "$(now)")
  kill -INT "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
  echo "| $objects | $ready | $misses |"
done

echo
echo "| segments in the item (1,880 B each) | hlscache fetch (s) | ms per segment |"
echo "|---|---|---|"
for n in "${segment_counts[@]}"; do
  sync; sleep 2
  start=$(now)
  "$bin" fetch "http://127.0.0.1:$port/long$n/index.m3u8" --cache-dir "$work/cache-long$n" >"$work/last.log" 2>&1 \
    || { echo "fetch failed: $(tail -1 "$work/last.log")" >&2; exit 1; }
  end=$(now)
  t=$(elapsed "$start" "$end")
  echo "| $n | $t | $(python3 -c "print(f'{$t*1000/$n:.2f}')") |"
done
