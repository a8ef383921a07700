#!/usr/bin/env bash
# Large hits from memory or with sendfile, by how many are in flight (issue 26): one release build started several
# times side by side with different `cache.memoryLargeSends` (0: every body over 64 KiB with sendfile; a large number:
# every one from memory), wrk against each in interleaved rounds. Prints median requests/s (server CPU µs per request).
#
#   Benchmarks/memory-large-sends.sh [seconds-per-run] [rounds]        (defaults 3 and 3)
#   LIMITS="0 4 8 16 100000" CELLS="2m:1 2m:8 2m:16 2m:32 2m:64 256k:1 256k:8 256k:64" HLSCACHE_BIN=... Benchmarks/memory-large-sends.sh
# Loopback only; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-3}
rounds=${2:-3}
limits=${LIMITS:-0 4 8 16 100000}
cells=${CELLS:-2m:1 2m:8 2m:16 2m:32 2m:64 256k:1 256k:8 256k:64}
./scripts/install-deps.sh wrk >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

work=$(mktemp -d /tmp/hlscache-large-sends.XXXXXX)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www/vod"
head -c $((2 * 1024 * 1024)) /dev/urandom >"$work/www/vod/seg_2m.ts"
head -c $((256 * 1024)) /dev/urandom >"$work/www/vod/seg_256k.ts"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
origin_port=$(free_port)
python3 -m http.server "$origin_port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
declare -A port=() pid=()
for limit in $limits; do
  port[$limit]=$(free_port)
  mkdir -p "$work/cache-$limit"
  HLSCACHE_CACHE_MEMORY_LARGE_SENDS=$limit "$bin" serve --listen "127.0.0.1:${port[$limit]}" --cache-dir "$work/cache-$limit" \
    --log-level error --prefetch-segments 0 >"$work/hlscache-$limit.log" 2>&1 &
  pid[$limit]=$!
done
url_of() { # limit object
  case $2 in 2m) p=/vod/seg_2m.ts ;; 256k) p=/vod/seg_256k.ts ;; esac
  echo "http://127.0.0.1:${port[$1]}/http/127.0.0.1:$origin_port$p"
}
for limit in $limits; do
  for _ in $(seq 1 200); do curl -fsS "http://127.0.0.1:${port[$limit]}/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  # Fetched, then served from the file twice (read into memory), then warmed by a short run.
  for object in 2m 256k; do
    for _ in 1 2 3 4; do curl -fsS -o /dev/null "$(url_of "$limit" "$object")"; sleep 0.2; done
    wrk -t1 -c1 -d1s "$(url_of "$limit" "$object")" >/dev/null
  done
done
. Benchmarks/lib/wrk-rounds.sh
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $bin"
echo "each cell: $rounds rounds of wrk ${duration}s per server, interleaved; median req/s (server CPU µs per request)"
echo
header="| workload | connections"
sep="|---|---:"
for limit in $limits; do header+=" | memoryLargeSends=$limit"; sep+="|---:"; done
echo "$header |"
echo "$sep|"
for cell in $cells; do
  object=${cell%%:*}
  conns=${cell##*:}
  declare -A rps=() cpu=()
  for limit in $limits; do rps[$limit]=""; cpu[$limit]=""; done
  for _ in $(seq 1 "$rounds"); do
    for limit in $limits; do
      read -r r u <<<"$(run_wrk "$(url_of "$limit" "$object")" "$conns" "${pid[$limit]}")"
      rps[$limit]+="$r "
      cpu[$limit]+="$u "
    done
  done
  row="| $object | $conns"
  # shellcheck disable=SC2086
  for limit in $limits; do row+=" | $(median ${rps[$limit]} | cut -d. -f1) ($(median ${cpu[$limit]}))"; done
  echo "$row |"
  unset rps cpu
done
echo
echo "peak RSS (MiB): $(for limit in $limits; do printf '%s=%s ' "$limit" $(($(awk '/VmHWM/{print $2}' "/proc/${pid[$limit]}/status") / 1024)); done)"
