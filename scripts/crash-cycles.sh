#!/usr/bin/env bash
# SIGKILLs `hlscache serve` and `hlscache fetch` at random moments while they download (fetch) and fill misses
# for players (serve), then checks the cache after each crash and recovery:
#   - every index row has its file, of the recorded size, with exactly the origin's bytes (SHA-256);
#   - no object file without a row and no temp file once a process has recovered the cache alone;
#   - every player response that completed (curl exit 0) has exactly the origin's bytes;
# and at the end that the interrupted item resumes and completes with every file stored.
#
# usage: scripts/crash-cycles.sh [CYCLES]        (default 50)
# env:   HLSCACHE_BIN (default .build/debug/hlscache), CRASH_SEED (random), KEEP=1 keeps the work directory.
# Loopback only; bounded (every process it starts is killed on exit; the origin stops by itself).
set -euo pipefail
CYCLES=${1:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
LIB=$ROOT/scripts/lib
SEED=${CRASH_SEED:-$RANDOM}
RANDOM=$SEED
[ -x "$BIN" ] || { echo "no hlscache binary at $BIN (swift build first, or set HLSCACHE_BIN)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/hlscache-crash.XXXXXX)
CACHE=$WORK/cache
ORIGIN_DIR=$WORK/origin
cleanup() {
    # Only our own jobs still running (never a pid that may have been reused).
    for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null || true; done
    [ "${KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$LIB/make-stream.py" "$ORIGIN_DIR" --variants 2 --segments 15 --size 150000 --seed "$SEED"
python3 "$LIB/slow-origin.py" "$ORIGIN_DIR" "$WORK/origin.port" --chunk 16384 --delay 0.004 --max-seconds 3600 &
ORIGIN_PID=$!
for _ in $(seq 100); do [ -s "$WORK/origin.port" ] && break; sleep 0.05; done
BASE="http://127.0.0.1:$(cat "$WORK/origin.port")"
MASTER="$BASE/master.m3u8"
mapfile -t SEGMENTS < <(cd "$ORIGIN_DIR" && ls v*/seg*.ts)
echo "seed $SEED, origin $BASE, ${#SEGMENTS[@]} segments, $CYCLES cycles, binary $BIN"

# Whether PID is a child of this script still running. A child that finished was reaped by bash, and its pid may be
# another program's by now (pid_max is 32768 on the test machine, where ~80 pids a second are used): never kill that.
running_child() { # PID
    local stat state ppid
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    read -r state ppid _ <<<"${stat##*) }"
    [ "$state" != Z ] && [ "$ppid" = "$$" ]
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

EXPECTED=$(cd "$ORIGIN_DIR" && find . -name '*.ts' -o -name '*.m3u8' | wc -l)
resets=0 served_ok=0 served_cut=0 served_wrong=0 kills_serve=0 kills_fetch=0 fetch_finished=0 checks=0 start=$(date +%s)

# One player request through the proxy: a completed response must be exactly the origin's file.
player() {
    local port=$1 path=$2 out=$3
    if curl -sf --max-time 30 -o "$out" "http://127.0.0.1:$port/http/${BASE#http://}/$path"; then
        if [[ $path == *.m3u8 ]]; then
            # Rewritten for the proxy: complete means it parses as far as the end tag.
            if head -c 7 "$out" | grep -q '#EXTM3U' && { [[ $path == master.m3u8 ]] || grep -q '#EXT-X-ENDLIST' "$out"; }; then echo ok; else echo WRONG; fi
        elif cmp -s "$out" "$ORIGIN_DIR/$path"; then echo ok; else echo WRONG; fi
    else
        echo cut
    fi
}

for cycle in $(seq 1 "$CYCLES"); do
    mode=$((cycle % 3))   # 0: fetch only, 1: serve only, 2: both
    SERVE_PID="" FETCH_PID="" PLAYERS=()
    if [ $mode -ne 0 ]; then
        PORT=$(free_port)
        "$BIN" serve --cache-dir "$CACHE" --listen "127.0.0.1:$PORT" --free-disk-cushion 0 --log-level error >>"$WORK/serve.log" 2>&1 &
        SERVE_PID=$!
        for _ in $(seq 200); do curl --max-time 30 -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
        mkdir -p "$WORK/dl"
        PLAYERS=()
        for i in $(seq 1 6); do
            seg=${SEGMENTS[$((RANDOM % ${#SEGMENTS[@]}))]}
            [ "$i" -eq 1 ] && seg=master.m3u8
            [ "$i" -eq 2 ] && seg=v$((RANDOM % 2))/index.m3u8
            (player "$PORT" "$seg" "$WORK/dl/$cycle-$i" >"$WORK/dl/$cycle-$i.result") &
            PLAYERS+=($!)
        done
    fi
    if [ $mode -ne 1 ]; then
        "$BIN" fetch "$MASTER" --cache-dir "$CACHE" --free-disk-cushion 0 --id crash --json >>"$WORK/fetch.log" 2>&1 &
        FETCH_PID=$!
    fi
    # A random moment between 0.1 and 2.5 s, then SIGKILL (fetch and serve in random order).
    sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
    sleep $((RANDOM % 2))
    sleep "$(printf '0.%03d' $((RANDOM % 500)))"
    victims=()
    [ -n "$FETCH_PID" ] && victims+=("$FETCH_PID")
    [ -n "$SERVE_PID" ] && victims+=("$SERVE_PID")
    [ $((RANDOM % 2)) -eq 0 ] && victims=($(printf '%s\n' "${victims[@]}" | tac))
    for pid in "${victims[@]}"; do
        if running_child "$pid" && kill -9 "$pid" 2>/dev/null; then
            [ "$pid" = "$FETCH_PID" ] && kills_fetch=$((kills_fetch + 1)) || kills_serve=$((kills_serve + 1))
        elif [ "$pid" = "$FETCH_PID" ]; then
            fetch_finished=$((fetch_finished + 1))
        fi
        wait "$pid" 2>/dev/null || true
    done
    for pid in "${PLAYERS[@]}"; do wait "$pid" 2>/dev/null || true; done   # they end once the server is gone
    if [ $mode -ne 0 ]; then
        for f in "$WORK"/dl/"$cycle"-*.result; do
            case $(cat "$f") in
                ok) served_ok=$((served_ok + 1)) ;;
                cut) served_cut=$((served_cut + 1)) ;;
                *) served_wrong=$((served_wrong + 1)); echo "cycle $cycle: a completed response differs from the origin" >&2 ;;
            esac
        done
        rm -f "$WORK"/dl/"$cycle"-*
    fi
    # Restart alone on the cache (exclusive recovery), then check files against the index and the origin.
    if ! "$BIN" ls --cache-dir "$CACHE" --free-disk-cushion 0 >/dev/null 2>"$WORK/ls.log"; then
        echo "cycle $cycle (mode $mode): ls failed: $(tail -3 "$WORK/ls.log")" >&2
        KEEP=1; exit 1
    fi
    checked=0
    result=$(python3 "$LIB/check-cache.py" "$CACHE" "$ORIGIN_DIR" "$BASE" --no-orphans 2>"$WORK/check.log") || checked=$?
    if [ "$checked" -ne 0 ]; then
        # Its exit status too: once it printed no problem yet exited non-zero (a signal: > 128).
        echo "cycle $cycle (mode $mode): check-cache.py exited $checked: $result $(cat "$WORK/check.log")" >&2
        KEEP=1; exit 1
    fi
    checks=$((checks + 1))
    [ $((cycle % 10)) -eq 0 ] && echo "cycle $cycle: $result"
    # Once everything is stored, start over (rm evicts the item's objects) so every cycle kills real downloads;
    # the last cycles keep their partial item for the final resume.
    verified=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["verified"])' "$result")
    if [ "$verified" -ge "$EXPECTED" ] && [ "$cycle" -lt "$CYCLES" ]; then
        "$BIN" rm crash --cache-dir "$CACHE" --free-disk-cushion 0 >/dev/null 2>&1 || true
        resets=$((resets + 1))
    fi
done

[ "$served_wrong" -eq 0 ] || { echo "FAIL: $served_wrong completed responses had wrong bytes" >&2; exit 1; }

# The interrupted item resumes and completes: every playlist and segment stored with the origin's bytes.
"$BIN" fetch "$MASTER" --cache-dir "$CACHE" --free-disk-cushion 0 --id crash --json >>"$WORK/fetch.log" 2>&1 || {
    echo "FAIL: the final fetch did not complete" >&2; tail -5 "$WORK/fetch.log" >&2; exit 1; }
"$BIN" ls --cache-dir "$CACHE" --free-disk-cushion 0 >/dev/null
final=$(python3 "$LIB/check-cache.py" "$CACHE" "$ORIGIN_DIR" "$BASE" --no-orphans) || { echo "FAIL: final check: $final" >&2; exit 1; }
expected=$EXPECTED
verified=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["verified"])' "$final")
[ "$verified" -ge "$expected" ] || { echo "FAIL: only $verified of $expected origin files stored after the resume" >&2; exit 1; }
echo "final: $final"
echo "PASS: $CYCLES cycles in $(( $(date +%s) - start )) s; SIGKILLs: fetch $kills_fetch, serve $kills_serve" \
     "(fetch finished before its kill: $fetch_finished); player responses: $served_ok complete and exact," \
     "$served_cut cut off (honest), $served_wrong wrong; $checks cache checks clean; $resets complete downloads removed to start over; resumed item complete ($verified/$expected files)"
