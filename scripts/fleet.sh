#!/usr/bin/env bash
# A fleet of hlscache nodes behind HAProxy on this machine, for machines without a container engine (the
# container equivalent is Docker/compose-fleet.yaml; docs/scale-out.md explains both).
#
#   scripts/fleet.sh start N     N `hlscache serve` processes on 127.0.0.1:NODE_PORT.. and HAProxy on BALANCER_PORT,
#                                hashing the request path consistently over them (balance uri + hash-type consistent),
#                                health-checked on /readyz
#   scripts/fleet.sh stop        stops HAProxy and every node
#   scripts/fleet.sh status      the balancer and each node, up or not
#
# env: FLEET_DIR (/tmp/hlscache-fleet: caches, logs, pid files, generated configs), HLSCACHE_BIN
#      (.build/debug/hlscache), BALANCER_PORT (8080), NODE_PORT (18081: the first node's port), HLSCACHE_CONFIG (a
#      config file every node reads; default: the one written to FLEET_DIR), FLEET_LOG_REQUESTS (1: HAProxy logs
#      every request to FLEET_DIR/haproxy.log). Loopback only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HLSCACHE_BIN:-$ROOT/.build/debug/hlscache}
DIR=${FLEET_DIR:-/tmp/hlscache-fleet}
BALANCER_PORT=${BALANCER_PORT:-8080}
NODE_PORT=${NODE_PORT:-18081}

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }

wait_ready() { # URL (a debug build starting on a loaded machine can take a minute or more)
    for _ in $(seq 1800); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "fleet: $1 did not become ready within 180 s" >&2
    return 1
}

# Waits until HAProxy marks all COUNT nodes UP. A node ready on its own port is not yet on the ring: HAProxy starts
# with every server UP, takes one whose first check fails (not listening yet: a debug build starts slowly on a
# loaded machine) DOWN, and brings it back only after 'rise' checks. Requests sent meanwhile hash onto the ring
# without it, and the same path asked again once it is back (or once another node is back) lands on another node:
# one object stored on two nodes.
wait_balanced() { # COUNT
    for _ in $(seq 1800); do
        [ "$(servers_up)" = "$1" ] && return 0
        sleep 0.1
    done
    echo "fleet: HAProxy did not mark the $1 nodes UP within 180 s: $(servers_states | tr '\n' ' ')" >&2
    return 1
}

# Each node's state as HAProxy sees it, one "node1 UP" a line.
servers_states() {
    python3 - "$DIR/haproxy.sock" <<'EOF' 2>/dev/null || true
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
for line in data.decode().splitlines():
    fields = line.split(",")
    if len(fields) > 17 and fields[0] == "nodes" and fields[1] not in ("BACKEND", "FRONTEND"):
        print(fields[1], fields[17])
EOF
}

servers_up() { servers_states | grep -c ' UP$' || true; }

start() {
    local count=$1
    [[ $count =~ ^[1-9][0-9]*$ ]] || usage
    [ -x "$BIN" ] || { echo "fleet: no hlscache binary at $BIN (swift build first, or set HLSCACHE_BIN)" >&2; exit 2; }
    command -v haproxy >/dev/null || { echo "fleet: haproxy is not installed (apt-get install haproxy)" >&2; exit 2; }
    mkdir -p "$DIR"
    local config=${HLSCACHE_CONFIG:-$DIR/hlscache.yaml}
    if [ -z "${HLSCACHE_CONFIG:-}" ]; then
        # One file for every node. Read-ahead (on, the default) goes through the balancer, so each segment read
        # ahead lands on the node its path hashes to, and the origin sees it once across the fleet.
        cat >"$config" <<EOF
prefetch:
  through: http://127.0.0.1:$BALANCER_PORT
log:
  level: notice
EOF
    fi
    local servers=""
    for i in $(seq "$count"); do
        local port=$((NODE_PORT + i - 1))
        mkdir -p "$DIR/node$i"
        "$BIN" serve --config "$config" --cache-dir "$DIR/node$i/cache" --listen "127.0.0.1:$port" \
            >>"$DIR/node$i/serve.log" 2>&1 &
        echo $! >"$DIR/node$i/pid"
        servers+="    server node$i 127.0.0.1:$port check"$'\n'
    done
    # FLEET_LOG_REQUESTS=1: every request, with the node it went to and its retries (a '+' before them: sent on to
    # another node), into haproxy.log — which node asked the origin for what, when a check of the fleet fails. Off by
    # default: the log would grow with every request.
    local global_log="" defaults_log=""
    if [ "${FLEET_LOG_REQUESTS:-0}" = 1 ]; then
        global_log=$'    log stderr format raw local0 info\n'
        defaults_log=$'    log global\n    option httplog\n'
    fi
    cat >"$DIR/haproxy.cfg" <<EOF
global
    maxconn 8192
    # The servers' states, for 'start' to wait until the balancer sends to every node.
    stats socket $DIR/haproxy.sock mode 600
$global_log
defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 120s
    timeout server 120s
$defaults_log    # A node that died between two health checks: the request goes to the next node on the ring, once.
    retries 2
    # A retry goes to the same node first (a connection it closed while idle is no reason to move an object); only
    # the last retry goes to the next node on the ring (a node that died between two health checks).
    option redispatch -1
    retry-on conn-failure empty-response response-timeout

frontend hls
    bind 127.0.0.1:$BALANCER_PORT
    default_backend nodes

backend nodes
    # The path (not the query: a fresh signing token keeps the object on its node) hashed onto a consistent ring:
    # every object has one node, and a node lost or added moves only its own share.
    balance uri
    hash-type consistent
    option httpchk GET /readyz
    http-check expect status 200
    # A check's answer may take a while on a loaded machine (the test suite's two workers at load 10+): without
    # 'timeout check' HAProxy gives it 'inter' (1 s), and a slow but healthy node was taken out, its share of the
    # objects moving to the others. A dead node refuses the connection at once, whatever this is.
    timeout check 30s
    default-server inter 1s fall 3 rise 2
$servers
EOF
    haproxy -c -q -f "$DIR/haproxy.cfg"
    haproxy -f "$DIR/haproxy.cfg" >>"$DIR/haproxy.log" 2>&1 &
    echo $! >"$DIR/haproxy.pid.own"
    for i in $(seq "$count"); do wait_ready "http://127.0.0.1:$((NODE_PORT + i - 1))/readyz"; done
    wait_ready "http://127.0.0.1:$BALANCER_PORT/healthz"
    wait_balanced "$count"
    # Ready ports answered by our own processes: one that could not bind its port has exited, and a port taken
    # meanwhile by another program would answer in its place.
    for pidfile in "$DIR/haproxy.pid.own" "$DIR"/node*/pid; do
        kill -0 "$(cat "$pidfile")" 2>/dev/null || {
            echo "fleet: $pidfile: process $(cat "$pidfile") has exited" >&2
            tail -n 20 "$(dirname "$pidfile")/serve.log" "$DIR/haproxy.log" 2>/dev/null >&2 || true
            return 1
        }
    done
    echo "fleet: $count nodes behind http://127.0.0.1:$BALANCER_PORT (state in $DIR)"
}

stop_pid() { # FILE
    [ -f "$1" ] || return 0
    local pid
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$1"
}

stop() {
    stop_pid "$DIR/haproxy.pid.own"
    for pidfile in "$DIR"/node*/pid; do [ -e "$pidfile" ] && stop_pid "$pidfile"; done
    echo "fleet: stopped"
}

status() {
    curl --max-time 30 -fsS -o /dev/null "http://127.0.0.1:$BALANCER_PORT/healthz" 2>/dev/null \
        && echo "balancer 127.0.0.1:$BALANCER_PORT up" || echo "balancer 127.0.0.1:$BALANCER_PORT down"
    for pidfile in "$DIR"/node*/pid; do
        [ -e "$pidfile" ] || continue
        local node
        node=$(basename "$(dirname "$pidfile")")
        kill -0 "$(cat "$pidfile")" 2>/dev/null && echo "$node up (pid $(cat "$pidfile"))" || echo "$node down"
    done
}

case "${1:-}" in
    start) start "${2:-3}" ;;
    stop) stop ;;
    status) status ;;
    *) usage ;;
esac
