#!/usr/bin/env bash
# What SwiftNIO itself costs per small answer on this machine, next to nginx static and hlscache's replayed playlist
# hit, measured with wrk in the same run: is the gap to nginx on small hits NIO's or ours (issue 39)?
#   nginx static       the 1.8 KB VOD playlist of hits-vs-peers.sh, sent by nginx (2 workers)
#   hlscache           the same playlist through hlscache (a replayed hit from its memory tier)
#   floor-<mode>       Benchmarks/nio-floor: a SwiftNIO server that answers every request head with the same bytes
#                      (no parsing, routing or cache), on as many event loops as cores; <mode> says how it writes
#                      (batched, flushed, promised, three: see its main.swift)
# Prints a Markdown table of median requests/s and each server's CPU µs per request.
#
#   Benchmarks/nio-floor.sh [seconds-per-run] [rounds] [connections]     (defaults 4, 5 and 64)
#   HLSCACHE_BIN=/path/to/hlscache ...                                    (an existing build instead of a release build)
# Loopback only; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-4}
rounds=${2:-5}
conns=${3:-64}
modes="batched flushed promised three"
./scripts/install-deps.sh nginx-light varnish wrk >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary
(cd Benchmarks/nio-floor && swift build -c release 2>&1 | grep -E "error:|Build complete" | tail -1) || true
floor=$PWD/Benchmarks/nio-floor/.build/release/nio-floor
[ -x "$floor" ] || { echo "FAIL: Benchmarks/nio-floor did not build" >&2; exit 1; }

work=$(mktemp -d /tmp/hlscache-floor.XXXXXX)
floor_pids=""
cleanup() {
  for pid in $floor_pids $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  peers_stop
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www/vod"
# nginx (origin, static, proxy_cache), Varnish (-s malloc,1G) and hlscache: Benchmarks/lib/peers.sh.
. Benchmarks/lib/peers.sh
write_vod_playlist "$work/www/vod/index.m3u8"
peers_start
# hlscache answers the playlist rewritten: the floor answers those very bytes.
curl -fsS -o "$work/rewritten.m3u8" "$(prefix_of hlscache)/vod/index.m3u8"
result=$(curl -fsS -D - -o /dev/null "$(prefix_of hlscache)/vod/index.m3u8" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}')
[ "$result" = "HIT" ] || { echo "warm-up failed: the playlist is not a hit on hlscache ($result)" >&2; exit 1; }
declare -A floor_port=() floor_pid=()
for mode in $modes; do
  floor_port[$mode]=$(free_port)
  "$floor" "${floor_port[$mode]}" "$work/rewritten.m3u8" "$mode" >"$work/floor-$mode.log" 2>&1 &
  floor_pid[$mode]=$!
  floor_pids+=" $!"
  wait_healthy "http://127.0.0.1:${floor_port[$mode]}/"
done

. Benchmarks/lib/wrk-rounds.sh
url_of() {
  case $1 in
    static) echo "$(prefix_of static)/vod/index.m3u8" ;;
    hlscache) echo "$(prefix_of hlscache)/vod/index.m3u8" ;;
    floor-*) echo "http://127.0.0.1:${floor_port[${1#floor-}]}/vod/index.m3u8" ;;
  esac
}
pids_for() {
  case $1 in
    static | hlscache) pids_of "$1" ;;
    floor-*) echo "${floor_pid[${1#floor-}]}" ;;
  esac
}
measured="static hlscache"
for mode in $modes; do measured+=" floor-$mode"; done

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(nginx -v 2>&1); playlist $(wc -c <"$work/rewritten.m3u8") bytes"
echo "$rounds rounds of wrk ${duration}s at $conns connections per server, servers interleaved; median req/s (CPU µs per request)"
echo
declare -A rps=() cpu=()
for _ in $(seq 1 "$rounds"); do
  for server in $measured; do
    # shellcheck disable=SC2046
    read -r r u <<<"$(run_wrk "$(url_of "$server")" "$conns" $(pids_for "$server"))"
    rps[$server]+="$r "
    cpu[$server]+="$u "
  done
done
echo "| server | req/s | CPU µs per request | / nginx static |"
echo "|---|---:|---:|---:|"
# shellcheck disable=SC2086
static=$(median ${rps[static]})
for server in $measured; do
  # shellcheck disable=SC2086
  m=$(median ${rps[$server]})
  # shellcheck disable=SC2086
  echo "| $server | ${m%.*} | $(median ${cpu[$server]}) | $(python3 -c "print(f'{$m / $static:.2f}')") |"
done
echo
echo "load at the end: $(cut -d" " -f1-3 /proc/loadavg)"
