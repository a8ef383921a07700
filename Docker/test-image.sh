#!/usr/bin/env bash
# Docker/test-image.sh — build Docker/Dockerfile with podman and prove the image works end to end:
#   1. make (or reuse) local base images: a debootstrap'd Debian bookworm "slim" runtime base and a Swift build
#      base (Debian bookworm + the local Swift toolchain + the local git mirrors of the Swift packages), because
#      this machine has no Docker engine and cannot pull images;
#   2. build the image from the Dockerfile, with its SWIFT_IMAGE / RUNTIME_IMAGE ARGs pointed at those bases;
#   3. start a container (host network, server on 127.0.0.1 only), start a local origin (python3 -m http.server on
#      127.0.0.1) serving an AES-128 HLS stream made by ffmpeg;
#   4. `podman exec … hlscache fetch URL --seconds N` inside the container, then stop the origin;
#   5. play the stream through the container's proxy with ffmpeg (-f framemd5) and compare every decoded frame
#      with a direct decode from the origin made before it stopped;
#   6. check the HEALTHCHECK (podman healthcheck run) and /healthz, that the server runs as a non-root user, then
#      remove the container.
# Also reports the image's size (at most 100 MB, or FAIL) with what takes it (binary, libraries, crash backtracer,
# the rest), checks from the image's file list that it holds no shell, compiler or package manager, and prints the
# time from `podman run` to the server's first answer (a figure, not a pass/fail).
# Prints PASS or FAIL and exits 0 or 1. Needs root (rootful podman), podman buildah debootstrap runc ffmpeg curl
# python3 (installed with apt-get when missing). Too slow for CI: every run compiles a release build inside the
# image (20+ minutes on 2 cores); later runs reuse the base images. The build runs with --layers=false: with the
# vfs storage driver every committed layer is a full copy of the build root (~3 GB each, over 50 GB for the
# build stage's eight steps), so only the final image is committed (LAYERS=1 keeps podman's layer cache instead).
#
# Environment knobs:
#   HLSCACHE_SOURCE        repository to build (the one this script is in)
#   HLSCACHE_PODMAN_WORK   scratch directory for root filesystems and the test stream (/var/tmp/hlscache-podman)
#   SWIFT_TOOLCHAIN        Swift toolchain directory with usr/bin/swift (/opt/swift)
#   SWIFT_PACKAGE_MIRRORS  git mirrors of github.com used instead of the network (/opt/swift-packages)
#   DEBIAN_MIRROR          debootstrap mirror (http://deb.debian.org/debian)
#   IMAGE                  tag of the built image (localhost/hlscache:test)
#   PROXY_PORT ORIGIN_PORT loopback ports of the proxy and the test origin (18480, 18481)
#   KEEP=1                 keep the container and scratch stream after the run (for debugging)
#   LAYERS=1               commit and cache every build step (needs 50+ GB free with vfs)
#   REBUILD_BASES=1        remake the base images even if present
#   NO_BUILD=1             skip the build and check the image already tagged $IMAGE
set -uo pipefail

ROOT="${HLSCACHE_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
WORK="${HLSCACHE_PODMAN_WORK:-/var/tmp/hlscache-podman}"
SWIFT_TOOLCHAIN="${SWIFT_TOOLCHAIN:-/opt/swift}"
SWIFT_PACKAGE_MIRRORS="${SWIFT_PACKAGE_MIRRORS:-/opt/swift-packages}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SWIFT_BASE="localhost/hlscache-base/swift:6.3-bookworm"
RUNTIME_BASE="localhost/hlscache-base/debian:bookworm-slim"
IMAGE="${IMAGE:-localhost/hlscache:test}"
CONTAINER="hlscache-test-$$"
PROXY_PORT="${PROXY_PORT:-18480}"
ORIGIN_PORT="${ORIGIN_PORT:-18481}"
STREAM_SECONDS=10
FETCH_SECONDS=12
PODMAN=(podman --storage-driver=vfs --cgroup-manager=cgroupfs --runtime=runc)
# runc cannot raise the default rlimits here ("error setting rlimit type 7: operation not permitted"): every
# `podman run` names them.
LIMITS=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

ORIGIN_PID=""
FAILURES=0
T0=$(date +%s)

log() { printf '[test-image %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { log "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
die() { log "FAIL: $*"; cleanup; echo FAIL; exit 1; }
ok() { log "ok: $*"; }

cleanup() {
    if [ -n "$ORIGIN_PID" ]; then kill "$ORIGIN_PID" 2>/dev/null; wait "$ORIGIN_PID" 2>/dev/null; ORIGIN_PID=""; fi
    if [ "${KEEP:-0}" != 1 ]; then
        "${PODMAN[@]}" rm -f -t 5 "$CONTAINER" >/dev/null 2>&1
        "${PODMAN[@]}" volume rm -f "$CONTAINER-cache" >/dev/null 2>&1
    fi
}
trap 'cleanup; echo FAIL; exit 1' INT TERM

[ "$(id -u)" = 0 ] || { echo "test-image.sh: run as root (rootful podman)" >&2; echo FAIL; exit 1; }

# --- 0. host tools ----------------------------------------------------------------------------------------------
need=()
for tool in podman:podman buildah:buildah debootstrap:debootstrap runc:runc ffmpeg:ffmpeg curl:curl; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]}"
fi
command -v python3 >/dev/null || die "python3 is needed for the test origin"
mkdir -p "$WORK"

image_exists() { "${PODMAN[@]}" image exists "$1"; }

# --- 1. base images ---------------------------------------------------------------------------------------------
# debian:bookworm-slim stand-in: debootstrap minbase without docs, man pages and apt lists.
make_runtime_base() {
    local dir="$WORK/rootfs-runtime"
    rm -rf "$dir"
    log "debootstrap minbase bookworm -> $dir"
    debootstrap --variant=minbase bookworm "$dir" "$DEBIAN_MIRROR" >"$WORK/debootstrap-runtime.log" 2>&1 \
        || die "debootstrap runtime base (see $WORK/debootstrap-runtime.log)"
    rm -rf "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/var/lib/apt/lists/* \
        "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
    tar -C "$dir" -c . | "${PODMAN[@]}" import --change 'CMD ["bash"]' - "$RUNTIME_BASE" >/dev/null \
        || die "podman import $RUNTIME_BASE"
    rm -rf "$dir"
}

# swift:6.3-bookworm stand-in: what the official image installs, the toolchain merged into /usr like the official
# image does (minus debugger, language server and docs tooling, which a build never runs), and the git mirrors
# of the Swift packages wired in with url.insteadOf so `swift package resolve` needs no network.
make_swift_base() {
    local dir="$WORK/rootfs-swift"
    [ -x "$SWIFT_TOOLCHAIN/usr/bin/swift" ] || die "no Swift toolchain at $SWIFT_TOOLCHAIN"
    # A finished debootstrap is kept until the import succeeds, so a failure after it does not repeat it.
    if [ ! -e "$dir/.debootstrap-done" ]; then
        rm -rf "$dir"
        log "debootstrap minbase bookworm + build packages -> $dir"
        debootstrap --variant=minbase \
            --include=binutils,ca-certificates,git,gcc,libc6-dev,libgcc-12-dev,libstdc++-12-dev,libcurl4,libxml2,libedit2,libncurses6,libsqlite3-0,libpython3.11,tzdata,gnupg2 \
            bookworm "$dir" "$DEBIAN_MIRROR" >"$WORK/debootstrap-swift.log" 2>&1 \
            || die "debootstrap swift base (see $WORK/debootstrap-swift.log)"
        touch "$dir/.debootstrap-done"
    fi
    log "copying the Swift toolchain from $SWIFT_TOOLCHAIN"
    tar -C "$SWIFT_TOOLCHAIN" -c \
        --exclude='usr/bin/lldb*' --exclude='usr/bin/sourcekit-lsp' --exclude='usr/bin/clangd' --exclude='usr/bin/docc' \
        --exclude='usr/bin/swift-format' --exclude='usr/bin/repl_swift' --exclude='usr/lib/liblldb*' \
        --exclude='usr/lib/libsourcekitdInProc.so' --exclude='usr/lib/libSwiftSourceKit*' --exclude='usr/lib/swift/embedded' \
        --exclude='usr/share/docc' usr | tar -C "$dir" -x || die "copy toolchain"
    if [ -d "$SWIFT_PACKAGE_MIRRORS" ]; then
        log "copying the package mirrors from $SWIFT_PACKAGE_MIRRORS"
        mkdir -p "$dir/opt/swift-packages"
        cp -a "$SWIFT_PACKAGE_MIRRORS"/. "$dir/opt/swift-packages/" || die "copy package mirrors"
        cat >"$dir/etc/gitconfig" <<'EOF'
[url "/opt/swift-packages/"]
	insteadOf = https://github.com/
	insteadOf = git@github.com:
	insteadOf = ssh://git@github.com/
[safe]
	directory = *
EOF
    fi
    # The toolchain finds its libraries through $ORIGIN, which the loader resolves with /proc/self/exe.
    mount -t proc proc "$dir/proc" || die "mount proc in $dir"
    local version
    version=$(chroot "$dir" /usr/bin/swift --version 2>&1) || { umount "$dir/proc"; die "swift does not run in the build base: $version"; }
    umount "$dir/proc"
    log "build base: ${version%%$'\n'*}"
    rm -f "$dir/.debootstrap-done"
    rm -rf "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin \
        "$dir"/var/cache/apt/archives/*.deb
    tar -C "$dir" -c . | "${PODMAN[@]}" import --change 'CMD ["bash"]' - "$SWIFT_BASE" >/dev/null \
        || die "podman import $SWIFT_BASE"
    rm -rf "$dir"
}

T_BASES=$(date +%s)
if [ "${REBUILD_BASES:-0}" = 1 ] || ! image_exists "$RUNTIME_BASE"; then make_runtime_base; else log "reusing $RUNTIME_BASE"; fi
if [ "${REBUILD_BASES:-0}" = 1 ] || ! image_exists "$SWIFT_BASE"; then make_swift_base; else log "reusing $SWIFT_BASE"; fi
T_BASES=$(( $(date +%s) - T_BASES ))
[ "${BASES_ONLY:-0}" = 1 ] && { log "base images ready (${T_BASES}s)"; exit 0; }

# --- 2. build ---------------------------------------------------------------------------------------------------
T_BUILD=$(date +%s)
if [ "${NO_BUILD:-0}" = 1 ]; then
    log "NO_BUILD=1: checking the existing $IMAGE"
else
    log "building $IMAGE (log: $WORK/build.log)"
    # --format docker keeps HEALTHCHECK (the OCI image format has no field for it).
    "${PODMAN[@]}" build --isolation=chroot --format docker --pull=never --force-rm \
        --layers="$([ "${LAYERS:-0}" = 1 ] && echo true || echo false)" \
        --build-arg "SWIFT_IMAGE=$SWIFT_BASE" --build-arg "RUNTIME_IMAGE=$RUNTIME_BASE" \
        -f "$ROOT/Docker/Dockerfile" -t "$IMAGE" "$ROOT" >"$WORK/build.log" 2>&1 \
        || { tail -40 "$WORK/build.log"; die "podman build (see $WORK/build.log)"; }
fi
T_BUILD=$(( $(date +%s) - T_BUILD ))
# A build stopped by a signal can exit 0 without an image.
image_exists "$IMAGE" || die "podman build made no $IMAGE (see $WORK/build.log)"
IMAGE_SIZE=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")
MAX_IMAGE_SIZE=100000000

# The image's files, from the export of a container created (never started) from it: `tar -tv` lines, path last.
"${PODMAN[@]}" rm -f "$CONTAINER-files" >/dev/null 2>&1
"${PODMAN[@]}" create --name "$CONTAINER-files" "${LIMITS[@]}" "$IMAGE" >/dev/null || die "podman create (file list)"
"${PODMAN[@]}" export "$CONTAINER-files" | tar -tvf - | awk '{ p = $6; sub(/^\.?\//, "", p); print $1, $3, p, $7, $8 }' >"$WORK/files.txt"
"${PODMAN[@]}" rm -f "$CONTAINER-files" >/dev/null 2>&1
[ -s "$WORK/files.txt" ] || die "empty file list of $IMAGE"
bytes_of() { awk -v re="$1" '$3 ~ re { s += $2 } END { print s + 0 }' "$WORK/files.txt"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'; }
BINARY_SIZE=$(bytes_of '^usr/local/bin/hlscache$')
LIBS_SIZE=$(bytes_of '^(usr/)?lib(32|64|x32)?/')
BACKTRACER_SIZE=$(bytes_of '^usr/local/libexec/')
FILES_SIZE=$(bytes_of '.')
OTHER_SIZE=$((FILES_SIZE - BINARY_SIZE - LIBS_SIZE - BACKTRACER_SIZE))
LIBS=$(awk '$3 ~ /^(usr\/)?lib(32|64|x32)?\/./ && $1 !~ /^d/ { n = split($3, part, "/"); printf "%s ", part[n] }' "$WORK/files.txt")
log "built in ${T_BUILD}s: image $(mb "$IMAGE_SIZE") = binary $(mb "$BINARY_SIZE") + libraries $(mb "$LIBS_SIZE") ($LIBS) + crash backtracer $(mb "$BACKTRACER_SIZE") + the rest $((OTHER_SIZE / 1000)) KB ($(awk '$1 !~ /^d/ && $3 !~ /^(usr\/local\/|(usr\/)?lib)/ { printf "%s ", $3 }' "$WORK/files.txt"))"
[ "$IMAGE_SIZE" -le "$MAX_IMAGE_SIZE" ] && ok "image $(mb "$IMAGE_SIZE") <= $(mb "$MAX_IMAGE_SIZE")" \
    || fail "image $(mb "$IMAGE_SIZE") is over $(mb "$MAX_IMAGE_SIZE")"

# Static checks of the image configuration.
config=$("${PODMAN[@]}" image inspect --format '{{json .Config}}' "$IMAGE")
grep -q '"HLSCACHE_LISTEN=0.0.0.0:8080"' <<<"$config" && ok "ENV HLSCACHE_LISTEN=0.0.0.0:8080" || fail "image lacks ENV HLSCACHE_LISTEN=0.0.0.0:8080"
grep -q '"/var/cache/hlscache"' <<<"$config" && ok "VOLUME /var/cache/hlscache" || fail "image lacks VOLUME /var/cache/hlscache"
grep -q '"8080/tcp"' <<<"$config" && ok "EXPOSE 8080" || fail "image lacks EXPOSE 8080"
grep -q '"Entrypoint":\["hlscache"\]' <<<"$config" && grep -q '"Cmd":\["serve"\]' <<<"$config" \
    && ok 'ENTRYPOINT ["hlscache"] CMD ["serve"]' || fail "ENTRYPOINT/CMD are not hlscache/serve: $config"
"${PODMAN[@]}" image inspect "$IMAGE" | grep -A12 '"Healthcheck"' | grep -q '"healthcheck"' \
    && ok "HEALTHCHECK runs hlscache healthcheck" || fail "image has no HEALTHCHECK running hlscache healthcheck"
# The crash backtracer is where SWIFT_BACKTRACE says, executable, and runs in the image (it prints its usage).
backtracer=$(grep -o 'swift-backtrace=[^",]*' <<<"$config" | head -1); backtracer=${backtracer#swift-backtrace=}
if grep -q 'SWIFT_BACKTRACE=enable=yes' <<<"$config" && [ -n "$backtracer" ] \
    && awk -v p="${backtracer#/}" '$3 == p && $1 ~ /^-..x/ { found = 1 } END { exit !found }' "$WORK/files.txt" \
    && "${PODMAN[@]}" run --rm "${LIMITS[@]}" --entrypoint "$backtracer" "$IMAGE" --help >/dev/null 2>&1; then
    ok "crash backtracer $backtracer installed, enabled and runs"
else
    fail "SWIFT_BACKTRACE or its swift-backtrace-static missing or not runnable"
fi
# Only what the server needs: no shell, no compiler, no Swift toolchain, no curl, no package manager.
present=$(awk '{ n = split($3, part, "/"); print part[n] }' "$WORK/files.txt" \
    | grep -xE 'sh|bash|dash|busybox|gcc|cc|ld|swift|swiftc|swift-frontend|curl|wget|apt|apt-get|dpkg' | tr '\n' ' ')
[ -z "$present" ] && ok "no shell, compiler, curl or package manager in the image ($(wc -l <"$WORK/files.txt") entries)" \
    || fail "present in the runtime image: $present"
# The image's own dynamic loader resolves every library the binary links, from the image's files alone.
loader=$(awk '$3 ~ /(^|\/)ld-linux[^\/]*\.so\.[0-9]+$/ { print "/" $3; exit }' "$WORK/files.txt")
[ -n "$loader" ] || fail "no dynamic loader (ld-linux*.so) in the image"
"${PODMAN[@]}" run --rm "${LIMITS[@]}" --entrypoint "$loader" "$IMAGE" --list /usr/local/bin/hlscache >"$WORK/ldd.txt" 2>"$WORK/ldd.err" \
    || fail "$loader --list in the image: $(cat "$WORK/ldd.err")"
if grep -q 'not found' "$WORK/ldd.txt"; then fail "unresolved libraries: $(grep 'not found' "$WORK/ldd.txt" | tr '\n' ' ')"; fi
if grep -q 'libswift\|libFoundation' "$WORK/ldd.txt"; then fail "Swift runtime linked dynamically: $(tr '\n' ' ' <"$WORK/ldd.txt")"; fi
ok "binary links (resolved in the image): $(awk '{print $1}' "$WORK/ldd.txt" | tr '\n' ' ')"

# --- 3. test stream and origin ----------------------------------------------------------------------------------
STREAM="$WORK/stream"
rm -rf "$STREAM" && mkdir -p "$STREAM/v0"
head -c 16 /dev/urandom >"$STREAM/v0/key.bin"
printf 'key.bin\n%s\n' "$STREAM/v0/key.bin" >"$WORK/keyinfo"
log "making a ${STREAM_SECONDS}s AES-128 HLS stream with ffmpeg"
ffmpeg -hide_banner -loglevel error -nostdin -y \
    -f lavfi -i "testsrc2=size=320x180:rate=25:duration=$STREAM_SECONDS" -f lavfi -i "sine=frequency=440:duration=$STREAM_SECONDS" \
    -map 0:v -map 1:a -c:v libx264 -preset ultrafast -g 25 -keyint_min 25 -sc_threshold 0 -pix_fmt yuv420p -c:a aac -b:a 64k \
    -f hls -hls_time 2 -hls_playlist_type vod -hls_key_info_file "$WORK/keyinfo" -master_pl_name master.m3u8 \
    -var_stream_map "v:0,a:0" -hls_segment_filename "$STREAM/v%v/seg%03d.ts" "$STREAM/v%v/index.m3u8" \
    || die "ffmpeg could not make the test stream"
grep -q 'METHOD=AES-128' "$STREAM/v0/index.m3u8" || die "test stream is not encrypted"

(cd "$STREAM" && exec python3 -m http.server --bind 127.0.0.1 "$ORIGIN_PORT") >"$WORK/origin.log" 2>&1 &
ORIGIN_PID=$!
ORIGIN_URL="http://127.0.0.1:$ORIGIN_PORT/master.m3u8"
for _ in $(seq 50); do curl -fsS -o /dev/null "$ORIGIN_URL" 2>/dev/null && break; sleep 0.2; done
curl -fsS -o /dev/null "$ORIGIN_URL" || die "test origin did not start on 127.0.0.1:$ORIGIN_PORT"

# Reference decode straight from the origin.
ffmpeg -hide_banner -loglevel error -nostdin -i "$ORIGIN_URL" -map 0 -f framemd5 - >"$WORK/direct.framemd5" \
    || die "ffmpeg could not decode the stream from the origin"

# --- 4. container -----------------------------------------------------------------------------------------------
# Host network so the container reaches the loopback origin; HLSCACHE_LISTEN overrides the image's 0.0.0.0:8080
# so that nothing listens beyond 127.0.0.1 on this host. The cache is a named volume, as in compose.yaml; the root
# filesystem is read-only and every capability dropped, as docs/operations.md recommends.
"${PODMAN[@]}" rm -f "$CONTAINER" >/dev/null 2>&1
T_START_NS=$(date +%s%N)
"${PODMAN[@]}" run -d --name "$CONTAINER" --network host "${LIMITS[@]}" \
    --read-only --cap-drop ALL --security-opt no-new-privileges \
    -e "HLSCACHE_LISTEN=127.0.0.1:$PROXY_PORT" -v "$CONTAINER-cache:/var/cache/hlscache" \
    "$IMAGE" >/dev/null || die "podman run"
T_RUN_MS=$(( ($(date +%s%N) - T_START_NS) / 1000000 ))
PROXY="http://127.0.0.1:$PROXY_PORT"
# Polled every 20 ms for up to 60 s (a bound, not a measurement).
FIRST_ANSWER_NS=""
for _ in $(seq 3000); do
    if curl -fsS -o /dev/null --max-time 2 "$PROXY/healthz" 2>/dev/null; then FIRST_ANSWER_NS=$(date +%s%N); break; fi
    sleep 0.02
done
[ -n "$FIRST_ANSWER_NS" ] || { "${PODMAN[@]}" logs "$CONTAINER" | tail -20; die "/healthz did not answer 200"; }
FIRST_ANSWER_MS=$(( (FIRST_ANSWER_NS - T_START_NS) / 1000000 ))
# When the container's process started (runtime set-up excluded): podman's StartedAt, to the nanosecond.
started_at=$("${PODMAN[@]}" inspect --format '{{.State.StartedAt}}' "$CONTAINER" | awk '{print $1, $2, $3}')
started_ns=$(date -d "$started_at" +%s%N 2>/dev/null || echo "")
SERVER_START_MS="?"
[ -n "$started_ns" ] && SERVER_START_MS=$(( (FIRST_ANSWER_NS - started_ns) / 1000000 ))
ok "/healthz answers 200: first answer ${FIRST_ANSWER_MS} ms after podman run started (podman run returned after ${T_RUN_MS} ms; ${SERVER_START_MS} ms after the container's process started)"

# The server runs as the image's non-root user: read from the host's /proc (rootful podman, no user namespace),
# since the image has no shell or ps.
host_pid=$("${PODMAN[@]}" inspect --format '{{.State.Pid}}' "$CONTAINER")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$host_pid/status" 2>/dev/null)
comm=$(cat "/proc/$host_pid/comm" 2>/dev/null)
if [ "$comm" = hlscache ] && [ -n "$uid" ] && [ "$uid" != 0 ]; then ok "PID 1 is $comm running as uid $uid"; else fail "PID 1 is '$comm' as uid '$uid'"; fi
volume_dir=$("${PODMAN[@]}" volume inspect --format '{{.Mountpoint}}' "$CONTAINER-cache")
owner=$(stat -c %u "$volume_dir")
[ "$owner" = "$uid" ] && ok "cache volume owned by uid $owner" || fail "cache volume owned by $owner, server runs as $uid"

# HEALTHCHECK as podman runs it.
if hc=$("${PODMAN[@]}" healthcheck run "$CONTAINER" 2>&1); then ok "podman healthcheck run: ${hc:-healthy}"; else fail "podman healthcheck run: $hc"; fi
# Name resolution in the image (nsswitch.conf, glibc's built-in files module): "localhost" from /etc/hosts.
if hc=$("${PODMAN[@]}" exec "$CONTAINER" hlscache healthcheck --url "http://localhost:$PROXY_PORT/healthz" 2>&1); then
    ok "hlscache healthcheck --url http://localhost:$PROXY_PORT/healthz in the container: $hc"
else
    fail "hlscache healthcheck by host name in the container: $hc"
fi

# --- 5. prewarm inside the container, then play with the origin gone --------------------------------------------
T_FETCH=$(date +%s)
"${PODMAN[@]}" exec "$CONTAINER" hlscache fetch "$ORIGIN_URL" --seconds "$FETCH_SECONDS" >"$WORK/fetch.log" 2>&1 \
    || { cat "$WORK/fetch.log"; die "hlscache fetch inside the container"; }
T_FETCH=$(( $(date +%s) - T_FETCH ))
ok "hlscache fetch --seconds $FETCH_SECONDS inside the container (${T_FETCH}s)"
"${PODMAN[@]}" exec "$CONTAINER" hlscache ls >"$WORK/ls.txt" 2>&1 && log "hlscache ls: $(tail -n +1 "$WORK/ls.txt" | tr -s ' ' | tr '\n' '|')"

kill "$ORIGIN_PID"; wait "$ORIGIN_PID" 2>/dev/null; ORIGIN_PID=""
if curl -fsS -o /dev/null --max-time 2 "$ORIGIN_URL" 2>/dev/null; then die "origin still answers after being stopped"; fi
ok "origin stopped"

PROXIED_URL="$PROXY/http/127.0.0.1:$ORIGIN_PORT/master.m3u8"
curl -fsS "$PROXY/http/127.0.0.1:$ORIGIN_PORT/v0/index.m3u8" >"$WORK/served-index.m3u8" || fail "media playlist not served from the cache"
grep -q "URI=\"/keys/" "$WORK/served-index.m3u8" && ok "served playlist points the key at /keys/" || fail "key URI not rewritten: $(grep EXT-X-KEY "$WORK/served-index.m3u8")"
if ffmpeg -hide_banner -loglevel error -nostdin -i "$PROXIED_URL" -map 0 -f framemd5 - >"$WORK/proxied.framemd5" 2>"$WORK/proxied.err"; then
    direct_frames=$(grep -vc '^#' "$WORK/direct.framemd5")
    proxied_frames=$(grep -vc '^#' "$WORK/proxied.framemd5")
    video_frames=$(grep -v '^#' "$WORK/proxied.framemd5" | awk -F', *' '$1 == 0' | wc -l)
    expected_video=$((STREAM_SECONDS * 25))
    if [ "$video_frames" -eq "$expected_video" ] && [ "$proxied_frames" -eq "$direct_frames" ] \
        && cmp -s <(grep -v '^#' "$WORK/direct.framemd5") <(grep -v '^#' "$WORK/proxied.framemd5"); then
        ok "played offline through the container: $video_frames video frames ($proxied_frames frames in all), identical to the origin"
    else
        fail "offline playback: $video_frames video frames (expected $expected_video), $proxied_frames frames vs $direct_frames direct"
    fi
else
    fail "ffmpeg could not play $PROXIED_URL: $(tail -5 "$WORK/proxied.err")"
fi

# --- 6. stop and report -----------------------------------------------------------------------------------------
T_STOP=$(date +%s)
"${PODMAN[@]}" stop -t 10 "$CONTAINER" >/dev/null 2>&1
exit_code=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$CONTAINER" 2>/dev/null)
T_STOP=$(( $(date +%s) - T_STOP ))
# SIGTERM reaches hlscache as PID 1 and drains the ServiceGroup: a clean exit, not a SIGKILL after the timeout.
[ "$exit_code" = 0 ] && ok "podman stop: exit code 0 after ${T_STOP}s" || fail "podman stop: exit code $exit_code after ${T_STOP}s"
"${PODMAN[@]}" logs "$CONTAINER" >"$WORK/container.log" 2>&1
cleanup
[ "${KEEP:-0}" = 1 ] || rm -rf "$STREAM"

log "timings: base images ${T_BASES}s, image build ${T_BUILD}s, total $(( $(date +%s) - T0 ))s; podman run to first answer ${FIRST_ANSWER_MS} ms"
log "image size $(mb "$IMAGE_SIZE") (limit $(mb "$MAX_IMAGE_SIZE")): binary $(mb "$BINARY_SIZE"), libraries $(mb "$LIBS_SIZE"), crash backtracer $(mb "$BACKTRACER_SIZE"), the rest $((OTHER_SIZE / 1000)) KB"
if [ "$FAILURES" -eq 0 ]; then echo PASS; exit 0; else log "$FAILURES check(s) failed"; echo FAIL; exit 1; fi
