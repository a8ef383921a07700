#!/usr/bin/env python3
"""Black-box HTTP fuzzer for a running `hlscache serve` on 127.0.0.1 (bounded, loopback only).

Sends random and mutated raw HTTP/1.x requests (request lines, methods, targets with traversal and encoding
tricks, header names/values, duplicated and conflicting framing headers, Range values, chunked bodies, binary
garbage, truncated heads), WORKERS connections at a time, for SECONDS. Every 2 s it checks that /healthz still
answers 200 and that the server process (PID) is alive. A response must start with "HTTP/1.1 " and a valid
status, or the server may close the connection; it must never answer with a 5xx other than 502/503/504 (origin
errors), and it must never crash.

usage: http-fuzz.py PORT PID ORIGIN_AUTHORITY [--seconds 600] [--workers 16] [--seed N]
Prints one JSON line: requests, responses by status class, closes, health checks, failures.
"""
import argparse, json, os, random, socket, sys, threading, time

A = None
TARGETS = ["/healthz", "/", "/keys/0123456789abcdef0123456789abcdef", "/keys/../master.key", "/http/", "/https",
           "/http/{o}/v0/index.m3u8", "/http/{o}/master.m3u8", "/http/{o}/v0/seg0001.ts", "/http/{o}/missing.ts",
           "/http/{o}/%2e%2e/x", "/http/{o}/a%2f..%2fb", "/http/169.254.169.254/latest/", "/http/[::1]:1/x",
           "/http/{o}/v1/seg0002.ts?token=1&Expires=2", "*", "http://example.com/x", "/api/v1/items", "/metrics"]
METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT", "PRI", "get", "G\x00T", ""]
VERSIONS = ["HTTP/1.1", "HTTP/1.0", "HTTP/0.9", "HTTP/2.0", "HTTP/1.1 ", "HTTP/1.", "HTTP/11", ""]
HEADERS = ["Host: x", "Range: bytes=0-99", "Range: bytes=-5", "Range: bytes=99999999999999999999-", "Range: bytes=5-1",
           "Range: bytes=0-1,2-3", "Range: items=0-1", "If-None-Match: *", "If-Modified-Since: garbage",
           "If-Range: \"x\"", "Content-Length: 5", "Content-Length: -1", "Content-Length: 99999999999999999999",
           "Transfer-Encoding: chunked", "Transfer-Encoding: gzip, chunked", "Connection: close", "Connection: keep-alive, Upgrade",
           "Upgrade: h2c", "Expect: 100-continue", "Accept-Encoding: gzip", "Origin: https://evil.example", "X-Forwarded-For: 127.0.0.1",
           "Cookie: a=b", "Authorization: Basic Zm9vOmJhcg=="]


def mutate(data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(random.randint(1, 8)):
        op = random.randrange(6)
        pos = random.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(pos, len(b) - 1)] = random.randrange(256)
        elif op == 1:
            b[pos:pos] = random.choice([b"\r", b"\n", b"\r\n", b"\x00", b" ", b":", b"%", b"%00", b"..", b"/", b"\xff"])
        elif op == 2 and b:
            del b[pos:pos + random.randint(1, 16)]
        elif op == 3:
            b[pos:pos] = os.urandom(random.randint(1, 32))
        elif op == 4 and b:
            chunk = b[pos:pos + random.randint(1, 64)]
            b[pos:pos] = chunk * random.randint(1, 50)
        else:
            b = b[:pos]
    return bytes(b)


def make_request(origin: str) -> bytes:
    method = random.choice(METHODS) if random.random() < 0.3 else "GET"
    target = random.choice(TARGETS).replace("{o}", origin)
    version = random.choice(VERSIONS) if random.random() < 0.1 else "HTTP/1.1"
    headers = ["Host: x"] + random.sample(HEADERS, random.randint(0, 6))
    if random.random() < 0.1:
        headers += [f"X-Many-{i}: {'v' * random.randint(0, 50)}" for i in range(random.randint(1, 200))]
    if random.random() < 0.05:
        headers.append("X-Big: " + "a" * random.randint(1000, 200_000))
    body = b""
    if any(h.startswith("Transfer-Encoding") for h in headers) and random.random() < 0.7:
        body = random.choice([b"5\r\nhello\r\n0\r\n\r\n", b"FFFFFFFFFFFFFFFFF\r\n", b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"])
    elif random.random() < 0.2:
        body = os.urandom(random.randint(0, 64))
    raw = f"{method} {target} {version}\r\n".encode("latin-1", "replace") + "\r\n".join(headers).encode() + b"\r\n\r\n" + body
    if random.random() < 0.5:
        raw = mutate(raw)
    if random.random() < 0.1:
        raw = raw * random.randint(2, 5)  # pipelined copies
    return raw


VALID = set(range(100, 600))


def worker(stop, stats, lock, origin):
    while time.monotonic() < stop:
        raw = make_request(origin)
        try:
            s = socket.create_connection(("127.0.0.1", A.port), timeout=5)
        except OSError as e:
            with lock:
                stats["connect_failures"] += 1
            time.sleep(0.05)
            continue
        try:
            s.settimeout(3)
            if random.random() < 0.05:  # slow sender
                for i in range(0, len(raw), 7):
                    s.sendall(raw[i:i + 7])
                    time.sleep(0.01)
            else:
                s.sendall(raw)
            if random.random() < 0.1:
                s.shutdown(socket.SHUT_WR)
            data = b""
            while len(data) < 65536:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                s.settimeout(0.3)  # keep-alive: once answered, do not wait for the idle timeout
        except (socket.timeout, OSError):
            data = data if "data" in locals() else b""
        finally:
            s.close()
        with lock:
            stats["requests"] += 1
            if not data:
                stats["closed_without_response"] += 1
                continue
            if not data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.0 "):
                stats["failures"].append(f"not an HTTP response: {data[:40]!r} for {raw[:80]!r}")
                continue
            try:
                code = int(data[9:12])
            except ValueError:
                stats["failures"].append(f"bad status line {data[:40]!r}")
                continue
            stats["status"][f"{code // 100}xx"] = stats["status"].get(f"{code // 100}xx", 0) + 1
            if code >= 500 and code not in (502, 503, 504, 505):
                stats["failures"].append(f"{code} for {raw[:120]!r}")


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def health():
    try:
        s = socket.create_connection(("127.0.0.1", A.port), timeout=5)
        s.settimeout(5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = s.recv(4096)
        s.close()
        return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def main():
    global A
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("pid", type=int)
    p.add_argument("origin")
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--seed", type=int, default=None)
    A = p.parse_args()
    random.seed(A.seed)
    stats = {"requests": 0, "status": {}, "closed_without_response": 0, "connect_failures": 0, "failures": [],
             "health_checks": 0, "health_failures": 0}
    lock = threading.Lock()
    stop = time.monotonic() + A.seconds
    threads = [threading.Thread(target=worker, args=(stop, stats, lock, A.origin), daemon=True) for _ in range(A.workers)]
    for t in threads:
        t.start()
    crashed = False
    while time.monotonic() < stop:
        time.sleep(2)
        if not alive(A.pid):
            crashed = True
            break
        ok = health()
        with lock:
            stats["health_checks"] += 1
            if not ok:
                stats["health_failures"] += 1
    for t in threads:
        t.join(timeout=10)
    failures = stats.pop("failures")
    stats.update({"seconds": A.seconds, "server_crashed": crashed or not alive(A.pid), "failures": len(failures),
                  "first_failures": failures[:5]})
    print(json.dumps(stats))
    sys.exit(1 if stats["server_crashed"] or failures or stats["health_failures"] else 0)


if __name__ == "__main__":
    main()
