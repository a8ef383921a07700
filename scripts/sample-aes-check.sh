#!/usr/bin/env bash
# Keys of other methods through `hlscache serve`, with a real player, on loopback (issue 31; docs/keys.md):
#   1. a SAMPLE-AES MPEG-TS stream (H.264 encrypted by scripts/lib/sample-aes.py, muxed by ffmpeg) with an http key
#      URI plays through the proxy with ffmpeg frame for frame as from the origin, and decrypts (its frames are
#      the clear stream's); the served playlist points the key at /keys/{id}/…; the key is nowhere in the cache
#      directory in the clear;
#   2. `hlscache fetch` of it into a fresh cache, then the origin stopped: a `serve` on that cache serves the key and
#      ffmpeg plays the stream, frame for frame;
#   3. the same offline check for an AES-256 playlist: its 32-byte key is served from /keys/ with the origin
#      stopped, and sealed on disk. (ffmpeg 5 does not decrypt AES-256 HLS, so nothing plays it here.)
# Prints "PASS: sample-aes" at the end; exits non-zero on the first failed check.
#
# usage: scripts/sample-aes-check.sh        env: HLSCACHE_BIN (.build/debug/hlscache), KEEP=1 keeps the work directory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
WORK=$(mktemp -d /tmp/hlscache-sample-aes.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() {
    for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
    [ "${KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
python3 -c 'import cryptography' 2>/dev/null || fail "python3 cannot import cryptography (apt-get install python3-cryptography)"

# The stream: H.264 without emulation prevention bytes in its slices (ffmpeg's decryption hands the decoder a slice
# without them, so with them the decoded pictures would differ from the clear stream's), 25 fps, 12 s, 2 s segments.
ORIGIN=$WORK/origin
mkdir -p "$ORIGIN/clear" "$ORIGIN/sa" "$ORIGIN/aes256"
head -c 16 /dev/urandom >"$ORIGIN/sa/sample.key"
head -c 32 /dev/urandom >"$ORIGIN/aes256/aes256.key"
IV=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
chosen=""
for crf in 35 37 39 41 33; do
    ffmpeg -v error -y -f lavfi -i "testsrc=size=320x180:rate=25:duration=12" -c:v libx264 -preset ultrafast -bf 0 -g 50 \
        -crf "$crf" -pix_fmt yuv420p -f h264 "$WORK/clear.h264"
    escaped=$(python3 - "$ROOT/scripts/lib/sample-aes.py" "$WORK/clear.h264" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("sa", sys.argv[1]); sa = importlib.util.module_from_spec(spec); spec.loader.exec_module(sa)
units = sa.split_nal_units(open(sys.argv[2], "rb").read())
print(sum(1 for _, nal in units if nal and (nal[0] & 0x1F) in (1, 5) and sa.remove_epb(nal) != nal))
EOF
)
    [ "$escaped" = 0 ] && { chosen=$crf; break; }
done
[ -n "$chosen" ] || fail "no test encoding without emulation prevention bytes in its slices"
encrypted=$(python3 "$ROOT/scripts/lib/sample-aes.py" "$WORK/clear.h264" "$WORK/sa.h264" "$ORIGIN/sa/sample.key" "$IV")
segment() { # IN.h264 DIR
    ffmpeg -v quiet -y -r 25 -f h264 -i "$1" -c copy -f hls -hls_time 2 -hls_playlist_type vod \
        -hls_segment_filename "$2/seg%03d.ts" "$2/plain.m3u8"
}
segment "$WORK/clear.h264" "$ORIGIN/clear"
segment "$WORK/sa.h264" "$ORIGIN/sa"
cp "$ORIGIN/clear"/seg*.ts "$ORIGIN/aes256/"

python3 "$ROOT/scripts/lib/slow-origin.py" "$ORIGIN" "$WORK/origin.port" --chunk 65536 --delay 0 --max-seconds 900 \
    --log "$WORK/origin.log" &
ORIGIN_PID=$!
for _ in $(seq 600); do [ -s "$WORK/origin.port" ] && break; sleep 0.1; done
ORIGIN_URL="http://127.0.0.1:$(cat "$WORK/origin.port")"
# The key tags, with absolute http key URIs.
sed "s|^#EXT-X-MEDIA-SEQUENCE:0\$|&\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"$ORIGIN_URL/sa/sample.key\",IV=0x$IV|" \
    "$ORIGIN/sa/plain.m3u8" >"$ORIGIN/sa/index.m3u8"
sed "s|^#EXT-X-MEDIA-SEQUENCE:0\$|&\n#EXT-X-KEY:METHOD=AES-256,URI=\"$ORIGIN_URL/aes256/aes256.key\",IV=0x$IV|" \
    "$ORIGIN/clear/plain.m3u8" >"$ORIGIN/aes256/index.m3u8"
grep -q 'METHOD=SAMPLE-AES' "$ORIGIN/sa/index.m3u8" || fail "the SAMPLE-AES playlist has no key tag"

# One decoding thread: with frame threads ffmpeg's picture for the last, damaged slice of this stream (the decryption
# at the end of the stream) varies from run to run — decoded from the origin itself, 4 of 25 runs at load 15 gave
# another last frame (dts 299). With one thread, every run gives the same 300 frames.
frames() { ffmpeg -v error -nostdin -threads 1 -i "$1" -map 0:v:0 -f framemd5 - 2>/dev/null | grep -v '^#'; }
frames "$ORIGIN_URL/sa/index.m3u8" >"$WORK/direct.md5"
frames "$ORIGIN_URL/clear/plain.m3u8" >"$WORK/clear.md5"
total=$(wc -l <"$WORK/direct.md5")
[ "$total" -ge 250 ] || fail "ffmpeg decoded $total frames of the SAMPLE-AES stream from the origin"
same=$(paste -d' ' <(cut -d, -f6 "$WORK/direct.md5") <(cut -d, -f6 "$WORK/clear.md5") | awk '$1 == $2' | wc -l)
# The decrypted pictures are the clear stream's (a wrong key or IV leaves none): the stream is SAMPLE-AES as ffmpeg
# reads it. (The last two pictures of ffmpeg's own muxing of a raw stream may come out otherwise.)
[ "$same" -ge $((total * 95 / 100)) ] || fail "only $same of $total frames decrypted from the origin match the clear stream"
echo "ok: SAMPLE-AES stream made ($encrypted slices encrypted, crf $chosen); ffmpeg decrypts it from the origin ($same of $total frames as the clear stream)"

start_serve() { # CACHE_DIR LOG -> sets SERVE_PID, PROXY
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$BIN" serve --cache-dir "$1" --listen "127.0.0.1:$port" --log-level notice >"$2" 2>&1 &
    SERVE_PID=$!
    PROXY="http://127.0.0.1:$port"
    for _ in $(seq 600); do curl --max-time 30 -fsS -o /dev/null "$PROXY/readyz" 2>/dev/null && return 0; sleep 0.1; done
    fail "serve did not become ready: $(tail -5 "$2")"
}
no_plain_key() { # KEYFILE DIR
    python3 - "$1" "$2" <<'EOF'
import os, sys
key = open(sys.argv[1], "rb").read()
for directory, _, files in os.walk(sys.argv[2]):
    for name in files:
        with open(os.path.join(directory, name), "rb") as f:
            if key in f.read():
                sys.exit(f"the key is in the clear in {os.path.join(directory, name)}")
EOF
}

# 1. Through the proxy (the origin's log from here on: the proxy's requests only).
: >"$WORK/origin.log"
start_serve "$WORK/cache" "$WORK/serve.log"
PROXIED="/http/127.0.0.1:$(cat "$WORK/origin.port")"
curl -fsS "$PROXY$PROXIED/sa/index.m3u8" >"$WORK/served.m3u8" || fail "the SAMPLE-AES playlist was not served"
grep -q "^#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"/keys/[0-9a-f]\{32\}/http/127.0.0.1:[0-9]*/sa/sample.key\",IV=0x$IV\$" "$WORK/served.m3u8" \
    || fail "the SAMPLE-AES key URI is not under /keys/: $(grep KEY "$WORK/served.m3u8")"
frames "$PROXY$PROXIED/sa/index.m3u8" >"$WORK/proxied.md5"
differ() { # which frames differ, and what the proxy logged: enough to tell a wrong key from a wrong segment
    paste -d' ' <(cut -d, -f2,6 "$WORK/direct.md5") <(cut -d, -f6 "$WORK/proxied.md5") \
        | awk '$2 != $3 { n++; if (n <= 5) printf "%s ", $1 } END { printf "(%d frames differ)", n }'
    echo; grep -v '" 200 \|" 206 ' "$WORK/serve.log" | tail -5
    # Each segment and the key as the proxy serves them now, against the origin's files: a wrong byte stored or
    # served shows here; all equal points at the player's read (a response cut short, a different read order).
    for file in "$ORIGIN"/sa/seg*.ts "$ORIGIN/sa/sample.key"; do
        name=${file##*/}
        if [ "$name" = sample.key ]; then
            url="$PROXY$(grep -o '/keys/[0-9a-f]\{32\}/[^"]*' "$WORK/served.m3u8")"
        else
            url="$PROXY$PROXIED/sa/$name"
        fi
        curl -fsS "$url" -o "$WORK/check.$name" 2>/dev/null || { echo "$name: not served"; continue; }
        cmp -s "$file" "$WORK/check.$name" || echo "$name: served bytes differ from the origin's ($(cmp "$file" "$WORK/check.$name" 2>&1 | head -1))"
    done
    echo "segments and key checked against the origin's; origin requests made more than once by the proxy: $(awk '{print $2}' "$WORK/origin.log" | sort | uniq -c | awk '$1 > 1' | tr '\n' ' ')"
}
cmp -s "$WORK/direct.md5" "$WORK/proxied.md5" \
    || fail "frames through the proxy differ from the origin's ($(wc -l <"$WORK/proxied.md5") vs $total): $(differ)"
no_plain_key "$ORIGIN/sa/sample.key" "$WORK/cache" || fail "SAMPLE-AES key in the clear on disk"
echo "ok: ffmpeg plays the SAMPLE-AES stream through the proxy frame for frame ($total frames), key at /keys/…, sealed on disk"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true

# 2 and 3. Prewarmed into a fresh cache, then the origin stopped.
"$BIN" fetch "$ORIGIN_URL/sa/index.m3u8" --cache-dir "$WORK/offline" >"$WORK/fetch-sa.log" 2>&1 || fail "fetch failed: $(tail -5 "$WORK/fetch-sa.log")"
"$BIN" fetch "$ORIGIN_URL/aes256/index.m3u8" --cache-dir "$WORK/offline" >"$WORK/fetch-256.log" 2>&1 || fail "fetch of the AES-256 stream failed: $(tail -5 "$WORK/fetch-256.log")"
kill "$ORIGIN_PID"; wait "$ORIGIN_PID" 2>/dev/null || true
curl -s -o /dev/null "$ORIGIN_URL/sa/index.m3u8" && fail "the origin still answers"
start_serve "$WORK/offline" "$WORK/serve-offline.log"
curl -fsS "$PROXY$PROXIED/sa/index.m3u8" >"$WORK/offline-sa.m3u8" || fail "the prewarmed SAMPLE-AES playlist is not served offline"
key_path=$(grep -o '/keys/[0-9a-f]\{32\}/[^"]*' "$WORK/offline-sa.m3u8")
curl -fsS "$PROXY$key_path" -o "$WORK/sa.key.served" || fail "the SAMPLE-AES key is not served with the origin stopped"
cmp -s "$WORK/sa.key.served" "$ORIGIN/sa/sample.key" || fail "the SAMPLE-AES key served offline is not the origin's"
frames "$PROXY$PROXIED/sa/index.m3u8" >"$WORK/offline.md5"
cmp -s "$WORK/direct.md5" "$WORK/offline.md5" || fail "the prewarmed SAMPLE-AES stream does not play offline frame for frame ($(wc -l <"$WORK/offline.md5") vs $total)"
echo "ok: fetch, origin stopped: the SAMPLE-AES key is served from /keys/ and ffmpeg plays the stream frame for frame"
curl -fsS "$PROXY$PROXIED/aes256/index.m3u8" >"$WORK/offline-256.m3u8" || fail "the prewarmed AES-256 playlist is not served offline"
grep -q '^#EXT-X-KEY:METHOD=AES-256,URI="/keys/[0-9a-f]\{32\}/http/' "$WORK/offline-256.m3u8" || fail "the AES-256 key URI is not under /keys/"
key_path=$(grep -o '/keys/[0-9a-f]\{32\}/[^"]*' "$WORK/offline-256.m3u8")
curl -fsS "$PROXY$key_path" -o "$WORK/256.key.served" || fail "the AES-256 key is not served with the origin stopped"
cmp -s "$WORK/256.key.served" "$ORIGIN/aes256/aes256.key" || fail "the AES-256 key served offline is not the origin's 32 bytes"
for key in "$ORIGIN/sa/sample.key" "$ORIGIN/aes256/aes256.key"; do
    no_plain_key "$key" "$WORK/offline" || fail "a prewarmed key is in the clear on disk ($key)"
done
echo "ok: fetch, origin stopped: the AES-256 key (32 bytes) is served from /keys/, sealed on disk (ffmpeg 5 does not decrypt AES-256)"
echo "PASS: sample-aes"
