# Sourced by the hit benchmarks (hits-vs-peers.sh, memory-large-sends.sh): one wrk run with the CPU the measured
# processes spent in it, and the median of a cell's rounds. Expects $duration (seconds per run) and $work (a scratch
# directory).

# CPU ticks (user + system) of the processes given, summed; a process gone counts 0.
ticks() { local t=0 pid; for pid in "$@"; do [ -r "/proc/$pid/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$t"; }
tick_us=$((1000000 / $(getconf CLK_TCK)))

run_wrk() { # url connections pids... -> "requests/s cpu-µs-per-request"
  local url=$1 conns=$2
  shift 2
  local threads=$((conns < 2 ? 1 : 2)) before after
  before=$(ticks "$@")
  wrk -t"$threads" -c"$conns" -d"${duration}s" "$url" >"$work/wrk.out" 2>&1
  after=$(ticks "$@")
  awk -v cpu=$(((after - before) * tick_us)) '/requests in/ {n=$1} /Requests\/sec/ {rps=$2} END {printf "%s %.1f", rps, (n ? cpu / n : 0)}' "$work/wrk.out"
}

median() { python3 -c 'import sys, statistics; print(round(statistics.median(float(x) for x in sys.argv[1:]), 1))' "$@"; }
