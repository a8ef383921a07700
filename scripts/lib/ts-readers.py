#!/usr/bin/env python3
"""Clients of a never-ending MPEG-TS channel, for scripts/iptv-soak.sh: CLIENTS readers of URL at once, reading as
fast as the server sends, while the server process's RSS (/proc/PID/status VmRSS) and the cache directory's size
(allocated blocks, as du counts them) are sampled — by volume (every --sample-mb MB read by the slowest reader) or
by time (every --sample-seconds). Then every reader leaves, and the origin's log must show its one connection
closed.

Checks (exit 1 on the first that fails, after printing every sample):
  - one /live/channel.ts origin connection served all the readers (never two open at once, one open at the end);
  - RSS after warm-up (the first sample) grew by at most --max-rss-growth-mb to any later sample;
  - the cache directory grew by at most --max-cache-growth-mb;
  - after the last reader left, the origin saw its connection closed within 60 s.

usage: ts-readers.py URL --pid PID --cache-dir DIR --origin-log FILE (--volume-mb N --sample-mb M |
       --minutes N --sample-seconds S) [--clients 3] [--max-rss-growth-mb 24] [--max-cache-growth-mb 2]
"""
import argparse, http.client, os, socket, sys, threading, time
from urllib.parse import urlsplit


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def tree_kib(root):
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total // 1024


def concurrency(log, skip):
    """The most /live/channel.ts origin connections open at once, and how many are open now, from the log's lines
    after the first `skip`."""
    try:
        with open(log) as f:
            lines = f.readlines()[skip:]
    except FileNotFoundError:
        return 0, 0
    open_now = most = 0
    for line in lines:
        parts = line.split()
        if parts[:2] == ["open", "live"]:
            open_now += 1
            most = max(most, open_now)
        elif parts[:2] == ["close", "live"]:
            open_now -= 1
    return most, open_now


def line_count(log):
    try:
        with open(log) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def live_events(log):
    opens, closes = [], []
    try:
        with open(log) as f:
            for line in f:
                parts = line.split()
                if parts[:2] == ["open", "live"]:
                    opens.append(parts[2])
                elif parts[:2] == ["close", "live"]:
                    closes.append(parts[2])
    except FileNotFoundError:
        pass
    return opens, closes


class Reader(threading.Thread):
    def __init__(self, url):
        super().__init__(daemon=True)
        self.url = urlsplit(url)
        self.count = 0
        self.error = None
        self.connection = None
        self.stopping = False
        self.started = None

    def run(self):
        try:
            self.connection = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=120)
            self.connection.request("GET", self.url.path)
            response = self.connection.getresponse()
            if response.status != 200:
                raise RuntimeError(f"status {response.status}")
            self.started = time.time()
            while not self.stopping:
                data = response.read1(1 << 16)
                if not data:
                    raise RuntimeError("the body ended")
                self.count += len(data)
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            if not self.stopping:
                self.error = error

    def leave(self):
        self.stopping = True
        try:
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        except Exception:  # noqa: BLE001
            pass
        self.connection.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--origin-log", required=True)
    p.add_argument("--clients", type=int, default=3)
    p.add_argument("--volume-mb", type=float)
    p.add_argument("--sample-mb", type=float, default=25)
    p.add_argument("--minutes", type=float)
    p.add_argument("--sample-seconds", type=float, default=30)
    p.add_argument("--max-rss-growth-mb", type=float, default=24)
    p.add_argument("--max-cache-growth-mb", type=float, default=2)
    a = p.parse_args()
    if (a.volume_mb is None) == (a.minutes is None):
        sys.exit("give --volume-mb or --minutes")

    opens_before, _ = live_events(a.origin_log)
    lines_before = line_count(a.origin_log)
    readers = [Reader(a.url) for _ in range(a.clients)]
    for reader in readers:
        reader.start()
    started = time.monotonic()
    samples = []  # (seconds, MB read by the slowest reader, RSS KiB, cache KiB)
    next_mark = a.sample_mb if a.volume_mb is not None else a.sample_seconds
    print(f"{'seconds':>8} {'MB/client':>10} {'RSS MiB':>8} {'cache MiB':>10}", flush=True)
    while True:
        time.sleep(0.02)
        for reader in readers:
            if reader.error:
                sys.exit(f"FAIL: a reader failed: {reader.error}")
        slowest = min(reader.count for reader in readers) / 1e6
        elapsed = time.monotonic() - started
        position = slowest if a.volume_mb is not None else elapsed
        if position >= next_mark:
            sample = (elapsed, slowest, rss_kib(a.pid), tree_kib(a.cache_dir))
            samples.append(sample)
            print(f"{sample[0]:8.1f} {sample[1]:10.1f} {sample[2] / 1024:8.1f} {sample[3] / 1024:10.2f}", flush=True)
            next_mark += a.sample_mb if a.volume_mb is not None else a.sample_seconds
        if (a.volume_mb is not None and slowest >= a.volume_mb) or (a.minutes is not None and elapsed >= a.minutes * 60):
            break
        if a.volume_mb is not None and elapsed > 3600:
            sys.exit(f"FAIL: {slowest:.0f} MB in an hour")

    opens, _ = live_events(a.origin_log)
    new = [n for n in opens if n not in opens_before]
    most, open_now = concurrency(a.origin_log, lines_before)
    total = sum(reader.count for reader in readers) / 1e6
    for reader in readers:
        reader.leave()
    closed = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, closes = live_events(a.origin_log)
        if all(n in closes for n in new):
            closed = True
            break
        time.sleep(0.1)
    first, last = samples[0], samples[-1]
    rss_growth = (max(s[2] for s in samples[1:] or [first]) - first[2]) / 1024
    cache_growth = (max(s[3] for s in samples) - first[3]) / 1024
    print(
        f"summary: {a.clients} clients, {total:.0f} MB delivered in {last[0]:.0f} s; origin connections {len(new)} "
        f"(at most {most} at once); "
        f"RSS {first[2] / 1024:.1f} -> {last[2] / 1024:.1f} MiB (max growth {rss_growth:+.1f}); "
        f"cache {first[3] / 1024:.2f} -> {last[3] / 1024:.2f} MiB (max growth {cache_growth:+.2f})",
        flush=True)
    # One origin connection for all the readers: never two at once, one open while they read. (A request the origin
    # client sent again at once — a kept-alive connection the origin had closed — counts twice in `new`.)
    if most != 1 or open_now != 1:
        with open(a.origin_log) as f:
            events = [line.strip() for line in f if "live" in line]
        sys.exit(f"FAIL: {most} origin connections open at once ({open_now} at the end) for {a.clients} clients (expected 1); "
                 f"{len(new)} opened; readers answered at "
                 f"{[f'{r.started:.3f}' if r.started else None for r in readers]}; origin: {events[-8:]}")
    if rss_growth > a.max_rss_growth_mb:
        sys.exit(f"FAIL: RSS grew {rss_growth:.1f} MiB after warm-up (bound {a.max_rss_growth_mb})")
    if cache_growth > a.max_cache_growth_mb:
        sys.exit(f"FAIL: the cache directory grew {cache_growth:.2f} MiB (bound {a.max_cache_growth_mb})")
    if not closed:
        sys.exit("FAIL: the origin connection was still open 60 s after the last client left")
    print("ok: one origin connection for all clients, closed after the last left; RSS and cache flat")


if __name__ == "__main__":
    main()
