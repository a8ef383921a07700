#!/usr/bin/env bash
# Cache hits the way people watch, hlscache against nginx static, nginx proxy_cache and Varnish (-s malloc,1G) in the
# same run (issue "cache hits under real viewing patterns"). hits-vs-peers.sh is workload (a), one hot object; this is:
#   (b) loop125 / loop10x  N distinct segments requested in turn, N x size = 1.25x and 10x hlscache's memory tier
#       loop080            (not in the default cells) the same at 0.8x the tier: the loop fits in it, so hlscache's
#                          memory path is measured per hit against Varnish's, apart from the part a tier cannot hold
#   (c) zipf               the 10x library asked for with a Zipf distribution (alpha 0.8)
#   (d) mixed              a 1.8 KB VOD playlist at 32 connections measured while 8 connections walk the 1.25x set
#   (e) live               players at a live edge (a playlist rewritten every 2 s, 512 KiB segments): each connection
#                          alternates between the live playlist and the newest segment it lists (misses, then hits)
# Every server is warmed first (every object of (b)/(c) fetched, a sample checked to be a hit); each cell runs ROUNDS
# rounds of wrk per server, servers interleaved (each round starting with the next); while hlscache is measured a
# sample of its answers is checked to be hits by their X-Cache header. A run with a non-2xx answer or a socket error
# in any wrk run, or a miss in a sample, FAILs. Prints a Markdown table of median requests/s (CPU µs per request),
# hlscache / best peer (of the medians, and paired by round: median and range of each round's ratio), peak RSS, and the tier bound.
#
#   Benchmarks/viewing-vs-peers.sh [seconds-per-run] [rounds]             (defaults 4 and 3)
#   CELLS="loop125:1 zipf:64" Benchmarks/viewing-vs-peers.sh              (only some cells)
#   SEGMENT=2097152                                                        (bytes per segment of (b)/(c))
#   HLSCACHE_BIN=/path/to/hlscache                                         (an existing build instead of a release build)
#   HLSCACHE_BIN_B=... HLSCACHE_B_ENV="HLSCACHE_CACHE_MEMORY_SIZE=0"       (a second hlscache in the same rounds)
# Ends with PASS or FAIL (exit 0 or 1). Loopback only; every run is bounded; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-4}
rounds=${2:-3}
cells=${CELLS:-loop125:1 loop125:8 loop125:64 loop10x:1 loop10x:8 loop10x:64 zipf:1 zipf:8 zipf:64 mixed:32 live:64}
segment=${SEGMENT:-2097152}
./scripts/install-deps.sh nginx-light varnish wrk curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

work=$(mktemp -d /tmp/hlscache-viewing.XXXXXX)
live_pid=""
cleanup() {
  [ -n "$live_pid" ] && kill "$live_pid" 2>/dev/null || true
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  peers_stop
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www/lib" "$work/www/vod" "$work/www/live"
. Benchmarks/lib/peers.sh
. Benchmarks/lib/wrk-rounds.sh
lua=Benchmarks/lib/wrk
# Problems are written to a file: cells run in subshells.
fail() {
  echo "FAIL: $*" >&2
  echo "$*" >>"$work/failures"
}

# The tier's bound, as hlscache resolves its default on this machine (the sizes of (b) and (c) follow from it).
peers_start
tier=$(curl -fsS "http://127.0.0.1:$hls_port/metrics" | awk '$1=="hlscache_memory_tier_capacity_bytes"{printf "%d", $2}')
[ -n "$tier" ] && [ "$tier" -gt 0 ] || { echo "FAIL: hlscache reports no memory tier capacity" >&2; exit 1; }
n125=$(((tier * 5 / 4 + segment - 1) / segment))
n080=$((tier * 4 / 5 / segment))
n10=$(((tier * 10 + segment - 1) / segment))
# The 10x library is written and warmed only when a cell asks for it (loop10x, zipf): the others use the 1.25x set.
library=$n125
if [[ " $cells" == *" loop10x:"* || " $cells" == *" zipf:"* ]]; then library=$n10; fi
echo "hlscache memory tier: $((tier >> 20)) MiB (its default here); segments of $((segment >> 10)) KiB: 0.8x = $n080, 1.25x = $n125, 10x = $n10"
python3 - "$work/www" "$library" "$segment" <<'PY'
import os, sys
root, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for index in range(count):
    with open(f"{root}/lib/seg{index:05d}.ts", "wb") as f:
        f.write(os.urandom(size))
with open(f"{root}/vod/index.m3u8", "w") as f:
    f.write("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n")
    for index in range(40):
        f.write(f"#EXTINF:6.0,\n../lib/seg{index:05d}.ts\n")
    f.write("#EXT-X-ENDLIST\n")
for index in range(400):
    with open(f"{root}/live/s{index:05d}.ts", "wb") as f:
        f.write(os.urandom(512 * 1024))
PY

# The live origin: a 6-segment window moving by one segment every 2 s (written whole, then renamed).
python3 - "$work/www/live" <<'PY' &
import os, sys, time
root = sys.argv[1]
start = time.time()
while True:
    sequence = int((time.time() - start) / 2)
    text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:%d\n" % sequence
    for index in range(sequence, sequence + 6):
        text += "#EXTINF:2.0,\ns%05d.ts\n" % (index % 400)
    with open(root + "/.index.tmp", "w") as f:
        f.write(text)
    os.rename(root + "/.index.tmp", root + "/index.m3u8")
    time.sleep(0.2)
PY
live_pid=$!

# Warm every cache with every object of the library (8 at a time), then check a sample is a hit.
warm() { # server count
  python3 - "$(prefix_of "$1")" "$2" <<'PY'
import sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
prefix, count = sys.argv[1], int(sys.argv[2])
def get(index):
    with urllib.request.urlopen(f"{prefix}/lib/seg{index:05d}.ts") as response:
        response.read()
with ThreadPoolExecutor(8) as pool:
    list(pool.map(get, range(count)))
with urllib.request.urlopen(f"{prefix}/vod/index.m3u8") as response:
    response.read()
PY
}
# Asks for `count` random objects of the first `of` segments: prints how many were hits (X-Cache: HIT).
sample_hits() { # server of count
  local hits=0 path i
  for i in $(seq 1 "$3"); do
    path=$(printf '/lib/seg%05d.ts' $((RANDOM % $2)))
    curl -fsS -D - -o /dev/null "$(prefix_of "$1")$path" 2>/dev/null | tr -d '\r' | grep -qi '^x-cache: hit' && hits=$((hits + 1))
  done
  echo "$hits"
}
for server in $servers; do
  is_cache "$server" || continue
  warm "$server" "$library"
  warm "$server" "$n125"  # the 1.25x set asked for twice: what a tier admits on a second request
  # The 0.8x set asked for twice more: the most asked for, what a tier holding 0.8x keeps.
  if [[ " $cells" == *" loop080:"* ]]; then warm "$server" "$n080"; warm "$server" "$n080"; fi
  [ "$(sample_hits "$server" "$n125" 5)" -ge 4 ] || echo "note: $server misses after warm-up (it cannot hold the library)" >&2
done
for server in hlscache hlscache_b; do
  [[ " $servers " == *" $server "* ]] || continue
  [ "$(sample_hits "$server" "$library" 10)" = 10 ] || fail "$server: a sample of the warmed library was not all hits"
done
# The warm-up was misses (bounded by limits.inFlightMemory, not by the tier): the peaks reported are the cells'.
warm_peak=$(peak_rss_mib "$hls_pid")
# shellcheck disable=SC2046
for pid in $(pids_of static) $(pids_of varnish) "$hls_pid" ${hls_b_pid:-}; do echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || true; done

# wrk's lines that say a run is not a measurement: any non-2xx answer or socket error.
check_wrk() { # label output-file
  if grep -q "Non-2xx or 3xx responses" "$2"; then fail "$1: $(grep 'Non-2xx' "$2")"; fi
  if grep -q "Socket errors" "$2"; then fail "$1: $(grep 'Socket errors' "$2")"; fi
}

is_hlscache() { [ "$1" = hlscache ] || [ "$1" = hlscache_b ]; }

# hlscache_memory_tier_reads_total of the hlscache at host (empty for a build without it).
tier_reads() { # host
  curl -fsS "$1/metrics" 2>/dev/null | awk '/^hlscache_memory_tier_reads_total / {print $2}'
}

# One run of a cell on a server: prints "req/s cpu-µs-per-request" (for mixed: the playlist's, then the segments').
run_cell() { # server workload connections
  local server=$1 workload=$2 conns=$3 prefix host path
  host="http://127.0.0.1:$(prefix_of "$server" | cut -d/ -f3 | cut -d: -f2)"
  prefix=$(prefix_of "$server" | cut -d/ -f4-)
  [ -n "$prefix" ] && prefix="/$prefix"
  local threads=$((conns < 2 ? 1 : 2)) before after sampler="" reads_before=""
  # hlscache's reads into its memory tier during the run (objects read in only to be evicted show here).
  if is_hlscache "$server"; then reads_before=$(tier_reads "$host"); fi
  # shellcheck disable=SC2046
  before=$(ticks $(pids_of "$server"))
  if is_hlscache "$server"; then
    case $workload in
      loop125) (sleep "$((duration / 2))"; sample_hits "$server" "$n125" 5 >"$work/sample") & sampler=$! ;;
      loop080) (sleep "$((duration / 2))"; sample_hits "$server" "$n080" 5 >"$work/sample") & sampler=$! ;;
      loop10x | zipf) (sleep "$((duration / 2))"; sample_hits "$server" "$n10" 5 >"$work/sample") & sampler=$! ;;
    esac
  fi
  case $workload in
    loop125) wrk -t"$threads" -c"$conns" -d"${duration}s" --timeout 10s -s "$lua/loop.lua" "$host" -- "$prefix" "$n125" >"$work/wrk.out" 2>&1 ;;
    loop080) wrk -t"$threads" -c"$conns" -d"${duration}s" --timeout 10s -s "$lua/loop.lua" "$host" -- "$prefix" "$n080" >"$work/wrk.out" 2>&1 ;;
    loop10x) wrk -t"$threads" -c"$conns" -d"${duration}s" --timeout 10s -s "$lua/loop.lua" "$host" -- "$prefix" "$n10" >"$work/wrk.out" 2>&1 ;;
    zipf) wrk -t"$threads" -c"$conns" -d"${duration}s" --timeout 10s -s "$lua/zipf.lua" "$host" -- "$prefix" "$n10" 0.8 >"$work/wrk.out" 2>&1 ;;
    live) wrk -t"$threads" -c"$conns" -d"${duration}s" --timeout 10s -s "$lua/live.lua" "$host" -- "$prefix" >"$work/wrk.out" 2>&1 ;;
    mixed)
      wrk -t1 -c8 -d"$((duration + 2))s" --timeout 10s -s "$lua/loop.lua" "$host" -- "$prefix" "$n125" >"$work/wrk-segments.out" 2>&1 &
      local segments=$!
      sleep 1
      wrk -t2 -c"$conns" -d"${duration}s" --timeout 10s "$host$prefix/vod/index.m3u8" >"$work/wrk.out" 2>&1
      wait "$segments"
      check_wrk "$server $workload segments" "$work/wrk-segments.out"
      ;;
  esac
  # shellcheck disable=SC2046
  after=$(ticks $(pids_of "$server"))
  if [ -n "$reads_before" ]; then
    local reads_after
    reads_after=$(tier_reads "$host")
    [ -n "$reads_after" ] && echo $((${reads_after%.*} - ${reads_before%.*})) >>"$work/reads.$server"
  fi
  check_wrk "$server $workload:$conns" "$work/wrk.out"
  if [ -n "$sampler" ]; then
    wait "$sampler" || true
    [ "$(cat "$work/sample")" = 5 ] || fail "$server $workload:$conns: only $(cat "$work/sample") of 5 sampled answers were hits"
  fi
  local result
  result=$(awk -v cpu=$(((after - before) * tick_us)) '/requests in/ {n=$1} /Requests\/sec/ {rps=$2} END {printf "%s %.1f", rps, (n ? cpu / n : 0)}' "$work/wrk.out")
  if [ "$workload" = mixed ]; then
    result="$result $(awk '/Requests\/sec/ {print $2}' "$work/wrk-segments.out")"
  fi
  echo "$result"
}

# The ratio paired by round: in each round, hlscache's req/s over the best peer's of the same round (the servers of a
# round run one after another, so a slower stretch of the machine weighs less on it than on the ratio of medians);
# prints "median (lowest–highest)" over the rounds.
per_round() { # "hlscache's req/s by round" "each peer's req/s by round, peers separated by |"
  python3 - "$1" "$2" <<'PY'
import statistics, sys
mine = [float(x) for x in sys.argv[1].split()]
peers = [[float(x) for x in p.split()] for p in sys.argv[2].split("|") if p.strip()]
ratios = [m / max(p[i] for p in peers) for i, m in enumerate(mine) if max(p[i] for p in peers) > 0]
print(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})" if ratios else "n/a")
PY
}

echo
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(nginx -v 2>&1); $(varnishd -V 2>&1 | head -1); Varnish -s malloc,${VARNISH_MEMORY:-1G}"
echo "each cell: $rounds rounds of wrk ${duration}s per server, servers interleaved, each round starting with the next; median req/s (CPU µs per request)"
[ -n "${HLSCACHE_BIN_B:-}" ] && echo "hlscache B: ${HLSCACHE_B_ENV:-} $HLSCACHE_BIN_B"
echo
header="| workload | connections |"
rule="|---|---:|"
for server in $servers; do header+=" $server |"; rule+="---:|"; done
header+=" hlscache / best | per round |"
rule+="---:|---:|"
[ -n "${HLSCACHE_BIN_B:-}" ] && header+=" B / best | B per round |" && rule+="---:|---:|"
echo "$header"
echo "$rule"
reads_line=""
for cell in $cells; do
  workload=${cell%%:*}
  conns=${cell##*:}
  declare -A rps=() cpu=() extra=()
  for server in $servers; do rps[$server]=""; cpu[$server]=""; extra[$server]=""; done
  for round in $(seq 0 $((rounds - 1))); do
    for server in $(rotated "$servers" "$round"); do
      read -r r u s <<<"$(run_cell "$server" "$workload" "$conns")"
      rps[$server]+="$r "
      cpu[$server]+="$u "
      extra[$server]+="${s:-0} "
    done
  done
  row="| $workload | $conns"
  best=0
  mine=0
  theirs=0
  for server in $servers; do
    # shellcheck disable=SC2086
    m=$(median ${rps[$server]})
    # shellcheck disable=SC2086
    c=$(median ${cpu[$server]})
    if [ "$workload" = mixed ]; then
      # shellcheck disable=SC2086
      row+=" | ${m%.*} ($c; segments $(median ${extra[$server]} | cut -d. -f1))"
    else
      row+=" | ${m%.*} ($c)"
    fi
    case $server in
      hlscache) mine=$m ;;
      hlscache_b) theirs=$m ;;
      *) best=$(python3 -c "print(max($best, $m))") ;;
    esac
  done
  peers=""
  for server in $servers; do is_hlscache "$server" || peers+="${rps[$server]}|"; done
  row+=" | $(python3 -c "print(f'{$mine / $best:.2f}' if $best else 'n/a')") | $(per_round "${rps[hlscache]}" "$peers")"
  [ -n "${HLSCACHE_BIN_B:-}" ] && row+=" | $(python3 -c "print(f'{$theirs / $best:.2f}' if $best else 'n/a')") | $(per_round "${rps[hlscache_b]}" "$peers")"
  echo "$row |"
  for server in hlscache hlscache_b; do
    [ -s "$work/reads.$server" ] && reads_line+=" $server $cell $(awk '{s += $1} END {print s}' "$work/reads.$server");"
    rm -f "$work/reads.$server"
  done
  unset rps cpu extra
done
echo
[ -n "$reads_line" ] && echo "objects read into the memory tier during each cell's rounds:$reads_line"
# The ways cold large copies were sent over the whole run (cache.memoryColdSends), for a build that counts them.
for server in hlscache hlscache_b; do
  [ "$server" = hlscache_b ] && [ -z "${HLSCACHE_BIN_B:-}" ] && continue
  host="http://127.0.0.1:$(prefix_of "$server" | cut -d/ -f3 | cut -d: -f2)"
  ways=$(curl -fsS "$host/metrics" 2>/dev/null | awk -F'[{}"= ]+' '/^hlscache_memory_cold_sends_total\{/ { v[$3] = $4 }
      END { if (length(v)) printf "memory %d, file %d", v["memory"], v["file"] }')
  [ -n "$ways" ] && echo "cold large sends of $server, by way: $ways"
done
# shellcheck disable=SC2046
peak=$(peak_rss_mib "$hls_pid")
echo "peak RSS during the cells: nginx (all workers, all roles) $(peak_rss_mib $(pids_of static)) MiB, Varnish $(peak_rss_mib $(pids_of varnish)) MiB, hlscache $peak MiB (tier bound $((tier >> 20)) MiB + 64)${HLSCACHE_BIN_B:+, hlscache B $(peak_rss_mib "${hls_b_pid:-}") MiB}; hlscache during the warm-up (misses) $warm_peak MiB"
[ "$peak" -le $(((tier >> 20) + 64)) ] || fail "hlscache's peak RSS $peak MiB is over its tier bound + 64 MiB"
echo "load at the end: $(cut -d" " -f1-3 /proc/loadavg) (other work on the machine moves these figures: compare runs at similar load)"
if [ -s "$work/failures" ]; then
  echo "FAIL: $(wc -l <"$work/failures") problem(s) above"
  exit 1
fi
echo "PASS"
