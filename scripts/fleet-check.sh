#!/usr/bin/env bash
# Proves a fleet behind HAProxy (scripts/fleet.sh, docs/scale-out.md) with real players, on loopback:
#   1. ffmpeg plays a two-variant AES-128 stream through the balancer, keys included, frame for frame as from the
#      origin;
#   2. on default read-ahead (prefetch.through: the balancer), across the fleet every segment and key was fetched
#      from the origin exactly once, and every object is stored on exactly one node;
#   3. a node killed during playback: ffmpeg plays on to the end, frame for frame, once the balancer moves its
#      share to the other nodes;
#   4. `hlscache fetch --through BALANCER --seconds 10` of another stream takes each segment from the origin once
#      (the nodes' read-ahead included), then the origin stopped: its first 10 s play through the balancer, frame
#      for frame;
#   5. the same through the admin API: an item posted with `"through": BALANCER` to a fourth, standalone `serve`
#      lands its segments on the fleet (the origin saw each once); with the origin stopped its first 10 s play
#      through the balancer, frame for frame.
# Prints "PASS: fleet of 3" at the end; exits non-zero on the first failed check.
#
# usage: scripts/fleet-check.sh        env: HLSCACHE_BIN (.build/debug/hlscache), KEEP=1 keeps the work directory.
# Loopback only; bounded (the origin stops by itself, everything started here is stopped on exit).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export HLSCACHE_BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
# Every process started here logs its access lines (info), for a failure to say which node served what and how.
export HLSCACHE_LOG_LEVEL=info
# And the balancer its requests (scripts/fleet.sh).
export FLEET_LOG_REQUESTS=1
WORK=$(mktemp -d /tmp/hlscache-fleet-check.XXXXXX)
export FLEET_DIR=$WORK/fleet
fail() {
    echo "FAIL: $*" >&2
    # The origin's requests since the step began (method, path, time, client port: one connection or several).
    [ -s "$WORK/origin.log" ] && { echo "origin.log (last 40 requests):" >&2; tail -40 "$WORK/origin.log" >&2; }
    # What the balancer saw of its nodes (a node taken DOWN moves its share of the paths to the others) and where it
    # sent the last requests (node, status, retries: a '+' before them is a request sent on to another node).
    [ -s "$FLEET_DIR/haproxy.log" ] && {
        echo "haproxy.log (node states, then the last 60 requests):" >&2
        grep -v ' "[A-Z]* /' "$FLEET_DIR/haproxy.log" | tail -20 >&2
        grep ' "[A-Z]* /' "$FLEET_DIR/haproxy.log" | grep -v 'readyz' | tail -60 >&2
    }
    for pidfile in "$FLEET_DIR"/haproxy.pid.own "$FLEET_DIR"/node*/pid; do
        [ -e "$pidfile" ] && { kill -0 "$(cat "$pidfile")" 2>/dev/null && echo "$pidfile: $(cat "$pidfile") running" || echo "$pidfile: $(cat "$pidfile") gone"; } >&2
    done
    # What the nodes and the standalone serve logged (the work directory goes with the script): the access lines of
    # an object fetched more than once (which node served it how: MISS, COALESCED, HIT), then each log's last lines.
    for path in ${repeated:-}; do
        echo "access lines for $path:" >&2
        grep -H -F "$path" "$FLEET_DIR"/node*/serve.log "$WORK/standalone.log" 2>/dev/null | tail -20 >&2 || true
    done
    for log in "$FLEET_DIR"/node*/serve.log "$WORK/standalone.log"; do
        [ -s "$log" ] && { echo "$log (last 40 lines):" >&2; tail -40 "$log" >&2; }
    done
    exit 1
}
cleanup() {
    "$ROOT/scripts/fleet.sh" stop >/dev/null 2>&1 || true
    for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null || true; done
    [ "${KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

# Four consecutive free ports: the balancer, then the nodes.
ports_free() { python3 - "$1" "$2" <<'EOF'
import socket, sys
base, count = int(sys.argv[1]), int(sys.argv[2])
for port in range(base, base + count):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
EOF
}
# Below the ephemeral range (32768 and up on Linux): a port of it, free when checked, can be taken by any outgoing
# connection before a node binds it (the streams are made in between), and then that node cannot start.
for _ in $(seq 50); do
    base=$((20000 + RANDOM % 12000))
    ports_free "$base" 5 && break
done
export BALANCER_PORT=$base NODE_PORT=$((base + 1))
# The standalone serve of step 5, outside the fleet.
STANDALONE_PORT=$((base + 4))

# The streams: two variants, AES-128, 2 s segments.
ORIGIN=$WORK/origin
mkdir -p "$ORIGIN"
head -c 16 /dev/urandom >"$ORIGIN/stream.key"
printf '/stream.key\n%s\n%s\n' "$ORIGIN/stream.key" "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$WORK/keyinfo"
make_stream() { # DIR SECONDS
    mkdir -p "$1"
    ffmpeg -v error -y -f lavfi -i "testsrc=size=320x180:rate=25:duration=$2" -f lavfi -i "sine=frequency=440:duration=$2" \
        -map 0:v -map 1:a -map 0:v -map 1:a -c:v libx264 -preset ultrafast -g 50 -pix_fmt yuv420p -c:a aac \
        -s:v:1 160x90 -b:v:0 600k -b:v:1 200k \
        -f hls -hls_time 2 -hls_playlist_type vod -hls_key_info_file "$WORK/keyinfo" \
        -master_pl_name master.m3u8 -var_stream_map "v:0,a:0 v:1,a:1" \
        -hls_segment_filename "$1/v%v/seg%03d.ts" "$1/v%v/index.m3u8"
    [ -s "$1/master.m3u8" ] || fail "ffmpeg made no stream in $1"
}
make_stream "$ORIGIN" 12
# A second stream, 20 s, that only step 4 uses (nothing else warms it), and a third for step 5.
make_stream "$ORIGIN/second" 20
make_stream "$ORIGIN/third" 20

python3 "$ROOT/scripts/lib/slow-origin.py" "$ORIGIN" "$WORK/origin.port" --chunk 65536 --delay 0 --max-seconds 900 \
    --log "$WORK/origin.log" &
ORIGIN_PID=$!
for _ in $(seq 600); do [ -s "$WORK/origin.port" ] && break; sleep 0.1; done
ORIGIN_URL="http://127.0.0.1:$(cat "$WORK/origin.port")"

frames() { # URL [extra ffmpeg input options]
    local url=$1
    shift
    ffmpeg -v error -nostdin "$@" -i "$url" -map 0:v:0 -f framemd5 - | grep -v '^#'
}
frames "$ORIGIN_URL/master.m3u8" >"$WORK/direct.md5"
frames "$ORIGIN_URL/second/master.m3u8" -t 10 >"$WORK/second.md5"
frames "$ORIGIN_URL/third/master.m3u8" -t 10 >"$WORK/third.md5"
[ -s "$WORK/direct.md5" ] || fail "ffmpeg decoded nothing from the origin"
: >"$WORK/origin.log"

"$ROOT/scripts/fleet.sh" start 3
BALANCER="http://127.0.0.1:$BALANCER_PORT"
PROXIED="$BALANCER/http/127.0.0.1:$(cat "$WORK/origin.port")/master.m3u8"

# 1. Played through the balancer, keys included.
frames "$PROXIED" >"$WORK/fleet.md5"
cmp -s "$WORK/direct.md5" "$WORK/fleet.md5" || fail "frames through the fleet differ from the origin's ($(wc -l <"$WORK/fleet.md5") vs $(wc -l <"$WORK/direct.md5") frames)"
curl -fsS "$BALANCER/http/127.0.0.1:$(cat "$WORK/origin.port")/v0/index.m3u8" | grep -q 'URI="/keys/[0-9a-f]\{32\}/http/' \
    || fail "the key URI is not rewritten to /keys/{id}/…"
echo "ok: two-variant AES-128 stream through the balancer, $(wc -l <"$WORK/fleet.md5") frames as from the origin"

# 2. One origin fetch per object across the fleet (read-ahead on, through the balancer), one node per object.
segments=$(grep -c '\.ts' "$WORK/origin.log" || true)
[ "$segments" -gt 0 ] || fail "the origin saw no segment request"
repeated=$(awk '{print $2}' "$WORK/origin.log" | grep -E '\.(ts|key)' | sort | uniq -d)
[ -z "$repeated" ] || fail "objects fetched from the origin more than once across the fleet: $repeated"
grep -q 'stream.key' "$WORK/origin.log" || fail "the key was never fetched"
# A node commits a segment to its index just after the last byte went out: on a loaded machine the last ones may
# still be on their way when ffmpeg is done, so the check waits for them (at most 60 s).
python3 - "$FLEET_DIR" "$segments" <<'EOF' || fail "an object is stored on more than one node, or a segment on none"
import glob, sqlite3, sys, time
deadline = time.monotonic() + 60
while True:
    where = {}
    for db in sorted(glob.glob(sys.argv[1] + "/node*/cache/index.sqlite")):
        node = db.split("/")[-3]
        for (key,) in sqlite3.connect(db).execute("SELECT key FROM objects"):
            where.setdefault(key, []).append(node)
    shared = {k: v for k, v in where.items() if len(v) > 1}
    segments = [k for k in where if k.endswith(".ts")]
    nodes = {n for v in where.values() for n in v}
    if shared or len(segments) >= int(sys.argv[2]) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(f"{'ok' if not shared else 'FAIL'}: {len(where)} objects ({len(segments)} segments, {sys.argv[2]} fetched) on {len(nodes)} nodes")
for key, on in shared.items():
    print(f"  on {', '.join(on)}: {key}")
sys.exit(1 if shared or len(segments) != int(sys.argv[2]) or len(nodes) < 2 else 0)
EOF

# 3. A node killed during playback: the one holding the last segment, while ffmpeg reads in real time (that segment
#    is asked for ~10 s in, after the kill).
victim=$(python3 - "$FLEET_DIR" <<'EOF'
import glob, sqlite3, sys
for db in sorted(glob.glob(sys.argv[1] + "/node*/cache/index.sqlite")):
    if any(k.endswith("/v0/seg005.ts") for (k,) in sqlite3.connect(db).execute("SELECT key FROM objects")):
        print(db.split("/")[-3])
EOF
)
[ -n "$victim" ] || fail "no node holds v0/seg005.ts"
: >"$WORK/origin.log"
frames "$PROXIED" -re >"$WORK/killed.md5" &
player=$!
sleep 3
victim_pid=$(cat "$FLEET_DIR/$victim/pid")
# Only our node: its command line names its own cache (never a pid that may have been reused by another process).
tr '\0' ' ' <"/proc/$victim_pid/cmdline" 2>/dev/null | grep -q -- "--cache-dir $FLEET_DIR/$victim/cache" \
    || fail "$victim's pid $victim_pid is not its serve process: $(tr '\0' ' ' <"/proc/$victim_pid/cmdline" 2>/dev/null)"
kill -9 "$victim_pid"
wait "$player" || fail "ffmpeg failed after $victim was killed"
cmp -s "$WORK/direct.md5" "$WORK/killed.md5" || fail "frames differ after $victim was killed"
grep -q 'v0/seg005.ts' "$WORK/origin.log" || fail "the killed node's segment was not fetched again by another node"
echo "ok: $victim killed during playback, ffmpeg played to the end frame for frame ($(grep -c '\.ts' "$WORK/origin.log" || true) segments fetched again by the others)"
# 4. Prewarm through the balancer, then play offline.
: >"$WORK/origin.log"
"$HLSCACHE_BIN" fetch "$ORIGIN_URL/second/master.m3u8" --seconds 10 --through "$BALANCER" --cache-dir "$WORK/fetcher" >"$WORK/fetch.log" 2>&1 \
    || fail "fetch --through failed: $(tail -5 "$WORK/fetch.log")"
repeated=$(awk '{print $2}' "$WORK/origin.log" | grep -E '/second/.*\.ts' | sort | uniq -d)
[ -z "$repeated" ] || fail "fetch --through: segments fetched from the origin more than once across the fleet: $repeated"
echo "ok: fetch --through --seconds 10: $(grep -c '/second/.*\.ts' "$WORK/origin.log" || true) segment requests at the origin, each segment once"
# 5. The admin API's `through`: a standalone serve (not a fleet node) downloads an item through the balancer.
"$HLSCACHE_BIN" serve --cache-dir "$WORK/standalone" --listen "127.0.0.1:$STANDALONE_PORT" --log-level notice \
    >"$WORK/standalone.log" 2>&1 &
API="http://127.0.0.1:$STANDALONE_PORT/api/v1"
for _ in $(seq 600); do curl --max-time 30 -fsS -o /dev/null "http://127.0.0.1:$STANDALONE_PORT/readyz" 2>/dev/null && break; sleep 0.1; done
: >"$WORK/origin.log"
curl -fsS -X POST -H 'Content-Type: application/json' "$API/items" \
    -d "{\"url\": \"$ORIGIN_URL/third/master.m3u8\", \"seconds\": 10, \"id\": \"through-api\", \"through\": \"$BALANCER\"}" \
    >"$WORK/posted.json" || fail "POST /api/v1/items with through was refused: $(cat "$WORK/posted.json" 2>/dev/null)"
[ "$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("through"))' <"$WORK/posted.json")" = "$BALANCER" ] \
    || fail "the item does not show its through: $(cat "$WORK/posted.json")"
state=""
for _ in $(seq 1200); do
    state=$(curl -fsS "$API/items/through-api" | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])')
    case "$state" in cached | partiallyCached | failed) break ;; esac
    sleep 0.1
done
[ "$state" = cached ] || [ "$state" = partiallyCached ] || fail "the item posted with through ended $state: $(curl -fsS "$API/items/through-api")"
third_segments=$(grep -c '/third/.*\.ts' "$WORK/origin.log" || true)
[ "$third_segments" -gt 0 ] || fail "the origin saw no segment of the item posted with through"
repeated=$(awk '{print $2}' "$WORK/origin.log" | grep -E '/third/.*\.(ts|m3u8)' | sort | uniq -d)
[ -z "$repeated" ] || fail "resources of the item posted with through fetched from the origin more than once: $repeated"
on_fleet=$(python3 - "$FLEET_DIR" "$third_segments" <<'EOF'
import glob, sqlite3, sys, time
deadline = time.monotonic() + 60
while True:
    count = sum(1 for db in glob.glob(sys.argv[1] + "/node*/cache/index.sqlite")
                for (k,) in sqlite3.connect(db).execute("SELECT key FROM objects") if "/third/" in k and k.endswith(".ts"))
    if count >= int(sys.argv[2]) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(count)
EOF
)
[ "$on_fleet" = "$third_segments" ] || fail "$third_segments segments fetched for the item, $on_fleet of them on the fleet's nodes"
echo "ok: POST /api/v1/items with through to a standalone serve: $third_segments segments fetched once each, all on the fleet's nodes"

kill "$ORIGIN_PID"
wait "$ORIGIN_PID" 2>/dev/null || true
curl -s -o /dev/null "$ORIGIN_URL/second/master.m3u8" && fail "the origin still answers"
frames "$BALANCER/http/127.0.0.1:$(cat "$WORK/origin.port")/second/master.m3u8" -t 10 >"$WORK/second-offline.md5" \
    || fail "the prewarmed first 10 s do not play through the balancer with the origin stopped"
cmp -s "$WORK/second.md5" "$WORK/second-offline.md5" || fail "frames of the prewarmed part differ ($(wc -l <"$WORK/second-offline.md5") vs $(wc -l <"$WORK/second.md5"))"
echo "ok: fetch --through --seconds 10, origin stopped: the first 10 s play through the balancer frame for frame ($(wc -l <"$WORK/second.md5") frames)"
frames "$BALANCER/http/127.0.0.1:$(cat "$WORK/origin.port")/third/master.m3u8" -t 10 >"$WORK/third-offline.md5" \
    || fail "the first 10 s of the item posted with through do not play through the balancer with the origin stopped"
cmp -s "$WORK/third.md5" "$WORK/third-offline.md5" || fail "frames of the item posted with through differ ($(wc -l <"$WORK/third-offline.md5") vs $(wc -l <"$WORK/third.md5"))"
echo "ok: the item posted with through, origin stopped: its first 10 s play through the balancer frame for frame"
echo "PASS: fleet of 3"
