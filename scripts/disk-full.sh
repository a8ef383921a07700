#!/usr/bin/env bash
# The cache directory on a tiny file system (a tmpfs of 4 MiB: as root, or in a user and mount namespace of its own
# through `unshare -Urm` where user namespaces are enabled). Where neither can mount it, no disk can fill up, so the
# script ends with SKIP (exit 77), never PASS:
#   1. `fetch` of a stream larger than the disk fails with error code cacheFull, nothing corrupted;
#   2. with the disk filled to the last byte by another file, `serve` keeps serving: misses are passed through
#      with the origin's exact bytes, and nothing partial is left in the cache;
#   3. once space is freed, misses are cached again (second request is a HIT) and a fetch that fits completes.
# After every step the cache is checked against its index and the origin (scripts/lib/check-cache.py).
#
# usage: scripts/disk-full.sh          env: HLSCACHE_BIN (default .build/debug/hlscache), KEEP=1
# Loopback only, bounded. Ends with PASS (exit 0), FAIL (exit 1) or SKIP and the reason (exit 77).
set -euo pipefail
# Not root: run again as root of a user namespace with a mount namespace of its own (loopback stays the host's).
if [ "$(id -u)" != 0 ] && [ -z "${HLSCACHE_DISK_FULL_NS:-}" ] && unshare -Urm true 2>/dev/null; then
    HLSCACHE_DISK_FULL_NS=1 exec unshare -Urm "$0" "$@"
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
LIB=$ROOT/scripts/lib
[ -x "$BIN" ] || { echo "FAIL: no hlscache binary at $BIN" >&2; exit 1; }
WORK=$(mktemp -d /tmp/hlscache-disk.XXXXXX)
CACHE=$WORK/cache
ORIGIN_DIR=$WORK/origin
mkdir -p "$CACHE"
MOUNTED=0
cleanup() {
    for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ $MOUNTED = 1 ] && umount "$CACHE" 2>/dev/null || true
    [ "${KEEP:-0}" = 1 ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "FAIL: unexpected error at line $LINENO" >&2; exit 1' ERR
fail() { echo "FAIL: $*" >&2; tail -20 "$WORK/serve.log" >&2 || true; exit 1; }

if mount -t tmpfs -o size=4m tmpfs "$CACHE" 2>/dev/null; then
    MOUNTED=1
    echo "cache on a 4 MiB tmpfs"
else
    # A size cap on a plain directory would test cacheFull, never ENOSPC: that is not what this script proves.
    echo "SKIP: cannot mount a tmpfs here (not root, and no unprivileged user namespaces), so no disk can fill up"
    exit 77
fi
CUSHION=(--free-disk-cushion 256KB)

python3 "$LIB/make-stream.py" "$ORIGIN_DIR" --variants 3 --segments 15 --size 150000 --seed 7
python3 "$LIB/slow-origin.py" "$ORIGIN_DIR" "$WORK/origin.port" --delay 0 --max-seconds 900 &
for _ in $(seq 100); do [ -s "$WORK/origin.port" ] && break; sleep 0.05; done
BASE="http://127.0.0.1:$(cat "$WORK/origin.port")"
check() {
    "$BIN" ls --cache-dir "$CACHE" "${CUSHION[@]}" >/dev/null 2>&1 || true
    python3 "$LIB/check-cache.py" "$CACHE" "$ORIGIN_DIR" "$BASE" "$@" || fail "cache check after $STEP"
}

STEP="fetch of a stream larger than the disk"
out=$("$BIN" fetch "$BASE/master.m3u8" --cache-dir "$CACHE" "${CUSHION[@]}" --id big --json 2>&1) && fail "fetch succeeded on a full disk"
echo "$out" | grep -q '"cacheFull"' || fail "fetch did not fail with cacheFull: $(echo "$out" | tail -3)"
echo "1. $STEP: failed with cacheFull"
check --no-orphans

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$BIN" serve --cache-dir "$CACHE" --listen "127.0.0.1:$PORT" "${CUSHION[@]}" --prefetch-segments 0 --log-level warning >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 200); do curl --max-time 30 -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
proxy() { echo "http://127.0.0.1:$PORT/http/${BASE#http://}/$1"; }
get_exact() {   # path → prints the X-Cache header; fails unless the body is the origin's file
    local headers
    headers=$(curl -sf -D - -o "$WORK/body" "$(proxy "$1")") || fail "$STEP: $1 → request failed"
    cmp -s "$WORK/body" "$ORIGIN_DIR/$1" || fail "$STEP: $1 → bytes differ from the origin"
    echo "$headers" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache"{print $2}'
}

STEP="disk filled to the last byte"
dd if=/dev/zero of="$CACHE/filler" bs=64k 2>/dev/null || true   # ENOSPC ends it
[ "$(df --output=avail -B1 "$CACHE" | tail -1 | tr -d ' ')" -lt 65536 ] || fail "$STEP: the tmpfs did not fill up"
served=0
for s in $(seq -w 0 14); do get_exact "v2/seg00$s.ts" >/dev/null; served=$((served + 1)); done
kill -0 $SERVE_PID || fail "serve died on a full disk"
echo "2. $STEP: $served misses served with exact bytes while nothing could be written"
check
rm -f "$CACHE/filler"
STEP="space freed"
sleep 0.5
cached=0
for s in 00 01 02 03; do
    get_exact "v0/seg00$s.ts" >/dev/null
    # The commit follows the last byte sent: wait for it (a generous bound, not a race against a sleep).
    for _ in $(seq 600); do
        [ "$(get_exact "v0/seg00$s.ts")" = HIT ] && { cached=$((cached + 1)); break; }
        sleep 0.1
    done
done
[ $cached = 4 ] || fail "$STEP: misses are not cached again ($cached/4 became HITs within 60 s)"
echo "3. $STEP: misses cached again (4/4 became HITs)"
kill -TERM $SERVE_PID; wait $SERVE_PID 2>/dev/null || true
"$BIN" fetch "$BASE/v1/index.m3u8" --cache-dir "$CACHE" "${CUSHION[@]}" --seconds 12 --id small --json >"$WORK/small.log" 2>&1 \
    || fail "a fetch that fits did not complete: $(tail -3 "$WORK/small.log")"
echo "4. a fetch that fits (12 s of one variant) completed"
check --no-orphans
echo "PASS"
