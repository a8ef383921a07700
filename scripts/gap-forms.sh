#!/usr/bin/env bash
# Which players play across a missing segment, written as EXT-X-GAP or as EXT-X-DISCONTINUITY (issue 44: a recording
# that missed segments). A 20 s stream of ten 2 s segments (25 fps, 50 frames each) with segment 4 missing, served over
# HTTP from 127.0.0.1, in two forms: gap.m3u8 lists it with #EXT-X-GAP (its URI absent at the server), disc.m3u8 leaves
# it out and puts #EXT-X-DISCONTINUITY before segment 5. Each player's decoded (or remuxed) frame count is printed:
# 450 = it played every segment there is; fewer = it stopped at the hole.
#
#   scripts/gap-forms.sh            (needs ffmpeg, mpv, vlc, chromium, python3; VLC runs as `nobody`: it refuses root)
set -euo pipefail
./scripts/install-deps.sh ffmpeg mpv vlc chromium python3 >/dev/null
work=$(mktemp -d /tmp/hlscache-gap.XXXXXX)
chmod 777 "$work"
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
ffmpeg -loglevel error -f lavfi -i testsrc=size=320x240:rate=25 -t 20 -c:v libx264 -g 50 -keyint_min 50 -sc_threshold 0 \
  -f hls -hls_time 2 -hls_list_size 0 -hls_segment_filename 'seg%02d.ts' index.m3u8
python3 - <<'PY'
lines = open("index.m3u8").read().splitlines()
gap, disc, i = [], [], 0
while i < len(lines):
    if lines[i].startswith("#EXTINF") and lines[i + 1] == "seg04.ts":
        gap += ["#EXT-X-GAP", lines[i], "missing04.ts"]
        disc.append("#EXT-X-DISCONTINUITY")
        i += 2
        continue
    gap.append(lines[i]); disc.append(lines[i]); i += 1
open("gap.m3u8", "w").write("\n".join(gap).replace("#EXT-X-VERSION:3", "#EXT-X-VERSION:8") + "\n")
open("disc.m3u8", "w").write("\n".join(disc) + "\n")
PY
cat > play.html <<'HTML'
<!doctype html><html><body><video id="v" muted autoplay playsinline></video><script>
const f = new URLSearchParams(location.search).get('f'), v = document.getElementById('v');
const report = (what) => fetch('/result?f=' + f + '&what=' + what + '&t=' + v.currentTime.toFixed(2) + '&frames=' + v.getVideoPlaybackQuality().totalVideoFrames);
v.addEventListener('ended', () => report('ended'));
v.addEventListener('error', () => report('error'));
v.src = '/' + f + '.m3u8';
</script></body></html>
HTML
port=$((20000 + RANDOM % 20000))
python3 -m http.server "$port" --bind 127.0.0.1 >"$work/http.log" 2>&1 &
server=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/disc.m3u8" 2>/dev/null && break; sleep 0.1; done
frames() {
  local count
  count=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$1" 2>/dev/null | grep -m1 . || true)
  echo "${count:-0}"
}
for form in disc gap; do
  url="http://127.0.0.1:$port/$form.m3u8"
  ffmpeg -loglevel quiet -i "$url" -f framemd5 "ffmpeg-$form.md5" || true
  echo "$form ffmpeg $(ffmpeg -version | head -1 | cut -d' ' -f3): $(grep -vc '^#' "ffmpeg-$form.md5" || true) frames"
  timeout 300 mpv --no-config --no-audio --o="$work/mpv-$form.mkv" --ovc=ffv1 "$url" >/dev/null 2>&1 || true
  echo "$form mpv: $(frames "mpv-$form.mkv") frames"
  timeout 300 runuser -u nobody -- cvlc -I dummy --no-audio --play-and-exit "$url" \
    --sout "#std{access=file,mux=ts,dst=$work/vlc-$form.ts}" >/dev/null 2>&1 || true
  echo "$form vlc: $(frames "vlc-$form.ts") frames (remuxed)"
  timeout 120 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --mute-audio \
    --autoplay-policy=no-user-gesture-required --user-data-dir="$work/profile-$form" \
    "http://127.0.0.1:$port/play.html?f=$form" >/dev/null 2>&1 &
  browser=$!
  for _ in $(seq 1200); do grep -q "f=$form&what=" http.log && break; sleep 0.1; done
  kill "$browser" 2>/dev/null || true
  echo "$form chromium: $(grep -o "f=$form&what=[^ ]*" http.log | head -1)"
done
echo "requests for the GAP's URI: $(grep -c missing04 http.log || true)"
