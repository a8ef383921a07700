#!/usr/bin/env bash
# Soak test of `hlscache serve` on loopback (bounded; every process it starts stops with it):
#   1. PLAYERS simulated players (default 500; 20% live) for DURATION seconds (default 300): playlist loads and reloads,
#      segments at real pace (4 s), a mix of misses and hits; every body checked against the origin (SHA-256).
#      Must end with zero errors; reports requests/s, p50/p90/p99 latency and the server's RSS over time.
#   2. IDLE keep-alive connections (default 10000) opened, held for HOLD seconds (default 30, under the 60 s idle
#      timeout) and used again: every one must still answer.
# usage: Benchmarks/soak.sh        env: PLAYERS, DURATION (seconds), IDLE, HOLD, HLSCACHE_BIN (default: release build if
#        present, else debug), KEEP=1 keeps the work directory. Prints JSON lines; exits 1 on any error.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PLAYERS=${PLAYERS:-500} SECONDS_=${DURATION:-300} IDLE=${IDLE:-10000} HOLD=${HOLD:-30}
BIN=${HLSCACHE_BIN:-$ROOT/.build/release/hlscache}
[ -x "$BIN" ] || BIN=$ROOT/.build/debug/hlscache
[ -x "$BIN" ] || { echo "no hlscache binary (swift build -c release)" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((IDLE + 1000)) ] || echo "warning: ulimit -n is $(ulimit -n), below IDLE+1000" >&2
WORK=$(mktemp -d /tmp/hlscache-soak.XXXXXX)
cleanup() {
    for pid in $(jobs -p); do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "${KEEP:-0}" = 1 ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$ROOT/scripts/lib/make-stream.py" "$WORK/origin" --variants 3 --segments 40 --size 120000 --seed 3
python3 "$ROOT/scripts/lib/slow-origin.py" "$WORK/origin" "$WORK/origin.port" --delay 0 --max-seconds $((SECONDS_ + HOLD + 600)) &
for _ in $(seq 100); do [ -s "$WORK/origin.port" ] && break; sleep 0.05; done
ORIGIN_PORT=$(cat "$WORK/origin.port")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
LIMIT=()
if "$BIN" serve --help 2>&1 | grep -q -- --max-connections; then LIMIT=(--max-connections $((IDLE + 2000)));
else echo "warning: this binary has no --max-connections (limit 4096)" >&2; fi
"$BIN" serve --cache-dir "$WORK/cache" --listen "127.0.0.1:$PORT" --free-disk-cushion 0 "${LIMIT[@]}" \
    --log-level error >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
echo "binary $BIN, server pid $SERVE_PID on :$PORT, origin :$ORIGIN_PORT, ulimit -n $(ulimit -n)" >&2

status=0
python3 "$ROOT/Benchmarks/soak.py" players --port "$PORT" --pid "$SERVE_PID" --origin-authority "127.0.0.1:$ORIGIN_PORT" \
    --origin-dir "$WORK/origin" --players "$PLAYERS" --seconds "$SECONDS_" || status=1
kill -0 "$SERVE_PID" || { echo "FAIL: the server died" >&2; exit 1; }
python3 "$ROOT/Benchmarks/soak.py" idle --port "$PORT" --pid "$SERVE_PID" --connections "$IDLE" --hold "$HOLD" || status=1
kill -0 "$SERVE_PID" || { echo "FAIL: the server died" >&2; exit 1; }
curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" || { echo "FAIL: /healthz after the soak" >&2; exit 1; }
[ -s "$WORK/serve.log" ] && { echo "server log (errors):" >&2; tail -5 "$WORK/serve.log" >&2; }
[ $status = 0 ] && echo "PASS" >&2 || echo "FAIL" >&2
exit $status
