#!/usr/bin/env bash
# Where the CPU of a 2 MiB cache hit goes on the whole machine: the server's, the client's (wrk) and the machine's
# (/proc/stat: every process, softirq included) per request, with the loopback packets and the server's TCP data
# segments per request, for nginx static and hlscache (and a second hlscache, B) alternated in the same run.
# Servers as in the viewing cells (Benchmarks/lib/peers.sh): nginx static on the files, hlscache on its defaults in
# front of an nginx origin, the set of segments warmed through hlscache first (two passes) and checked to be hits.
#
#   Benchmarks/hit-cpu-split.sh [seconds-per-run] [rounds]       (defaults 8 and 3)
#   CONNECTIONS=8 COUNT=236 SEGMENT=2097152                      (wrk connections; segments walked in turn; bytes each)
#   HLSCACHE_BIN=/path/to/hlscache                               (an existing build instead of a release build)
#   HLSCACHE_BIN_B=... HLSCACHE_B_ENV="HLSCACHE_CACHE_MEMORY_SIZE=0"   (a second hlscache in the same rounds)
# Prints one line per run and the medians per server. Loopback only; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-8}
rounds=${2:-3}
conns=${CONNECTIONS:-8}
count=${COUNT:-236}
segment=${SEGMENT:-2097152}
./scripts/install-deps.sh nginx-light varnish wrk curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

work=$(mktemp -d /tmp/hlscache-cpu-split.XXXXXX)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  peers_stop
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www/lib"
. Benchmarks/lib/peers.sh
write_segments "$work/www/lib" "$count" "$segment"
peers_start
servers="static hlscache"
[ -n "${HLSCACHE_BIN_B:-}" ] && servers="static hlscache hlscache_b"
for server in hlscache hlscache_b; do
  [[ " $servers " == *" $server "* ]] || continue
  for _ in 1 2; do
    for i in $(seq 0 $((count - 1))); do printf 'url = "%s/lib/seg%05d.ts"\noutput = /dev/null\n' "$(prefix_of "$server")" "$i"; done |
      curl -fsS -K -
  done
  curl -fsS -D - -o /dev/null "$(prefix_of "$server")/lib/seg00007.ts" | tr -d '\r' | grep -qi '^x-cache: hit' ||
    { echo "FAIL: $server does not answer a warmed segment as a hit" >&2; exit 1; }
done

# user+nice, system, irq+softirq, idle (ticks) of the machine, then loopback packets sent.
machine() { awk '/^cpu /{printf "%s %s %s %s ", $2 + $3, $4, $7 + $8, $5}' /proc/stat; cat /sys/class/net/lo/statistics/tx_packets; }
# user and system ticks of the processes given.
ticks2() { local u=0 s=0 pid a b; for pid in "$@"; do read -r a b < <(awk '{print $14, $15}' "/proc/$pid/stat"); u=$((u + a)); s=$((s + b)); done; echo "$u $s"; }
# The bytes and TCP data segments the server sent so far on its established connections (to wrk).
segments() { # port
  ss -tin state established "( sport = :$1 )" | grep -o 'bytes_sent:[0-9]*\|data_segs_out:[0-9]*' |
    awk -F: '{t[$1] += $2} END {printf "%d %d", t["bytes_sent"], t["data_segs_out"]}'
}

threads=$((conns < 2 ? 1 : 2))
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $count segments of $((segment >> 10)) KiB, wrk -t$threads -c$conns, ${duration}s per run"
echo "per request: server user/sys µs, machine user/sys/irq µs, wrk µs, loopback packets, server data segments"
for round in $(seq 0 $((rounds - 1))); do
  for server in $(rotated "$servers" "$round"); do
    url=$(prefix_of "$server")
    host=${url%%/http/*}
    path=${url#"$host"}
    port=${host##*:}
    # shellcheck disable=SC2046
    set -- $(pids_of "$server")
    wrk -t"$threads" -c"$conns" -d"$duration"s --timeout 10s -s Benchmarks/lib/wrk/loop.lua "$host" -- "$path" "$count" >"$work/wrk.out" 2>&1 &
    wrk_pid=$!
    sleep 1
    s0=$(ticks2 "$@"); m0=$(machine); w0=$(ticks2 "$wrk_pid"); g0=$(segments "$port")
    sleep $((duration - 2))
    s1=$(ticks2 "$@"); m1=$(machine); w1=$(ticks2 "$wrk_pid"); g1=$(segments "$port")
    wait "$wrk_pid"
    if grep -qE 'Non-2xx|Socket errors' "$work/wrk.out"; then echo "FAIL: $server: $(grep -E 'Non-2xx|Socket errors' "$work/wrk.out")" >&2; exit 1; fi
    rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.out")
    python3 - "$server" "$rps" "$((duration - 2))" "$(getconf CLK_TCK)" "$s0" "$s1" "$m0" "$m1" "$w0" "$w1" "$g0" "$g1" <<'PY' | tee -a "$work/lines"
import sys
server, rps, seconds, hz = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s0, s1, m0, m1, w0, w1, g0, g1 = ([int(x) for x in a.split()] for a in sys.argv[5:13])
requests = rps * seconds  # the window measured: wrk's steady rate over it
us = lambda ticks: ticks * 1e6 / hz / requests
d = lambda a, b, i: b[i] - a[i]
segs = d(g0, g1, 1)
print(f"{server} {rps:.0f} {us(d(s0, s1, 0)):.1f} {us(d(s0, s1, 1)):.1f} {us(d(m0, m1, 0)):.1f} {us(d(m0, m1, 1)):.1f} "
      f"{us(d(m0, m1, 2)):.1f} {us(d(w0, w1, 0) + d(w0, w1, 1)):.1f} {d(m0, m1, 4) / requests:.1f} "
      f"{segs / requests:.1f}")
PY
  done
done
echo
echo "| server | req/s | server user / sys µs | machine user / sys / irq µs | wrk µs | loopback packets | server data segments |"
echo "|---|---:|---:|---:|---:|---:|---:|"
python3 - "$work/lines" $servers <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for server in sys.argv[2:]:
    mine = [[float(x) for x in r[1:]] for r in rows if r[0] == server]
    m = [statistics.median(column) for column in zip(*mine)]
    print(f"| {server} | {m[0]:.0f} | {m[1]:.1f} / {m[2]:.1f} | {m[3]:.1f} / {m[4]:.1f} / {m[5]:.1f} | {m[6]:.1f} | {m[7]:.1f} | {m[8]:.1f} |")
PY
echo "medians of $rounds rounds; load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
