#!/usr/bin/env bash
# The memory an 8 MiB media playlist leaves behind in `hlscache serve`: VmRSS before one request for it through the
# proxy, after it (the miss: fetched, rewritten, stored), after a second (a gzip hit), and the peak (VmHWM).
#
# usage: scripts/playlist-rss.sh [BIN]       (default .build/debug/hlscache; extra serve flags in $SERVE_FLAGS)
# Loopback only; the origin (python3 -m http.server) and the server are this script's children, killed on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/.build/debug/hlscache}
[ -x "$BIN" ] || { echo "no hlscache binary at $BIN" >&2; exit 2; }
WORK=$(mktemp -d /tmp/hlscache-rss.XXXXXX)
SRV= ORG=
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; [ -n "$ORG" ] && kill "$ORG" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
python3 - "$WORK/big.m3u8" <<'PY'
import sys
lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:4", "#EXT-X-MEDIA-SEQUENCE:0"]
size, i = sum(len(l) + 1 for l in lines), 0
while size < 8 << 20:
    a, b = "#EXTINF:4.000,", "segments/seg%07d.ts" % i
    lines += [a, b]; size += len(a) + len(b) + 2; i += 1
open(sys.argv[1], "w").write("\n".join(lines + ["#EXT-X-ENDLIST"]) + "\n")
print(f"playlist: {i} segments, {size} bytes")
PY
(cd "$WORK" && exec python3 -m http.server 0 --bind 127.0.0.1 >"$WORK/origin.log" 2>&1) & ORG=$!
for _ in $(seq 100); do grep -q "port" "$WORK/origin.log" 2>/dev/null && break; sleep 0.1; done
OPORT=$(grep -o 'port [0-9]*' "$WORK/origin.log" | head -1 | awk '{print $2}')
# shellcheck disable=SC2086
"$BIN" serve --listen 127.0.0.1:0 --cache-dir "$WORK/cache" --no-access-log ${SERVE_FLAGS:-} >"$WORK/serve.log" 2>&1 & SRV=$!
for _ in $(seq 300); do grep -q "http://127.0.0.1:" "$WORK/serve.log" && break; sleep 0.2; done
PORT=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/serve.log" | head -1 | sed 's/.*://')
rss() { awk '/VmRSS/ {print $2}' "/proc/$SRV/status"; }
curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"
sleep 1
before=$(rss)
curl -s -o /dev/null -w "miss: %{http_code}, %{size_download} bytes\n" "http://127.0.0.1:$PORT/http/127.0.0.1:$OPORT/big.m3u8"
sleep 2
miss=$(rss)
curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w "hit: %{http_code}, %{size_download} bytes (gzip)\n" "http://127.0.0.1:$PORT/http/127.0.0.1:$OPORT/big.m3u8"
sleep 2
hit=$(rss)
peak=$(awk '/VmHWM/ {print $2}' "/proc/$SRV/status")
echo "RSS KiB: before $before, after the miss $miss (+$((miss - before))), after the hit $hit (+$((hit - before))), peak $peak (+$((peak - before)))"
