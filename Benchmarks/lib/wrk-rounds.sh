# Sourced by the hit benchmarks (hits-vs-peers.sh, memory-large-sends.sh): one wrk run with the CPU the measured
# processes spent in it, and the median of a cell's rounds. Expects $duration (seconds per run) and $work (a scratch
# directory). A run with any non-2xx answer or socket error ends the benchmark with FAIL (exit 1): errors answered
# fast are not throughput.

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
  wrk_check "$work/wrk.out" "$url" || fail_from_wrk
  awk -v cpu=$(((after - before) * tick_us)) '/requests in/ {n=$1} /Requests\/sec/ {rps=$2} END {printf "%s %.1f", rps, (n ? cpu / n : 0)}' "$work/wrk.out"
}

# Whether a wrk report (file) shows only 2xx answers and no socket error; says what went wrong if not. wrk prints
# "Non-2xx or 3xx responses: N" and "Socket errors: connect A, read B, write C, timeout D" only when N / the sum > 0.
wrk_check() { # wrk-output-file url
  local problems
  problems=$(grep -E 'Non-2xx or 3xx responses|Socket errors' "$1" || true)
  if ! grep -q 'requests in' "$1"; then problems="no report from wrk: $(tail -3 "$1")"; fi
  [ -z "$problems" ] && return 0
  echo "wrk against $2: $problems" | tr '\n' ' ' >&2
  echo >&2
  return 1
}

# run_wrk's output is read through a command substitution (a subshell): it makes the benchmark itself stop, through
# this signal, whose handler runs in the benchmark's shell (its EXIT trap then stops what it started).
trap 'echo "FAIL: wrk saw non-2xx answers or socket errors (above); no figures from this run" >&2; exit 1' USR1
fail_from_wrk() { kill -USR1 $$; exit 1; }

median() { python3 -c 'import sys, statistics; print(round(statistics.median(float(x) for x in sys.argv[1:]), 1))' "$@"; }
