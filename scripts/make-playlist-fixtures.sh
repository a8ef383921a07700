#!/usr/bin/env bash
# Regenerates the ffmpeg-made playlists in Tests/HLSPlaylistTests/Fixtures.
#
# Streams are packaged into a temporary directory; only the .m3u8 files are copied into the fixtures folder
# (media and keys are thrown away). The output is deterministic enough to commit, except for the key IVs,
# which ffmpeg draws at random; the tests do not depend on their values.
#
# Usage: scripts/make-playlist-fixtures.sh [output-dir]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/Tests/HLSPlaylistTests/Fixtures}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

command -v ffmpeg >/dev/null || { echo "ffmpeg is required (apt-get install ffmpeg)" >&2; exit 1; }

ff() { ffmpeg -hide_banner -loglevel error -nostdin -y "$@"; }
video=(-f lavfi -i "testsrc2=size=320x180:rate=25")
audio=(-f lavfi -i "sine=frequency=440:sample_rate=48000")
# A keyframe every 2 s so that -hls_time 2 cuts exactly there.
h264=(-c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 -pix_fmt yuv420p)
aac=(-c:a aac -b:a 64k)

# 1. Clear MPEG-TS, VOD.
mkdir -p "$work/clear"
ff "${video[@]}" "${audio[@]}" -t 8 "${h264[@]}" "${aac[@]}" \
    -f hls -hls_time 2 -hls_playlist_type vod \
    -hls_segment_filename "$work/clear/seg_%03d.ts" "$work/clear/clear-ts.m3u8"

# 2. AES-128 with key rotation: periodic_rekey re-reads the key info file for every segment, so swapping
#    the file while ffmpeg runs gives several keys. Real-time input (-re) leaves time to swap.
mkdir -p "$work/aes"
for n in 1 2 3; do head -c 16 /dev/urandom >"$work/aes/key$n.bin"; done
keyinfo="$work/aes/keyinfo.txt"
write_keyinfo() { printf 'https://keys.example.com/key%s.bin\n%s\n' "$1" "$work/aes/key$1.bin" >"$keyinfo.tmp" && mv "$keyinfo.tmp" "$keyinfo"; }
write_keyinfo 1
ff -re "${video[@]}" -t 12 "${h264[@]}" \
    -f hls -hls_time 2 -hls_playlist_type vod -hls_key_info_file "$keyinfo" -hls_flags periodic_rekey \
    -hls_segment_filename "$work/aes/seg_%03d.ts" "$work/aes/aes128-rotation.m3u8" &
ffpid=$!
sleep 4.5; write_keyinfo 2
sleep 4; write_keyinfo 3
wait "$ffpid"

# 3. fMP4 segments with an init section (EXT-X-MAP).
mkdir -p "$work/fmp4"
ff "${video[@]}" "${audio[@]}" -t 8 "${h264[@]}" "${aac[@]}" \
    -f hls -hls_time 2 -hls_playlist_type vod -hls_segment_type fmp4 -hls_fmp4_init_filename init.mp4 \
    -hls_segment_filename "$work/fmp4/seg_%03d.m4s" "$work/fmp4/fmp4.m3u8"

# 4. One file, segments as byte ranges.
mkdir -p "$work/single"
ff "${video[@]}" "${audio[@]}" -t 10 "${h264[@]}" "${aac[@]}" \
    -f hls -hls_time 2 -hls_playlist_type vod -hls_flags single_file \
    "$work/single/single-file.m3u8"

# 5. Live sliding window: 3 segments listed, older ones deleted, stopped before the end (no EXT-X-ENDLIST).
mkdir -p "$work/live"
ff -re "${video[@]}" -t 30 "${h264[@]}" \
    -f hls -hls_time 2 -hls_list_size 3 -hls_flags delete_segments \
    -hls_segment_filename "$work/live/seg_%03d.ts" "$work/live/live-window.m3u8" &
ffpid=$!
sleep 11
# SIGTERM, not SIGINT: a background job of a non-interactive shell ignores SIGINT.
kill -TERM "$ffpid" 2>/dev/null || true
wait "$ffpid" || true
# ffmpeg writes EXT-X-ENDLIST when it exits cleanly; a live window as a player sees it has none.
grep -v '^#EXT-X-ENDLIST' "$work/live/live-window.m3u8" >"$work/live/live-window.tmp"
mv "$work/live/live-window.tmp" "$work/live/live-window.m3u8"

# 6. Event playlist (grows, never slides).
mkdir -p "$work/event"
ff "${video[@]}" -t 6 "${h264[@]}" \
    -f hls -hls_time 2 -hls_playlist_type event \
    -hls_segment_filename "$work/event/seg_%03d.ts" "$work/event/event.m3u8"

# 7. Multivariant: two video variants sharing one audio group.
mkdir -p "$work/master"
ff "${video[@]}" "${audio[@]}" -t 6 \
    -map 0:v -map 0:v -map 1:a \
    -c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 -pix_fmt yuv420p \
    -s:v:0 320x180 -b:v:0 400k -s:v:1 160x90 -b:v:1 150k "${aac[@]}" \
    -f hls -hls_time 2 -hls_playlist_type vod \
    -master_pl_name master.m3u8 \
    -var_stream_map "v:0,agroup:aud,name:hi v:1,agroup:aud,name:lo a:0,agroup:aud,default:yes,language:en,name:audio" \
    -hls_segment_filename "$work/master/%v/seg_%03d.ts" "$work/master/%v/index.m3u8"

mkdir -p "$out"
cp "$work/clear/clear-ts.m3u8" "$work/aes/aes128-rotation.m3u8" "$work/fmp4/fmp4.m3u8" \
    "$work/single/single-file.m3u8" "$work/live/live-window.m3u8" "$work/event/event.m3u8" "$out/"
cp "$work/master/master.m3u8" "$out/master.m3u8"
for v in hi lo audio; do cp "$work/master/$v/index.m3u8" "$out/master-$v.m3u8"; done
ls -l "$out"
