# Sourced by the hit benchmarks (hits-vs-peers.sh, viewing-vs-peers.sh, nio-floor.sh): hlscache and its peers on one origin, each
# on its own port of 127.0.0.1.
#   origin             nginx serving $work/www (every cache's origin)
#   static             nginx serving the same files with sendfile (no cache logic at all: the floor)
#   pcache             nginx proxy_cache of the origin (sendfile from its cache files; playlists under /live/ 1 s)
#   varnish            varnishd -s malloc,$VARNISH_MEMORY (default 1G), playlists under /live/ 1 s
#   hlscache           $bin on its defaults (but read-ahead off: every server answers exactly what it is asked)
#   hlscache_b         $HLSCACHE_BIN_B with $HLSCACHE_B_ENV, when set (a before/after, or other settings)
# Expects $work (a scratch directory with www/ in it) and $bin. Sets $servers, and peers_stop stops them all.

# The 1.8 KB VOD playlist of 40 six-second segments the small-hit cells ask for (hits-vs-peers.sh, nio-floor.sh).
write_vod_playlist() { # file
  {
    printf '#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n'
    for i in $(seq 0 39); do printf '#EXTINF:6.0,\nseg%03d.ts\n' "$i"; done
    printf '#EXT-X-ENDLIST\n'
  } >"$1"
}

# COUNT files of BYTES random bytes, DIR/seg00000.ts and on: the segments the hit benchmarks walk in turn.
write_segments() { # dir count bytes
  python3 - "$1" "$2" "$3" <<'PY'
import os, sys
root, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for index in range(count):
    with open(f"{root}/seg{index:05d}.ts", "wb") as f:
        f.write(os.urandom(size))
PY
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

wait_healthy() { # url
  for _ in $(seq 1 300); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "FAIL: $1 never answered" >&2
  return 1
}

peers_start() {
  origin_port=$(free_port)
  static_port=$(free_port)
  pcache_port=$(free_port)
  varnish_port=$(free_port)
  hls_port=$(free_port)
  mkdir -p "$work/cache" "$work/nginx-tmp" "$work/nginx-cache" "$work/varnish"
  chmod 755 "$work"
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
  proxy_cache_path $work/nginx-cache levels=1:2 keys_zone=hls:64m max_size=64g inactive=1d use_temp_path=off;
  server { listen 127.0.0.1:$origin_port; root $work/www; }
  server { listen 127.0.0.1:$static_port; root $work/www; }
  server {
    listen 127.0.0.1:$pcache_port;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_cache hls;
    proxy_cache_lock on;
    add_header X-Cache \$upstream_cache_status;
    location ~ ^/live/.*\.m3u8\$ { proxy_pass http://127.0.0.1:$origin_port; proxy_cache_valid 200 1s; }
    location / { proxy_pass http://127.0.0.1:$origin_port; proxy_cache_valid 200 1d; }
  }
}
CONF
  nginx -c "$work/nginx.conf" -p "$work" -e "$work/nginx-error.log"
  cat >"$work/default.vcl" <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$origin_port"; }
sub vcl_backend_response {
  if (bereq.url ~ "^/live/.*\.m3u8") { set beresp.ttl = 1s; set beresp.grace = 0s; } else { set beresp.ttl = 1d; }
}
sub vcl_deliver { if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; } }
VCL
  varnishd -a "127.0.0.1:$varnish_port" -f "$work/default.vcl" -s "malloc,${VARNISH_MEMORY:-1G}" -n "$work/varnish" \
    -P "$work/varnish.pid" -p thread_pools=2 >/dev/null 2>&1
  "$bin" serve --listen "127.0.0.1:$hls_port" --cache-dir "$work/cache" --log-level error --prefetch-segments 0 \
    >"$work/hlscache.log" 2>&1 &
  hls_pid=$!
  wait_healthy "http://127.0.0.1:$hls_port/healthz"
  servers="static pcache varnish hlscache"
  if [ -n "${HLSCACHE_BIN_B:-}" ]; then
    hls_b_port=$(free_port)
    mkdir -p "$work/cache-b"
    # shellcheck disable=SC2086
    env ${HLSCACHE_B_ENV:-} "$HLSCACHE_BIN_B" serve --listen "127.0.0.1:$hls_b_port" --cache-dir "$work/cache-b" --log-level error \
      --prefetch-segments 0 >"$work/hlscache-b.log" 2>&1 &
    hls_b_pid=$!
    wait_healthy "http://127.0.0.1:$hls_b_port/healthz"
    servers="$servers hlscache_b"
  fi
}

peers_stop() {
  [ -n "${hls_pid:-}" ] && kill "$hls_pid" 2>/dev/null || true
  [ -n "${hls_b_pid:-}" ] && kill "$hls_b_pid" 2>/dev/null || true
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -f "$work/varnish.pid" ] && kill "$(cat "$work/varnish.pid")" 2>/dev/null || true
  sleep 0.5
}

# The URL prefix a server answers origin path P under: prefix_of server, then append P.
prefix_of() {
  case $1 in
    static) echo "http://127.0.0.1:$static_port" ;;
    pcache) echo "http://127.0.0.1:$pcache_port" ;;
    varnish) echo "http://127.0.0.1:$varnish_port" ;;
    hlscache) echo "http://127.0.0.1:$hls_port/http/127.0.0.1:$origin_port" ;;
    hlscache_b) echo "http://127.0.0.1:$hls_b_port/http/127.0.0.1:$origin_port" ;;
  esac
}

pids_of() { # server -> the processes whose CPU time counts
  case $1 in
    static | pcache) pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ' ;;
    varnish) pgrep -f "varnishd.*$work/varnish" | tr '\n' ' ' ;;
    hlscache) echo "$hls_pid" ;;
    hlscache_b) echo "$hls_b_pid" ;;
  esac
}

is_cache() { [ "$1" != static ]; }

# Peak resident memory of the processes given (VmHWM, summed), in MiB.
peak_rss_mib() { local t=0 pid; for pid in "$@"; do [ -r "/proc/$pid/status" ] && t=$((t + $(awk '/VmHWM/{print $2}' "/proc/$pid/status"))); done; echo "$((t / 1024))"; }

# The words of LIST rotated left by N: each round of a cell starts with the next server, so that no server always
# runs in the slot after the same other one (identical builds measured side by side differed by up to 7 % by slot).
rotated() { # list n
  local -a items
  read -r -a items <<<"$1"
  local count=${#items[@]} i
  for ((i = 0; i < count; i++)); do printf '%s ' "${items[$(((i + $2) % count))]}"; done
}
