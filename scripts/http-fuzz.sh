#!/usr/bin/env bash
# Starts `hlscache serve` (real binary) in front of a local origin and runs scripts/http-fuzz.py against it for
# SECONDS (default 600). Exit 0: the server never crashed, /healthz always answered, no malformed response.
# usage: scripts/http-fuzz.sh [SECONDS]     env: HLSCACHE_BIN, WORKERS (16), KEEP=1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_=${1:-600}
BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
WORK=$(mktemp -d /tmp/hlscache-httpfuzz.XXXXXX)
cleanup() { for pid in $(jobs -p); do kill -TERM "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
python3 "$ROOT/scripts/lib/make-stream.py" "$WORK/origin" --variants 2 --segments 10 --size 50000
python3 "$ROOT/scripts/lib/slow-origin.py" "$WORK/origin" "$WORK/origin.port" --delay 0 --max-seconds $((SECONDS_ + 120)) &
for _ in $(seq 100); do [ -s "$WORK/origin.port" ] && break; sleep 0.05; done
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$BIN" serve --cache-dir "$WORK/cache" --listen "127.0.0.1:$PORT" --free-disk-cushion 0 --log-level error >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 200); do curl --max-time 30 -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
status=0
python3 "$ROOT/scripts/http-fuzz.py" "$PORT" "$SERVE_PID" "127.0.0.1:$(cat "$WORK/origin.port")" --seconds "$SECONDS_" --workers "${WORKERS:-16}" || status=1
kill -0 $SERVE_PID 2>/dev/null || { echo "FAIL: the server is gone; log:" >&2; tail -20 "$WORK/serve.log" >&2; exit 1; }
[ $status = 0 ] && echo PASS || echo FAIL
exit $status
