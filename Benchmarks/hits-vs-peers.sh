#!/usr/bin/env bash
# Cache hits: hlscache against the best of its peers, measured with wrk in the same run (issue "hits at or above
# nginx and Varnish"):
#   nginx static       sendfile of the files (no cache logic at all: the floor every cache is compared with)
#   nginx proxy_cache  nginx as a caching proxy of the same origin (sendfile from its cache files)
#   Varnish            varnishd -s malloc (serves from memory)
#   hlscache           the release build: its memory tier (small hits; bodies over 64 KiB while few are in flight),
#                      else sendfile from its cache files
# Workloads: 2 MiB and 256 KiB segments, and a 1.8 KB VOD playlist (40 segments; hlscache serves it rewritten),
# at several connection counts. Every server is warmed (each object fetched once, then checked to be a hit), then
# each cell runs ROUNDS rounds of wrk per server, the servers interleaved (this machine is shared: single runs swing
# by 20 %). Prints a Markdown table of median requests/s, each server's CPU µs per request, hlscache/best, and every
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
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -f "$work/varnish.pid" ] && kill "$(cat "$work/varnish.pid")" 2>/dev/null || true
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/www/vod" "$work/cache" "$work/nginx-tmp" "$work/nginx-cache" "$work/varnish"
head -c $((2 * 1024 * 1024)) /dev/urandom >"$work/www/vod/seg_2m.ts"
head -c $((256 * 1024)) /dev/urandom >"$work/www/vod/seg_256k.ts"
{
  printf '#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n'
  for i in $(seq 0 39); do printf '#EXTINF:6.0,\nseg%03d.ts\n' "$i"; done
  printf '#EXT-X-ENDLIST\n'
} >"$work/www/vod/index.m3u8"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
origin_port=$(free_port); static_port=$(free_port); pcache_port=$(free_port); varnish_port=$(free_port); hls_port=$(free_port)

# One nginx: the origin, the static server (the same files) and the proxy_cache of the origin.
cat >"$work/nginx.conf" <<CONF
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
  types { video/mp2t ts; application/vnd.apple.mpegurl m3u8; }
  proxy_cache_path $work/nginx-cache levels=1:2 keys_zone=hls:16m max_size=1g inactive=1d use_temp_path=off;
  server { listen 127.0.0.1:$origin_port; root $work/www; }
  server { listen 127.0.0.1:$static_port; root $work/www; }
  server {
    listen 127.0.0.1:$pcache_port;
    location / {
      proxy_pass http://127.0.0.1:$origin_port;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache hls;
      proxy_cache_valid 200 1d;
      proxy_cache_lock on;
      add_header X-Cache \$upstream_cache_status;
    }
  }
}
CONF
nginx -c "$work/nginx.conf" -p "$work" -e "$work/nginx-error.log"

# Varnish: the same origin, objects kept a day, in memory.
cat >"$work/default.vcl" <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$origin_port"; }
sub vcl_backend_response { set beresp.ttl = 1d; }
sub vcl_deliver { if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; } }
VCL
varnishd -a "127.0.0.1:$varnish_port" -f "$work/default.vcl" -s malloc,256m -n "$work/varnish" -P "$work/varnish.pid" \
  -p thread_pools=2 >/dev/null 2>&1

"$bin" serve --listen "127.0.0.1:$hls_port" --cache-dir "$work/cache" --log-level error --prefetch-segments 0 >"$work/hlscache.log" 2>&1 &
hls_pid=$!
for _ in $(seq 1 200); do curl -fsS "http://127.0.0.1:$hls_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
servers="static pcache varnish hlscache"
if [ -n "${HLSCACHE_BIN_B:-}" ]; then
  hls_b_port=$(free_port)
  mkdir -p "$work/cache-b"
  # shellcheck disable=SC2086
  env ${HLSCACHE_B_ENV:-} "$HLSCACHE_BIN_B" serve --listen "127.0.0.1:$hls_b_port" --cache-dir "$work/cache-b" --log-level error --prefetch-segments 0 >"$work/hlscache-b.log" 2>&1 &
  hls_b_pid=$!
  for _ in $(seq 1 200); do curl -fsS "http://127.0.0.1:$hls_b_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  servers="$servers hlscache_b"
fi

path_of() { case $1 in 2m) echo /vod/seg_2m.ts ;; 256k) echo /vod/seg_256k.ts ;; playlist) echo /vod/index.m3u8 ;; esac; }
url_of() { # server object
  local p
  p=$(path_of "$2")
  case $1 in
    static) echo "http://127.0.0.1:$static_port$p" ;;
    pcache) echo "http://127.0.0.1:$pcache_port$p" ;;
    varnish) echo "http://127.0.0.1:$varnish_port$p" ;;
    hlscache) echo "http://127.0.0.1:$hls_port/http/127.0.0.1:$origin_port$p" ;;
    hlscache_b) echo "http://127.0.0.1:$hls_b_port/http/127.0.0.1:$origin_port$p" ;;
  esac
}
# Warm every cache and check that the second request is a hit.
for object in 2m 256k playlist; do
  for server in ${servers#static }; do
    curl -fsS -o /dev/null "$(url_of "$server" "$object")"
    sleep 0.2
    result=$(curl -fsS -D - -o /dev/null "$(url_of "$server" "$object")" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}')
    [ "$result" = "HIT" ] || { echo "warm-up failed: $object is not a hit on $server ($result)" >&2; exit 1; }
  done
done

pids_of() { # server -> the processes whose CPU time counts
  case $1 in
    static | pcache) pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ' ;;
    varnish) pgrep -f "varnishd.*$work/varnish" | tr '\n' ' ' ;;
    hlscache) echo "$hls_pid" ;;
    hlscache_b) echo "$hls_b_pid" ;;
  esac
}
. Benchmarks/lib/wrk-rounds.sh

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(nginx -v 2>&1); $(varnishd -V 2>&1 | head -1); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "each cell: $rounds rounds of wrk ${duration}s per server, servers interleaved; median req/s (CPU µs per request)"
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
  for _ in $(seq 1 "$rounds"); do
    for server in $servers; do
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
rss() { local t=0 pid; for pid in "$@"; do [ -r "/proc/$pid/status" ] && t=$((t + $(awk '/VmHWM/{print $2}' "/proc/$pid/status"))); done; echo "$((t / 1024)) MiB"; }
# shellcheck disable=SC2046
echo "peak RSS: nginx (all workers, both roles) $(rss $(pids_of static)), Varnish $(rss $(pids_of varnish)), hlscache $(rss "$hls_pid")${HLSCACHE_BIN_B:+, hlscache B $(rss "${hls_b_pid:-}")}"
echo "load at the end: $(cut -d" " -f1-3 /proc/loadavg) (other work on the machine moves these figures: compare runs at similar load)"
