#!/usr/bin/env bash
# Memory and origin traffic of large cache misses: hlscache vs nginx proxy_cache (+ slice), in the same run.
#
#   Benchmarks/large-miss-memory.sh                     (4 concurrent 1 GiB misses, then one 1 MiB range on a 1 GiB miss)
#   SIZE_MIB=400 MISSES=1 Benchmarks/large-miss-memory.sh
#   HLSCACHE_BIN=.build/debug/hlscache Benchmarks/large-miss-memory.sh    (measure a build as it is; default: release)
#
# An nginx serves sparse files as the origin (its access log counts the bytes it sends). In front of it, in turn:
#   - hlscache serve (a new cache directory),
#   - nginx with proxy_cache (one worker, proxy_buffering on, the default 8×4k/8k buffers),
#   - nginx with proxy_cache and `slice 1m` (the way nginx caches large objects in pieces).
# For each: MISSES clients fetch MISSES different objects at once with curl; then one client asks a fresh object for
# bytes 0-1048575 (hlscache answers it from the covering 1 MiB slice, cache.sliceSize; nginx + slice likewise). Printed: each server's peak RSS (VmHWM; nginx: the largest of master and worker), the origin
# bytes, and the range's time to first byte. Loopback only; bounded by the sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${SIZE_MIB:-1024}
misses=${MISSES:-4}
./scripts/install-deps.sh nginx curl >/dev/null
. Benchmarks/lib/release-build.sh
hlscache_release_binary

work=$(mktemp -d /tmp/hlscache-large-miss.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for conf in "$work"/*.pid; do [ -f "$conf" ] && kill "$(cat "$conf")" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/www" "$work/tmp"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# Sparse objects: the origin sends zeros from the page cache, so the origin costs little CPU or disk.
for server in hlscache nginx slice; do
  for i in $(seq 1 "$misses"); do truncate -s "${size_mib}M" "$work/www/$server-$i.ts"; done
  truncate -s "${size_mib}M" "$work/www/$server-range.ts"
done

origin_port=$(free_port)
nginx_conf() {  # name port server-block
  cat > "$work/$1.conf" <<CONF
worker_processes 1;
pid $work/$1.pid;
error_log $work/$1-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path $work/tmp;
  proxy_temp_path $work/tmp/$1;
  fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp;
  scgi_temp_path $work/tmp;
  types { video/mp2t ts; }
  log_format bytes '\$body_bytes_sent \$request_uri';
  $3
}
CONF
  mkdir -p "$work/tmp/$1"
  nginx -c "$work/$1.conf" -p "$work" -e "$work/$1-error.log"
}
nginx_conf origin "$origin_port" "server { listen 127.0.0.1:$origin_port; root $work/www; access_log $work/origin.log bytes; }"
for _ in $(seq 1 50); do curl -fsS -o /dev/null -r 0-0 "http://127.0.0.1:$origin_port/hlscache-1.ts" 2>/dev/null && break; sleep 0.1; done
: > "$work/origin.log"

nginx_port=$(free_port)
nginx_conf nginx "$nginx_port" "proxy_cache_path $work/nginx-cache levels=1:2 keys_zone=c:10m max_size=100g inactive=1h use_temp_path=off;
  server { listen 127.0.0.1:$nginx_port; location / { proxy_pass http://127.0.0.1:$origin_port; proxy_cache c; proxy_cache_valid 200 1h; } }"
slice_port=$(free_port)
if nginx -V 2>&1 | grep -q with-http_slice_module; then
  nginx_conf slice "$slice_port" "proxy_cache_path $work/slice-cache levels=1:2 keys_zone=s:10m max_size=100g inactive=1h use_temp_path=off;
  server { listen 127.0.0.1:$slice_port; location / { slice 1m; proxy_pass http://127.0.0.1:$origin_port;
    proxy_cache s; proxy_cache_key \$uri\$slice_range; proxy_set_header Range \$slice_range; proxy_cache_valid 200 206 1h; } }"
else
  slice_port=""
fi

hls_port=$(free_port)
"$bin" serve --listen "127.0.0.1:$hls_port" --cache-dir "$work/hlscache-cache" --log-level error --no-access-log > "$work/hlscache.log" 2>&1 &
hls_pid=$!
pids+=("$hls_pid")
for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$hls_port/healthz" 2>/dev/null && break; sleep 0.1; done
hls_rest_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$hls_pid/status")

hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
nginx_hwm_kib() {  # name: the largest VmHWM of the master and its workers
  local master max=0 value
  master=$(cat "$work/$1.pid")
  for pid in "$master" $(pgrep -P "$master"); do
    value=$(hwm_kib "$pid")
    [ "$value" -gt "$max" ] && max=$value
  done
  echo "$max"
}
origin_bytes() {  # prefix: bytes the origin sent for objects named prefix-*
  awk -v p="/$1-" 'index($2, p) == 1 {s += $1} END {printf "%.0f\n", s}' "$work/origin.log"
}
# Waits until background fills are done: the origin log and the server's cache directory stop changing for 2 s
# (and, for hlscache, no origin download is in flight); at most 600 s.
settle() {  # cache-dir [hlscache-base]
  local before after quiet=0
  for _ in $(seq 1 600); do
    before="$(stat -c %s "$work/origin.log") $(du -sb "$1" 2>/dev/null | cut -f1)"
    sleep 1
    after="$(stat -c %s "$work/origin.log") $(du -sb "$1" 2>/dev/null | cut -f1)"
    if [ -n "${2:-}" ] && ! curl -fsS "$2/metrics" | grep -q '^hlscache_origin_fetches_in_flight 0'; then quiet=0; continue; fi
    if [ "$before" = "$after" ]; then quiet=$((quiet + 1)); else quiet=0; fi
    [ "$quiet" -ge 2 ] && return
  done
}
misses_through() {  # name base-url prefix
  local start end
  start=$(date +%s.%N)
  for i in $(seq 1 "$misses"); do curl -fsS -o /dev/null "$2/$3-$i.ts" & done
  wait
  end=$(date +%s.%N)
  python3 -c "print(f'{$end-$start:.1f}')"
}
range_ttfb() {  # base-url prefix
  curl -fsS -o /dev/null -r 0-1048575 -w '%{time_starttransfer}' "$1/$2-range.ts"
}

declare -A peak seconds origin range_bytes ttfb
hls_base="http://127.0.0.1:$hls_port/http/127.0.0.1:$origin_port"
seconds[hlscache]=$(misses_through hlscache "$hls_base" hlscache)
ttfb[hlscache]=$(range_ttfb "$hls_base" hlscache)
settle "$work/hlscache-cache" "http://127.0.0.1:$hls_port"
peak[hlscache]=$(hwm_kib "$hls_pid")
origin[hlscache]=$(origin_bytes hlscache)
range_bytes[hlscache]=$(awk '$2 ~ /hlscache-range/ {s += $1} END {printf "%.0f\n", s}' "$work/origin.log")

seconds[nginx]=$(misses_through nginx "http://127.0.0.1:$nginx_port" nginx)
ttfb[nginx]=$(range_ttfb "http://127.0.0.1:$nginx_port" nginx)
settle "$work/nginx-cache"
peak[nginx]=$(nginx_hwm_kib nginx)
origin[nginx]=$(origin_bytes nginx)
range_bytes[nginx]=$(awk '$2 ~ /nginx-range/ {s += $1} END {printf "%.0f\n", s}' "$work/origin.log")

servers=(hlscache nginx)
if [ -n "$slice_port" ]; then
  seconds[slice]=$(misses_through slice "http://127.0.0.1:$slice_port" slice)
  ttfb[slice]=$(range_ttfb "http://127.0.0.1:$slice_port" slice)
  settle "$work/slice-cache"
  peak[slice]=$(nginx_hwm_kib slice)
  origin[slice]=$(origin_bytes slice)
  range_bytes[slice]=$(awk '$2 ~ /slice-range/ {s += $1} END {printf "%.0f\n", s}' "$work/origin.log")
  servers+=(slice)
fi

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); hlscache: $bin; $misses concurrent misses of $size_mib MiB, then one 1 MiB range on a $size_mib MiB miss"
echo "hlscache at rest (after start): $((hls_rest_kib / 1024)) MiB RSS"
echo
echo "| server | peak RSS | misses: wall s | origin bytes (misses + range) | range: origin bytes | range: time to first byte |"
echo "|---|---|---|---|---|---|"
for server in "${servers[@]}"; do
  name=$server
  [ "$server" = nginx ] && name="nginx proxy_cache"
  [ "$server" = slice ] && name="nginx proxy_cache + slice 1m"
  printf '| %s | %s MiB | %s | %s MiB | %s MiB | %s s |\n' "$name" "$((peak[$server] / 1024))" "${seconds[$server]}" \
    "$((origin[$server] / 1048576))" "$((range_bytes[$server] / 1048576))" "${ttfb[$server]}"
done
