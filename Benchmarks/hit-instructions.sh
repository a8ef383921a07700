#!/usr/bin/env bash
# User-space instructions per 2 MiB cache hit, counted by callgrind: nginx static against hlscache (and a second
# hlscache, B). A count of instructions does not move with the machine's load the way CPU time does (on the shared
# 2-core machines one run's CPU per hit moves by ±5 µs), so a change of a few per cent in what a hit costs hlscache
# shows here when `hit-cpu-split.sh` cannot tell it from noise. It counts instructions, not cycles: a cache miss or an
# atomic fought over by two loops costs more than its count says.
#
# Each server runs under `valgrind --tool=callgrind` with counting off; it is warmed (hlscache: every segment fetched
# three times through it, a sample checked to be a hit), a short wrk run settles it, then counting is switched on for
# one wrk run (`callgrind_control -i on/off`) and the count is divided by the requests wrk made in that run. Servers
# as in the other hit benchmarks: nginx static (`sendfile on`, one worker: callgrind runs one thread at a time anyway),
# hlscache on its defaults in front of an nginx origin, `--prefetch-segments 0`.
#
#   Benchmarks/hit-instructions.sh [seconds]                      (default 10)
#   CONNECTIONS=8 COUNT=40 SEGMENT=2097152                         (wrk connections; segments walked in turn; bytes)
#   HLSCACHE_BIN=/path/to/hlscache                                 (an existing build instead of a release build)
#   HLSCACHE_BIN_B=... HLSCACHE_B_ENV="HLSCACHE_CACHE_MEMORY_SIZE=0"   (a second hlscache)
#   PROFILES=/some/dir                                             (keep each server's callgrind output and the
#                                                                   stripped binary there, for callgrind_annotate)
# Prints instructions per request for each server. Loopback only; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
conns=${CONNECTIONS:-8}
count=${COUNT:-40}
segment=${SEGMENT:-2097152}
./scripts/install-deps.sh valgrind binutils nginx-light wrk curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary
. Benchmarks/lib/peers.sh

work=$(mktemp -d /tmp/hlscache-instructions.XXXXXX)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/origin.pid" ] && kill "$(cat "$work/origin.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"  # the origin's workers run as nobody
mkdir -p "$work/www/lib"
write_segments "$work/www/lib" "$count" "$segment"

# nginx's configuration: the origin (daemon, its own workers) or the measured static server (one process).
nginx_conf() { # port file measured
  {
    if [ "$3" = measured ]; then echo "daemon off; master_process off; worker_processes 1;"; else echo "worker_processes 2;"; fi
    cat <<CONF
pid $work/nginx-$1.pid;
error_log $work/nginx-$1.log warn;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; tcp_nodelay on; keepalive_requests 1000000;
  types { video/mp2t ts; }
  server { listen 127.0.0.1:$1; root $work/www; }
}
CONF
  } >"$2"
}
origin_port=$(free_port)
nginx_conf "$origin_port" "$work/origin.conf" origin
nginx -c "$work/origin.conf" -p "$work" -e "$work/origin-error.log"
cp "$work/nginx-$origin_port.pid" "$work/origin.pid"
wait_healthy "http://127.0.0.1:$origin_port/lib/seg00000.ts"

# callgrind reads no DWARF 5: the binaries are measured from copies without their debug sections (symbols stay).
objcopy --strip-debug "$bin" "$work/hlscache-a"
[ -n "${HLSCACHE_BIN_B:-}" ] && objcopy --strip-debug "$HLSCACHE_BIN_B" "$work/hlscache-b"

threads=$((conns < 2 ? 1 : 2))
# Runs one server under callgrind and prints "requests instructions".
measure() { # server
  local server=$1 port pid host path="" out
  port=$(free_port)
  out=$work/callgrind-$server.out
  case $server in
    static)
      nginx_conf "$port" "$work/static.conf" measured
      valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" nginx -c "$work/static.conf" -p "$work" \
        -e "$work/static-error.log" >"$work/$server.log" 2>&1 &
      pid=$!
      host=http://127.0.0.1:$port
      wait_healthy "$host/lib/seg00000.ts" >/dev/null
      ;;
    hlscache | hlscache_b)
      local binary=$work/hlscache-a extra=""
      if [ "$server" = hlscache_b ]; then binary=$work/hlscache-b; extra=${HLSCACHE_B_ENV:-}; fi
      mkdir -p "$work/cache-$server"
      # shellcheck disable=SC2086
      env $extra valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$binary" serve \
        --listen "127.0.0.1:$port" --cache-dir "$work/cache-$server" --log-level error --prefetch-segments 0 \
        >"$work/$server.log" 2>&1 &
      pid=$!
      host=http://127.0.0.1:$port
      for _ in $(seq 1 600); do curl -fsS "$host/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
      path=/http/127.0.0.1:$origin_port
      for _ in 1 2 3; do
        for i in $(seq 0 $((count - 1))); do printf 'url = "%s%s/lib/seg%05d.ts"\noutput = /dev/null\n' "$host" "$path" "$i"; done |
          curl -fsS -K -
      done
      curl -fsS -D - -o /dev/null "$host$path/lib/seg00007.ts" | tr -d '\r' | grep -qi '^x-cache: hit' ||
        { echo "FAIL: $server does not answer a warmed segment as a hit" >&2; exit 1; }
      ;;
  esac
  wrk -t"$threads" -c"$conns" -d3s --timeout 30s -s Benchmarks/lib/wrk/loop.lua "$host" -- "$path" "$count" >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  wrk -t"$threads" -c"$conns" -d"$duration"s --timeout 30s -s Benchmarks/lib/wrk/loop.lua "$host" -- "$path" "$count" >"$work/wrk.out" 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  # The count is written: stop it (nginx under valgrind has been seen to sit on a SIGTERM).
  kill "$pid"
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -n "${PROFILES:-}" ]; then
    mkdir -p "$PROFILES"
    cat "$out"* >"$PROFILES/callgrind-$server.out"
    case $server in hlscache) cp "$work/hlscache-a" "$PROFILES/" ;; hlscache_b) cp "$work/hlscache-b" "$PROFILES/" ;; esac
  fi
  if grep -qE 'Non-2xx|Socket errors' "$work/wrk.out"; then echo "FAIL: $server: $(grep -E 'Non-2xx|Socket errors' "$work/wrk.out")" >&2; exit 1; fi
  echo "$(awk '/requests in/ {print $1}' "$work/wrk.out") $(cat "$out"* | awk '/^(summary|totals):/ {s += $2} END {printf "%d", s}')"
}

servers="static hlscache"
[ -n "${HLSCACHE_BIN_B:-}" ] && servers="static hlscache hlscache_b"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $count segments of $((segment >> 10)) KiB, wrk -t$threads -c$conns, ${duration}s counted"
[ -n "${HLSCACHE_BIN_B:-}" ] && echo "hlscache B: ${HLSCACHE_B_ENV:-} $HLSCACHE_BIN_B"
echo
echo "| server | requests counted | instructions | per request |"
echo "|---|---:|---:|---:|"
for server in $servers; do
  read -r requests instructions <<<"$(measure "$server")"
  [ "${requests:-0}" -gt 0 ] && [ "${instructions:-0}" -gt 0 ] || { echo "FAIL: $server: nothing counted" >&2; exit 1; }
  echo "| $server | $requests | $instructions | $((instructions / requests)) |"
done
