#!/usr/bin/env python3
"""Checks that a hlscache cache directory agrees with itself and with the origin's files.

usage: check-cache.py CACHE_DIR ORIGIN_DIR ORIGIN_BASE [--no-orphans]

- every row of index.sqlite has its file objects/ab/cdef… (named by the SHA-256 of the key) of the recorded size;
- every raw object whose key is ORIGIN_BASE/path has exactly the bytes of ORIGIN_DIR/path (SHA-256 compared);
  rewritten playlists (key#hlscache-rewritten) are parsed as text and must name no origin URL; their .gz copy
  must gunzip to the rewritten one;
- with --no-orphans (after a recovery with no other process on the cache): no file under objects/ without a
  row, and tmp/ is empty.
Prints one JSON line with the counts; exits 1 on any problem (listed on stderr).
"""
import gzip, hashlib, json, os, sqlite3, sys

cache, origin_dir, base = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/")
no_orphans = "--no-orphans" in sys.argv
problems = []
db = sqlite3.connect(f"file:{cache}/index.sqlite?mode=ro", uri=True, timeout=10)
rows = db.execute("SELECT key_hash, key, size FROM objects").fetchall()
db.close()
known = set()
checked = rewritten = other = 0


def object_path(h):
    return f"{cache}/objects/{h[:2]}/{h[2:]}"


def read(path):
    with open(path, "rb") as f:
        return f.read()


by_key = {}
for h, key, size in rows:
    known.add(h)
    by_key[key] = h
    if hashlib.sha256(key.encode()).hexdigest() != h:
        problems.append(f"row {h}: key hash does not match key {key}")
    path = object_path(h)
    if not os.path.isfile(path):
        problems.append(f"row {key}: file missing")
        continue
    data = read(path)
    if len(data) != size:
        problems.append(f"row {key}: file has {len(data)} bytes, index says {size}")
        continue
    if key.endswith("#hlscache-rewritten"):
        rewritten += 1
        text = data.decode("utf-8", "replace")
        if base in text:
            problems.append(f"{key}: rewritten playlist still names the origin")
    elif key.endswith("#hlscache-rewritten.gz"):
        rewritten += 1
        try:
            gzip.decompress(data)
        except Exception as e:
            problems.append(f"{key}: gzip copy does not decompress: {e}")
    elif key.startswith(base + "/"):
        rel = key[len(base) + 1:].split("?")[0]
        src = os.path.join(origin_dir, rel)
        if not os.path.isfile(src):
            problems.append(f"{key}: no such origin file")
        elif hashlib.sha256(data).digest() != hashlib.sha256(read(src)).digest():
            problems.append(f"{key}: bytes differ from the origin ({len(data)} vs {os.path.getsize(src)})")
        else:
            checked += 1
    else:
        other += 1

# gz copies must match their rewritten playlist
for key, h in by_key.items():
    if key.endswith("#hlscache-rewritten.gz") and key[:-3] in by_key:
        try:
            if gzip.decompress(read(object_path(h))) != read(object_path(by_key[key[:-3]])):
                problems.append(f"{key}: gzip copy differs from the rewritten playlist")
        except Exception:
            pass

orphans = []
objects = f"{cache}/objects"
if os.path.isdir(objects):
    for prefix in os.listdir(objects):
        for name in os.listdir(f"{objects}/{prefix}"):
            if prefix + name not in known:
                orphans.append(prefix + name)
tmp = os.listdir(f"{cache}/tmp") if os.path.isdir(f"{cache}/tmp") else []
if no_orphans:
    if orphans:
        problems.append(f"{len(orphans)} object files without an index row")
    if tmp:
        problems.append(f"{len(tmp)} temp files left: {tmp[:3]}")

print(json.dumps({"rows": len(rows), "verified": checked, "rewritten": rewritten, "other": other,
                  "orphans": len(orphans), "tmp": len(tmp), "problems": len(problems)}))
for p in problems:
    print("PROBLEM:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
