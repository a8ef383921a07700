# Sourced by Benchmarks/prewarm.sh and Benchmarks/store-scale.sh: the 60-second, 3-variant stream they prewarm
# and the nginx that serves it.
#
#   make_prewarm_workdir NAME     sets $work to a new /tmp/hlscache-NAME.* with www/vod and tmp, removed (and its
#                                 nginx stopped) when the script exits
#   make_prewarm_stream DIR [SECONDS]
#                                 writes DIR/master.m3u8 and DIR/v{0,1,2}/ (TS, 2 s segments; 60 s by default: 90 files)
#   start_static_nginx WORK       serves WORK/www on 127.0.0.1 (writes WORK/nginx.conf, WORK/nginx.pid; needs
#                                 WORK/tmp); sets $port. The caller's EXIT trap stops it (kill "$(cat WORK/nginx.pid)").

make_prewarm_workdir() {
  work=$(mktemp -d "/tmp/hlscache-$1.XXXXXX")
  chmod 755 "$work"
  mkdir -p "$work/www/vod" "$work/tmp"
  trap '[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; sleep 0.2; rm -rf "$work"' EXIT
}

make_prewarm_stream() {
  local dir=$1 seconds=${2:-60}
  mkdir -p "$dir"
  ffmpeg -hide_banner -loglevel error -nostdin -y -f lavfi -i testsrc2=size=640x360:rate=25:duration="$seconds" -f lavfi -i sine=duration="$seconds" \
    -map 0:v -map 0:v -map 0:v -map 1:a -map 1:a -map 1:a -filter:v:1 scale=320:180 -filter:v:2 scale=160:90 \
    -c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 -b:v:0 1500k -b:v:1 600k -b:v:2 200k -c:a aac -b:a 64k \
    -f hls -hls_time 2 -hls_playlist_type vod -master_pl_name master.m3u8 \
    -var_stream_map "v:0,a:0 v:1,a:1 v:2,a:2" -hls_segment_filename "$dir/v%v/seg%03d.ts" "$dir/v%v/index.m3u8"
}

start_static_nginx() {
  local work=$1
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
  cat > "$work/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 1024; }
http { access_log off; sendfile on; client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp; server { listen 127.0.0.1:$port; root $work/www; } }
CONF
  nginx -c "$work/nginx.conf" -p "$work" -e "$work/nginx-error.log"
}
