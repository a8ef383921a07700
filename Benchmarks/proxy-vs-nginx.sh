#!/usr/bin/env bash
# Cache-hit throughput: hlscache vs nginx serving the same files, measured with wrk in the same run.
#
#   Benchmarks/proxy-vs-nginx.sh [seconds-per-run] [rounds]      (defaults 10 and 3)
#   HLSCACHE_BIN=/path/a HLSCACHE_BIN_B=/path/b Benchmarks/proxy-vs-nginx.sh 4 5
#       (A/B: a second build measured in the same rounds, alternating with the first and nginx; extra columns)
#   SIZES="256k" CONNECTIONS="1 8" Benchmarks/proxy-vs-nginx.sh   (only some cells; sizes: 2m, 256k)
#
# nginx (Debian's, sendfile on, access log off, one worker per core) serves a directory of segments; the same
# nginx is hlscache's origin, every file is requested once through hlscache to make it a cache hit, then wrk
# measures both at 1, 8, 64 and 256 connections for 2 MiB and 256 KiB segments, several rounds each, the two
# servers alternating (this machine is shared: single runs swing by 20 %). Prints a Markdown table of medians,
# with each server's CPU time per request, and hlscache's peak RSS. Loopback only; every run is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
rounds=${2:-3}
./scripts/install-deps.sh nginx-light wrk >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary
bin_b=${HLSCACHE_BIN_B:-}
sizes=${SIZES:-2m 256k}
connections=${CONNECTIONS:-1 8 64 256}

work=$(mktemp -d /tmp/hlscache-bench.XXXXXX)
cleanup() {
  [ -n "${hls_pid:-}" ] && kill "$hls_pid" 2>/dev/null || true
  [ -n "${hlsb_pid:-}" ] && kill "$hlsb_pid" 2>/dev/null || true
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$work"
}
trap cleanup EXIT

chmod 755 "$work"
mkdir -p "$work/www/vod" "$work/cache" "$work/cache-b" "$work/nginx-tmp"
head -c $((2 * 1024 * 1024)) /dev/urandom > "$work/www/vod/seg_2m.ts"
head -c $((256 * 1024)) /dev/urandom > "$work/www/vod/seg_256k.ts"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
nginx_port=$(free_port)
hls_port=$(free_port)
hlsb_port=$(free_port)

cat > "$work/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 1000000;
  client_body_temp_path $work/nginx-tmp;
  proxy_temp_path $work/nginx-tmp;
  fastcgi_temp_path $work/nginx-tmp;
  uwsgi_temp_path $work/nginx-tmp;
  scgi_temp_path $work/nginx-tmp;
  types { video/mp2t ts; }
  server { listen 127.0.0.1:$nginx_port; root $work/www; }
}
CONF
nginx -c "$work/nginx.conf" -p "$work" -e "$work/nginx-error.log"

start_hlscache() {  # binary port cache-dir -> pid in $started
  "$1" serve --listen "127.0.0.1:$2" --cache-dir "$3" --log-level error > "$3.log" 2>&1 &
  started=$!
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  for f in seg_2m.ts seg_256k.ts; do
    curl -fsS -o /dev/null "http://127.0.0.1:$2/http/127.0.0.1:$nginx_port/vod/$f"
  done
  sleep 1
  for f in seg_2m.ts seg_256k.ts; do
    cache=$(curl -fsS -D - -o /dev/null "http://127.0.0.1:$2/http/127.0.0.1:$nginx_port/vod/$f" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}')
    [ "$cache" = "HIT" ] || { echo "warm-up failed: $f is not a cache hit ($cache) on $1"; exit 1; }
  done
}
start_hlscache "$bin" "$hls_port" "$work/cache"
hls_pid=$started
if [ -n "$bin_b" ]; then
  start_hlscache "$bin_b" "$hlsb_port" "$work/cache-b"
  hlsb_pid=$started
fi

# CPU time (user + system, clock ticks) of a set of processes.
ticks() { local t=0 pid; for pid in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$t"; }
tick_us=$((1000000 / $(getconf CLK_TCK)))
nginx_workers=$(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')

run_wrk() {  # url connections pids... -> "requests/s p99 cpu-µs-per-request"
  local url=$1 conns=$2; shift 2
  local threads=$(( conns < 2 ? 1 : 2 ))
  local before after
  before=$(ticks "$@")
  wrk -t"$threads" -c"$conns" -d"${duration}s" --latency "$url" > "$work/wrk.out" 2>&1
  after=$(ticks "$@")
  awk -v cpu=$(( (after - before) * tick_us )) '
    /requests in/ {n=$1}
    /Requests\/sec/ {rps=$2}
    /^ +99%/ {p99=$2}
    END {printf "%s %s %.1f", rps, p99, (n ? cpu / n : 0)}' "$work/wrk.out"
}

median() { python3 -c 'import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

echo "machine: $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg); $(nginx -v 2>&1); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "each cell: ${rounds} rounds of wrk ${duration}s per server, nginx and hlscache alternating; medians shown"
echo "CPU µs/req: the server's own user + system time per request (the steadiest figure on a shared machine)"
echo
b_header=""; b_rule=""
[ -n "$bin_b" ] && { b_header=" B req/s | B p99 | B CPU µs/req | B/nginx req/s | B/A req/s |"; b_rule="---|---|---|---|---|"; }
echo "| segment | connections | nginx req/s | nginx p99 | nginx CPU µs/req | hlscache req/s | hlscache p99 | hlscache CPU µs/req | hlscache/nginx req/s |$b_header"
echo "|---|---|---|---|---|---|---|---|---|$b_rule"
for size in $sizes; do
  f=seg_$size.ts
  for c in $connections; do
    n_rps=(); n_p99=(); n_cpu=(); h_rps=(); h_p99=(); h_cpu=(); b_rps=(); b_p99=(); b_cpu=()
    for _ in $(seq 1 "$rounds"); do
      # shellcheck disable=SC2086
      read -r r p u <<<"$(run_wrk "http://127.0.0.1:$nginx_port/vod/$f" "$c" $nginx_workers)"
      n_rps+=("$r"); n_p99+=("$p"); n_cpu+=("$u")
      read -r r p u <<<"$(run_wrk "http://127.0.0.1:$hls_port/http/127.0.0.1:$nginx_port/vod/$f" "$c" "$hls_pid")"
      h_rps+=("$r"); h_p99+=("$p"); h_cpu+=("$u")
      if [ -n "$bin_b" ]; then
        read -r r p u <<<"$(run_wrk "http://127.0.0.1:$hlsb_port/http/127.0.0.1:$nginx_port/vod/$f" "$c" "$hlsb_pid")"
        b_rps+=("$r"); b_p99+=("$p"); b_cpu+=("$u")
      fi
    done
    nr=$(median "${n_rps[@]}"); hr=$(median "${h_rps[@]}")
    ratio=$(python3 -c "print(f'{$hr/$nr:.2f}' if $nr else 'n/a')")
    # p99: the round with the median request rate.
    pick() { local -n rates=$1 values=$2; local m=$3 i; for i in "${!rates[@]}"; do [ "${rates[$i]}" = "$m" ] && { echo "${values[$i]}"; return; }; done; echo "${values[0]}"; }
    b_cells=""
    if [ -n "$bin_b" ]; then
      br=$(median "${b_rps[@]}")
      b_cells=" ${br%.*} | $(pick b_rps b_p99 "$br") | $(median "${b_cpu[@]}") | $(python3 -c "print(f'{$br/$nr:.2f}' if $nr else 'n/a')") | $(python3 -c "print(f'{$br/$hr:.2f}' if $hr else 'n/a')") |"
    fi
    echo "| $size | $c | ${nr%.*} | $(pick n_rps n_p99 "$nr") | $(median "${n_cpu[@]}") | ${hr%.*} | $(pick h_rps h_p99 "$hr") | $(median "${h_cpu[@]}") | $ratio |$b_cells"
  done
done
echo
echo "hlscache peak RSS: $(awk '/VmHWM/{print $2, $3}' /proc/$hls_pid/status); current: $(awk '/VmRSS/{print $2, $3}' /proc/$hls_pid/status)"
if [ -n "$bin_b" ]; then echo "B ($bin_b) peak RSS: $(awk '/VmHWM/{print $2, $3}' /proc/$hlsb_pid/status)"; fi
