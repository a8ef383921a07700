#!/usr/bin/env bash
# Cache-hit throughput: hlscache vs nginx serving the same files, measured with wrk in the same run.
#
#   Benchmarks/proxy-vs-nginx.sh [seconds-per-run]      (default 10)
#
# nginx (Debian's, sendfile on, access log off, one worker per core) serves a directory of segments; the same
# nginx is hlscache's origin, every file is requested once through hlscache to make it a cache hit, then wrk
# measures both at 1, 8, 64 and 256 connections for 2 MiB and 256 KiB segments. Prints a Markdown table and
# hlscache's peak RSS. Loopback only; every run is bounded by its duration.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
./scripts/install-deps.sh nginx-light wrk >/dev/null
swift build -c release --product hlscache 2>&1 | grep -E "error:|Build of product" | tail -1 || true
bin=.build/release/hlscache

work=$(mktemp -d /tmp/hlscache-bench.XXXXXX)
cleanup() {
  [ -n "${hls_pid:-}" ] && kill "$hls_pid" 2>/dev/null || true
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$work"
}
trap cleanup EXIT

chmod 755 "$work"
mkdir -p "$work/www/vod" "$work/cache" "$work/nginx-tmp"
head -c $((2 * 1024 * 1024)) /dev/urandom > "$work/www/vod/seg_2m.ts"
head -c $((256 * 1024)) /dev/urandom > "$work/www/vod/seg_256k.ts"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
nginx_port=$(free_port)
hls_port=$(free_port)

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

"$bin" serve --listen "127.0.0.1:$hls_port" --cache-dir "$work/cache" --log-level error > "$work/hlscache.log" 2>&1 &
hls_pid=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$hls_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

for f in seg_2m.ts seg_256k.ts; do
  curl -fsS -o /dev/null "http://127.0.0.1:$hls_port/http/127.0.0.1:$nginx_port/vod/$f"
done
sleep 1
for f in seg_2m.ts seg_256k.ts; do
  cache=$(curl -fsS -D - -o /dev/null "http://127.0.0.1:$hls_port/http/127.0.0.1:$nginx_port/vod/$f" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}')
  [ "$cache" = "HIT" ] || { echo "warm-up failed: $f is not a cache hit ($cache)"; exit 1; }
done

run_wrk() {  # url connections -> "requests/s MB/s"
  local threads=$(( $2 < 2 ? 1 : 2 ))
  wrk -t"$threads" -c"$2" -d"${duration}s" --latency "$1" 2>&1 | awk '
    /Requests\/sec/ {rps=$2}
    /Transfer\/sec/ {v=$2; if (v ~ /GB/) {sub(/GB/,"",v); v*=1024} else if (v ~ /MB/) {sub(/MB/,"",v)} else if (v ~ /KB/) {sub(/KB/,"",v); v/=1024}; mbs=v}
    /^ +99%/ {p99=$2}
    END {printf "%s %s %s", rps, mbs, p99}'
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg); $(nginx -v 2>&1); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "each run: wrk ${duration}s"
echo
echo "| segment | connections | nginx req/s | nginx MB/s | nginx p99 | hlscache req/s | hlscache MB/s | hlscache p99 | hlscache/nginx |"
echo "|---|---|---|---|---|---|---|---|---|"
for f in seg_2m.ts seg_256k.ts; do
  for c in 1 8 64 256; do
    read -r n_rps n_mbs n_p99 <<<"$(run_wrk "http://127.0.0.1:$nginx_port/vod/$f" "$c")"
    read -r h_rps h_mbs h_p99 <<<"$(run_wrk "http://127.0.0.1:$hls_port/http/127.0.0.1:$nginx_port/vod/$f" "$c")"
    ratio=$(python3 -c "print(f'{$h_rps/$n_rps:.2f}' if $n_rps else 'n/a')")
    echo "| ${f#seg_} | $c | $n_rps | $n_mbs | $n_p99 | $h_rps | $h_mbs | $h_p99 | $ratio |"
  done
done
echo
echo "hlscache peak RSS: $(awk '/VmHWM/{print $2, $3}' /proc/$hls_pid/status); current: $(awk '/VmRSS/{print $2, $3}' /proc/$hls_pid/status)"
