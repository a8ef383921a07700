#!/usr/bin/env bash
# How noisy is the machine's CPU per byte over short windows? The figure a choice between two ways of sending (memory
# or sendfile, docs/architecture.md "The memory tier") would compare if it alternated the ways window by window and
# costed each window as machine-wide busy CPU (/proc/stat: everything but idle and iowait, the receiver's share
# included) per byte sent on loopback (/proc/net/dev). hlscache serves COUNT different 2 MiB segments (held by its
# tier as far as it holds them) to wrk walking them in turn at CONNECTIONS connections, one way throughout; the script
# prints the spread of the per-window cost and of the difference between adjacent windows: the noise a paired
# comparison of N pairs divides by sqrt(N).
#
#   Benchmarks/cost-windows.sh [window-seconds] [windows]      (defaults 0.25 and 120)
#   CONNECTIONS=8 COUNT=236 HLSCACHE_BIN=/path/to/hlscache     (defaults; extra settings as HLSCACHE_* variables)
# Loopback only; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
window=${1:-0.25}
windows=${2:-120}
connections=${CONNECTIONS:-8}
count=${COUNT:-236}
./scripts/install-deps.sh wrk curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary
. Benchmarks/lib/peers.sh

work=$(mktemp -d /tmp/hlscache-windows.XXXXXX)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www/lib"
write_segments "$work/www/lib" "$count" $((2 << 20))
origin_port=$(free_port)
port=$(free_port)
(cd "$work/www" && exec python3 -m http.server "$origin_port" --bind 127.0.0.1 >/dev/null 2>&1) &
"$bin" serve --cache-dir "$work/cache" --listen "127.0.0.1:$port" >"$work/hlscache.log" 2>&1 &
wait_healthy "http://127.0.0.1:$port/metrics"
prefix="/http/127.0.0.1:$origin_port"
# Misses, then hits: the tier reads in what it admits.
for _ in 1 2 3; do
  for ((index = 0; index < count; index++)); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port$prefix/lib/$(printf 'seg%05d.ts' "$index")"
  done
done
seconds=$(python3 -c "import math; print(math.ceil($window * $windows) + 3)")
wrk -t2 -c"$connections" -d"${seconds}s" --timeout 10s -s Benchmarks/lib/wrk/loop.lua "http://127.0.0.1:$port" -- "$prefix" "$count" >"$work/wrk.out" 2>&1 &
wrk_pid=$!
sleep 1
python3 - "$window" "$windows" <<'PY'
import statistics, sys, time
def busy():
    fields = list(map(int, open("/proc/stat").readline().split()[1:9]))
    return sum(fields) - fields[3] - fields[4]
def loopback():
    for line in open("/proc/net/dev"):
        if line.strip().startswith("lo:"):
            return int(line.split(":")[1].split()[8])
window, count = float(sys.argv[1]), int(sys.argv[2])
costs, ticks, mib = [], [], []
b0, l0 = busy(), loopback()
for _ in range(count):
    time.sleep(window)
    b1, l1 = busy(), loopback()
    sent = (l1 - l0) / (1 << 20)
    ticks.append(b1 - b0)
    mib.append(sent)
    if sent >= 8:
        costs.append((b1 - b0) / sent)
    b0, l0 = b1, l1
if len(costs) < 4:
    sys.exit(f"only {len(costs)} windows carried 8 MiB or more")
mean = statistics.mean(costs)
pairs = [(costs[i + 1] - costs[i]) / costs[i] for i in range(0, len(costs) - 1, 2)]
print(f"{len(costs)} windows of {window}s: busy clock ticks per MiB median {statistics.median(costs):.4f}, "
      f"mean {mean:.4f}, sd {statistics.pstdev(costs):.4f} (cv {statistics.pstdev(costs) / mean:.3f})")
print(f"adjacent windows, relative difference: sd {statistics.pstdev(pairs):.3f} over {len(pairs)} pairs")
print(f"per window: median {statistics.median(mib):.0f} MiB on loopback, {statistics.median(ticks)} busy ticks")
PY
wait "$wrk_pid" || { echo "FAIL: wrk failed" >&2; cat "$work/wrk.out" >&2; exit 1; }
grep -E "Requests/sec" "$work/wrk.out"
# Errors make the windows' figures meaningless: the run fails.
if grep -E "Non-2xx|Socket errors" "$work/wrk.out"; then echo "FAIL: wrk saw errors" >&2; exit 1; fi
curl -fsS "http://127.0.0.1:$port/metrics" | grep -E '^hlscache_memory_(tier_objects|cold_sends_total)' || true
echo "load at the end: $(cut -d" " -f1-3 /proc/loadavg)"
