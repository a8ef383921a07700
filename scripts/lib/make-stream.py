#!/usr/bin/env python3
"""Writes a synthetic VOD HLS stream (no ffmpeg needed) for the reliability scripts: DIR/master.m3u8 with
VARIANTS variants, each v{n}/index.m3u8 with SEGMENTS segments of SIZE random bytes (±25%).

usage: make-stream.py DIR [--variants 2] [--segments 20] [--size 200000] [--seed 1]
"""
import argparse, os, random

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--variants", type=int, default=2)
p.add_argument("--segments", type=int, default=20)
p.add_argument("--size", type=int, default=200_000)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()
rng = random.Random(a.seed)
os.makedirs(a.dir, exist_ok=True)
master = ["#EXTM3U", "#EXT-X-VERSION:3"]
for v in range(a.variants):
    master += [f"#EXT-X-STREAM-INF:BANDWIDTH={(v + 1) * 400_000},RESOLUTION={320 * (v + 1)}x{180 * (v + 1)}", f"v{v}/index.m3u8"]
    os.makedirs(f"{a.dir}/v{v}", exist_ok=True)
    media = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:4", "#EXT-X-MEDIA-SEQUENCE:0", "#EXT-X-PLAYLIST-TYPE:VOD"]
    for s in range(a.segments):
        size = int(a.size * rng.uniform(0.75, 1.25))
        with open(f"{a.dir}/v{v}/seg{s:04d}.ts", "wb") as f:
            f.write(rng.randbytes(size))
        media += ["#EXTINF:4.000,", f"seg{s:04d}.ts"]
    media.append("#EXT-X-ENDLIST")
    with open(f"{a.dir}/v{v}/index.m3u8", "w") as f:
        f.write("\n".join(media) + "\n")
with open(f"{a.dir}/master.m3u8", "w") as f:
    f.write("\n".join(master) + "\n")
