#!/usr/bin/env python3
"""Soak client for Benchmarks/soak.sh (loopback only, bounded).

players mode: PLAYERS simulated players for SECONDS against a running `hlscache serve`, each on one keep-alive
connection: VOD players load a variant playlist and fetch its segments at real pace (one per EXTINF), from a
random start (so some segments are misses, most are hits); live players (LIVE_SHARE of them) reload a live
playlist every target duration and fetch each new segment. Every body is checked against the origin's file
(SHA-256). Reports requests, errors, latency percentiles and the server's RSS (VmRSS sampled every 5 s).

idle mode: opens CONNECTIONS keep-alive connections, sends one /healthz on each, holds them all idle for HOLD
seconds, then sends a second /healthz on every one of them and counts the failures. A connection that sat idle
longer than the server's idle timeout (60 s; opening 10,000 can take that long on a busy machine) may have been
closed by the server, as designed: those are counted apart, not as failures.
"""
import argparse, asyncio, hashlib, json, os, random, re, statistics, sys, time


class Conn:
    def __init__(self, port):
        self.port, self.reader, self.writer = port, None, None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self):
        if self.writer:
            self.writer.close()
        self.reader = self.writer = None

    async def _get(self, path):
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: soak\r\nAccept-Encoding: identity\r\n\r\n".encode())
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            body = b"".join(parts)
        else:
            body = await self.reader.read()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body

    async def get(self, path, stats):
        """One request; a keep-alive connection the server closed while idle is reopened once (as players do)."""
        for attempt in range(2):
            fresh = self.writer is None
            if fresh:
                await self.open()
            start = time.monotonic()
            try:
                result = await asyncio.wait_for(self._get(path), 30)
                stats["latencies"].append(time.monotonic() - start)
                return result
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError) as e:
                self.close()
                if fresh or attempt == 1:
                    raise
                stats["reconnects"] += 1


def uris(playlist):
    return [l for l in playlist.decode().splitlines() if l and not l.startswith("#")]


def origin_file(args, uri):
    # /http/127.0.0.1:PORT/v0/seg0001.ts -> v0/seg0001.ts ; /live/segN.ts -> v0 segment N mod count
    rel = uri.split("/", 3)[3].split("?")[0]
    m = re.match(r"live/seg(\d+)\.ts$", rel)
    if m:
        return args.live_map[int(m.group(1)) % len(args.live_map)]
    return rel


async def player(args, n, stats, stop):
    await asyncio.sleep(random.uniform(0, args.ramp))
    conn = Conn(args.port)
    live = random.random() < args.live_share
    prefix = f"/http/{args.origin_authority}"
    try:
        if live:
            seen = set()
            while time.monotonic() < stop:
                status, body = await conn.get(prefix + "/live/index.m3u8", stats)
                stats["requests"] += 1
                if status != 200 or not body.startswith(b"#EXTM3U"):
                    stats["errors"].append(f"live playlist {status}")
                new = [u for u in uris(body) if u not in seen]
                for u in new[-2:] if not seen else new:
                    seen.add(u)
                    await fetch_segment(args, conn, u, stats)
                await asyncio.sleep(2)
        else:
            variant = random.randrange(args.variants)
            status, body = await conn.get(f"{prefix}/v{variant}/index.m3u8", stats)
            stats["requests"] += 1
            if status != 200:
                stats["errors"].append(f"playlist {status}")
                return
            segments = uris(body)
            i = random.randrange(len(segments))
            while time.monotonic() < stop:
                t0 = time.monotonic()
                await fetch_segment(args, conn, segments[i % len(segments)], stats)
                i += 1
                await asyncio.sleep(max(0, args.pace - (time.monotonic() - t0)))
    except Exception as e:
        stats["errors"].append(f"player {n}: {type(e).__name__} {e}")
    finally:
        conn.close()


async def fetch_segment(args, conn, uri, stats):
    status, body = await conn.get(uri, stats)
    stats["requests"] += 1
    stats["bytes"] += len(body)
    expected = args.hashes.get(origin_file(args, uri))
    if status != 200:
        stats["errors"].append(f"{uri}: status {status}")
    elif expected is None or hashlib.sha256(body).digest() != expected:
        stats["errors"].append(f"{uri}: bytes differ from the origin ({len(body)} bytes)")


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None


async def sampler(pid, samples, stop):
    start = time.monotonic()
    while time.monotonic() < stop:
        samples.append((round(time.monotonic() - start), rss_kib(pid)))
        await asyncio.sleep(5)


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


async def players_mode(args):
    args.hashes = {}
    for root, _, files in os.walk(args.origin_dir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                args.hashes[os.path.relpath(path, args.origin_dir)] = hashlib.sha256(f.read()).digest()
    args.live_map = sorted(k for k in args.hashes if k.startswith("v0/") and k.endswith(".ts"))
    args.variants = len({k.split("/")[0] for k in args.hashes if k.startswith("v")})
    stats = {"requests": 0, "bytes": 0, "errors": [], "latencies": [], "reconnects": 0}
    samples = []
    stop = time.monotonic() + args.seconds
    await asyncio.gather(sampler(args.pid, samples, stop), *(player(args, n, stats, stop) for n in range(args.players)))
    lat = stats["latencies"]
    warm = [kib for t, kib in samples if t >= 60 and kib] or [kib for _, kib in samples if kib]
    result = {
        "mode": "players", "players": args.players, "seconds": args.seconds, "requests": stats["requests"],
        "requests_per_second": round(stats["requests"] / args.seconds, 1), "mib": round(stats["bytes"] / 2**20, 1),
        "errors": len(stats["errors"]), "first_errors": stats["errors"][:5], "reconnects": stats["reconnects"],
        "latency_ms": {k: round(pct(lat, q) * 1000, 1) for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))} if lat else None,
        "rss_mib": {"at_60s": round(warm[0] / 1024, 1) if warm else None, "end": round(samples[-1][1] / 1024, 1) if samples and samples[-1][1] else None,
                    "max_after_warmup": round(max(warm) / 1024, 1) if warm else None, "min_after_warmup": round(min(warm) / 1024, 1) if warm else None},
        "rss_samples_mib": [(t, round(k / 1024, 1)) for t, k in samples if k],
    }
    print(json.dumps(result))
    return 0 if not stats["errors"] else 1


async def idle_mode(args):
    conns, failures = [], {"open": 0, "first": 0, "second": 0}
    idle_closed = 0  # connections idle past the server's idle timeout (60 s) and closed by it: expected
    sem = asyncio.Semaphore(256)
    stats = {"latencies": [], "reconnects": 0}

    async def opener():
        async with sem:
            c = Conn(args.port)
            try:
                await c.open()
                status, _ = await c.get("/healthz", stats)
                if status != 200:
                    failures["first"] += 1
                c.answered = time.monotonic()
                conns.append(c)
            except Exception:
                failures["open"] += 1

    t0 = time.monotonic()
    await asyncio.gather(*(opener() for _ in range(args.connections)))
    opened = time.monotonic() - t0
    rss_held = rss_kib(args.pid)
    await asyncio.sleep(args.hold)

    async def check(c):
        nonlocal idle_closed
        async with sem:
            idle = time.monotonic() - c.answered
            try:
                status, _ = await asyncio.wait_for(c._get("/healthz"), 30)
                if status != 200:
                    failures["second"] += 1
            except Exception:
                if idle >= args.idle_timeout - 2:
                    idle_closed += 1
                else:
                    failures["second"] += 1
            finally:
                c.close()

    await asyncio.gather(*(check(c) for c in conns))
    result = {"mode": "idle", "connections": args.connections, "held": len(conns), "open_seconds": round(opened, 1),
              "hold_seconds": args.hold, "failures": failures, "closed_after_server_idle_timeout": idle_closed, "rss_mib_while_held": round(rss_held / 1024, 1) if rss_held else None}
    print(json.dumps(result))
    return 0 if len(conns) == args.connections and not any(failures.values()) else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["players", "idle"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--origin-authority", default="")
    p.add_argument("--origin-dir", default="")
    p.add_argument("--players", type=int, default=500)
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--pace", type=float, default=4.0, help="seconds between a VOD player's segments (EXTINF)")
    p.add_argument("--live-share", type=float, default=0.2)
    p.add_argument("--ramp", type=float, default=10)
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--hold", type=float, default=30)
    p.add_argument("--idle-timeout", type=float, default=60, help="the server's idle timeout")
    args = p.parse_args()
    sys.exit(asyncio.run(players_mode(args) if args.mode == "players" else idle_mode(args)))


if __name__ == "__main__":
    main()
