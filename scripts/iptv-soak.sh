#!/usr/bin/env bash
# An IPTV channel list through `hlscache serve`, on loopback (issue 31; docs/reliability.md has the figures):
#   1. a list of three channels from a local provider (scripts/lib/iptv-origin.py) — one HLS channel that answers 403
#      unless it gets the User-Agent its #EXTVLCOPT names, one never-ending MPEG-TS channel (no Content-Length), one
#      HLS channel with a logo — is fetched through the proxy: every channel URL points back through the proxy;
#   2. ffmpeg reads each rewritten channel URL for 10 s (at least 200 frames each);
#   3. three clients read the live TS channel at once: ONE origin connection for all of them; the server's RSS and its
#      cache directory are sampled as the stream goes through, and must not grow with it; after the last client
#      leaves, the origin connection closes.
#
# usage: scripts/iptv-soak.sh --volume MB   step 3 at full speed until each client read MB megabytes, sampling every
#                                           MB/12 (the test suite runs this: flatness proven by volume, not time)
#        scripts/iptv-soak.sh MINUTES       step 3 at a real rate (RATE bytes/s, default 500000 = 4 Mbit/s) for
#                                           MINUTES, sampling every SAMPLE seconds (default 30)
# env: HLSCACHE_BIN (.build/debug/hlscache), KEEP=1 keeps the work directory. Prints "PASS: iptv" at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
MODE=()
case "${1:-}" in
    --volume) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "usage: $0 --volume MB | MINUTES" >&2; exit 64; }
        MODE=(--volume-mb "$2" --sample-mb "$(( $2 / 12 > 0 ? $2 / 12 : 1 ))"); RATE=0 ;;
    [0-9]*) MODE=(--minutes "$1" --sample-seconds "${SAMPLE:-30}"); RATE=${RATE:-500000} ;;
    *) echo "usage: $0 --volume MB | MINUTES" >&2; exit 64 ;;
esac
WORK=$(mktemp -d /tmp/hlscache-iptv.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() {
    for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null || true; done
    [ "${KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

# The provider's media: two short HLS channels and a 10 s MPEG-TS file the live channel loops.
for channel in one three; do
    mkdir -p "$WORK/provider/$channel"
    ffmpeg -v error -y -f lavfi -i "testsrc=size=320x180:rate=25:duration=12" -c:v libx264 -preset ultrafast -g 50 \
        -pix_fmt yuv420p -f hls -hls_time 2 -hls_playlist_type vod "$WORK/provider/$channel/index.m3u8"
done
ffmpeg -v error -y -f lavfi -i "testsrc2=size=640x360:rate=25:duration=10" -f lavfi -i "sine=frequency=440:duration=10" \
    -c:v libx264 -preset ultrafast -g 50 -b:v 1500k -pix_fmt yuv420p -c:a aac -f mpegts "$WORK/provider/loop.ts"

python3 "$ROOT/scripts/lib/iptv-origin.py" "$WORK/provider" "$WORK/origin.port" --rate "$RATE" --log "$WORK/origin.log" \
    --max-seconds 10800 &
for _ in $(seq 600); do [ -s "$WORK/origin.port" ] && break; sleep 0.1; done
[ -s "$WORK/origin.port" ] || fail "the origin did not start"
ORIGIN_PORT=$(cat "$WORK/origin.port")

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --cache-dir "$WORK/cache" --listen "127.0.0.1:$PORT" --log-level notice >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 600); do curl --max-time 30 -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break; sleep 0.1; done
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" || fail "serve did not become ready: $(tail -5 "$WORK/serve.log")"
PROXY="http://127.0.0.1:$PORT"
PROXIED="/http/127.0.0.1:$ORIGIN_PORT"

# 1. The list through the proxy: every channel URL back through it, the tags as they were.
curl -fsS "$PROXY$PROXIED/list.m3u" >"$WORK/list.m3u" || fail "the channel list was not served"
channels=$(grep -v '^#' "$WORK/list.m3u" | grep -c . || true)
[ "$channels" = 3 ] || fail "expected 3 channels, got $channels"
# Absolute channel URLs (VLC, mpv and Kodi read a leading / as a file), on the address the list was asked at.
grep -v '^#' "$WORK/list.m3u" | grep -v "^$PROXY$PROXIED/" && fail "a channel URL does not go through the proxy as an absolute URL"
grep -q '^#EXTVLCOPT:http-user-agent=HLSCacheSoakTV/1.0 (channel one)$' "$WORK/list.m3u" || fail "the #EXTVLCOPT line changed"
echo "ok: the channel list through the proxy, 3 channel URLs rewritten, tags kept"

# 2. ffmpeg reads each rewritten channel URL for 10 s (its own User-Agent: the proxy sends channel one's).
for url in $(grep -v '^#' "$WORK/list.m3u"); do
    path=${url#"$PROXY"}
    frames=$(ffmpeg -v error -nostdin -t 10 -i "$url" -map 0:v:0 -f framemd5 - | grep -vc '^#' || true)
    [ "$frames" -ge 200 ] || fail "ffmpeg read $frames frames of $path through the proxy (expected >= 200 in 10 s)"
    echo "ok: ffmpeg read $frames frames of ${path#"$PROXIED"} through the proxy"
done
grep '^GET /one/' "$WORK/origin.log" | grep -v 'UA=HLSCacheSoakTV/1.0 (channel one)$' && fail "a request of channel one without its User-Agent"
# ffmpeg's live connection is gone once ffmpeg is: the origin saw it closed.
for _ in $(seq 600); do
    [ "$(grep -c '^open live' "$WORK/origin.log")" = "$(grep -c '^close live' "$WORK/origin.log")" ] && break
    sleep 0.1
done
[ "$(grep -c '^open live' "$WORK/origin.log")" = "$(grep -c '^close live' "$WORK/origin.log")" ] \
    || fail "the live channel's origin connection stayed open after ffmpeg left"

# 3. Three clients on the live TS channel at once.
python3 "$ROOT/scripts/lib/ts-readers.py" "$PROXY$PROXIED/live/channel.ts" --pid "$SERVE_PID" --cache-dir "$WORK/cache" \
    --origin-log "$WORK/origin.log" --clients 3 "${MODE[@]}" || fail "the live channel through the proxy (above)"
echo "PASS: iptv"
