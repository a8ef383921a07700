#!/usr/bin/env bash
# Cache hits: hlscache against the best of its peers, measured with wrk in the same run (issue "hits at or above
# nginx and Varnish"):
#   nginx static       sendfile of the files (no cache logic at all: the floor every cache is compared with)
#   nginx proxy_cache  nginx as a caching proxy of the same origin (sendfile from its cache files)
#   Varnish            varnishd -s malloc,1G (serves from memory)
#   hlscache           the release build: its memory tier (small hits; bodies over 64 KiB while few are in flight),
#                      else sendfile from its cache files
# Workloads: 2 MiB and 256 KiB segments, and a 1.8 KB VOD playlist (40 segments; hlscache serves it rewritten),
# at several connection counts. Every server is warmed (each object fetched once, then checked to be a hit), then
# each cell runs ROUNDS rounds of wrk per server, the servers interleaved, each round starting with the next (this
# machine is shared: single runs swing by 20 %). Prints a Markdown table of median requests/s, each server's CPU µs per request, hlscache/best, and every
# server's peak RSS.
#
#   Benchmarks/hits-vs-peers.sh [seconds-per-run] [rounds]          (defaults 4 and 3)
#   CELLS="2m:1 256k:64 playlist:64" Benchmarks/hits-vs-peers.sh    (only some cells)
#   HLSCACHE_BIN=/path/to/hlscache ...                              (an existing build instead of a release build)
#   HLSCACHE_BIN_B=/path/to/other/hlscache ...                      (a second build in the same rounds: before/after)
#   HLSCACHE_BIN_B=... HLSCACHE_B_ENV="HLSCACHE_CACHE_MEMORY_MAX_OBJECT_SIZE=4MiB" ...   (B with other settings)
# Loopback only; every run is bounded; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-4}
rounds=${2:-3}
cells=${CELLS:-2m:1 2m:8 2m:64 256k:1 256k:64 playlist:64}
./scripts/install-deps.sh nginx-light varnish wrk >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

work=$(mktemp -d /tmp/hlscache-peers.XXXXXX)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  peers_stop
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www/vod"
head -c $((2 * 1024 * 1024)) /dev/urandom >"$work/www/vod/seg_2m.ts"
head -c $((256 * 1024)) /dev/urandom >"$work/www/vod/seg_256k.ts"
# nginx (origin, static, proxy_cache), Varnish (-s malloc,1G) and hlscache: Benchmarks/lib/peers.sh.
. Benchmarks/lib/peers.sh
write_vod_playlist "$work/www/vod/index.m3u8"
peers_start

path_of() { case $1 in 2m) echo /vod/seg_2m.ts ;; 256k) echo /vod/seg_256k.ts ;; playlist) echo /vod/index.m3u8 ;; esac; }
url_of() { echo "$(prefix_of "$1")$(path_of "$2")"; }
# Warm every cache and check that the second request is a hit.
for object in 2m 256k playlist; do
  for server in ${servers#static }; do
    curl -fsS -o /dev/null "$(url_of "$server" "$object")"
    sleep 0.2
    result=$(curl -fsS -D - -o /dev/null "$(url_of "$server" "$object")" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}')
    [ "$result" = "HIT" ] || { echo "warm-up failed: $object is not a hit on $server ($result)" >&2; exit 1; }
  done
done

. Benchmarks/lib/wrk-rounds.sh

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(nginx -v 2>&1); $(varnishd -V 2>&1 | head -1); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "each cell: $rounds rounds of wrk ${duration}s per server, servers interleaved, each round starting with the next; median req/s (CPU µs per request)"
echo
if [ -n "${HLSCACHE_BIN_B:-}" ]; then
  echo "hlscache B: ${HLSCACHE_B_ENV:-} $HLSCACHE_BIN_B"
  echo
  echo "| workload | connections | nginx static | nginx proxy_cache | Varnish | hlscache | hlscache B | hlscache / best | B / best |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
else
  echo "| workload | connections | nginx static | nginx proxy_cache | Varnish | hlscache | hlscache / best |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
fi
for cell in $cells; do
  object=${cell%%:*}
  conns=${cell##*:}
  declare -A rps=() cpu=()
  for server in $servers; do rps[$server]=""; cpu[$server]=""; done
  for round in $(seq 0 $((rounds - 1))); do
    for server in $(rotated "$servers" "$round"); do
      # shellcheck disable=SC2046
      read -r r u <<<"$(run_wrk "$(url_of "$server" "$object")" "$conns" $(pids_of "$server"))"
      rps[$server]+="$r "
      cpu[$server]+="$u "
    done
  done
  row="| $object | $conns"
  best=0
  for server in $servers; do
    # shellcheck disable=SC2086
    m=$(median ${rps[$server]})
    # shellcheck disable=SC2086
    c=$(median ${cpu[$server]})
    row+=" | ${m%.*} ($c)"
    case $server in
      hlscache) mine=$m ;;
      hlscache_b) theirs=$m ;;
      *) best=$(python3 -c "print(max($best, $m))") ;;
    esac
  done
  row+=" | $(python3 -c "print(f'{$mine / $best:.2f}' if $best else 'n/a')")"
  [ -n "${HLSCACHE_BIN_B:-}" ] && row+=" | $(python3 -c "print(f'{$theirs / $best:.2f}' if $best else 'n/a')")"
  echo "$row |"
  unset rps cpu
done
echo
# shellcheck disable=SC2046
echo "peak RSS: nginx (all workers, both roles) $(peak_rss_mib $(pids_of static)) MiB, Varnish $(peak_rss_mib $(pids_of varnish)) MiB, hlscache $(peak_rss_mib "$hls_pid") MiB${HLSCACHE_BIN_B:+, hlscache B $(peak_rss_mib "${hls_b_pid:-}") MiB}"
echo "load at the end: $(cut -d" " -f1-3 /proc/loadavg) (other work on the machine moves these figures: compare runs at similar load)"
