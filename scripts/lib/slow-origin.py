#!/usr/bin/env python3
"""A throttled HTTP origin on 127.0.0.1 for the reliability scripts (crash-cycles.sh, disk-full.sh, soak.sh).

Serves files from a directory with Content-Length, single Range requests and HEAD, sending bodies in
CHUNK-byte pieces with DELAY seconds between them, so downloads take long enough to be interrupted.
Writes the bound port to PORTFILE. Stops by itself after MAX_SECONDS (bounded: nothing is left running).

usage: slow-origin.py DIR PORTFILE [--chunk 65536] [--delay 0.01] [--max-seconds 3600] [--log FILE]
(--log: one "METHOD PATH TIME PORT HEADERS" line per request, appended as it arrives: the wall-clock time, the client's
port and the request's Range, If-None-Match and If-Modified-Since (- when absent), so two fetches of one path can be
told apart — one connection retrying, two clients, a range or a revalidation.)
"""
import argparse, os, re, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import unquote, urlsplit

args = None
LOG_LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _file(self):
        path = unquote(urlsplit(self.path).path)
        if ".." in path.split("/"):
            return None
        full = os.path.join(args.dir, path.lstrip("/"))
        return full if os.path.isfile(full) else None

    def do_HEAD(self):
        self.do_GET(head=True)

    def live(self, head):
        """/live/index.m3u8: a sliding 6-segment window advancing every 2 s; /live/segN.ts maps onto the
        VOD segments of v0 (so a player's bytes can be checked)."""
        path = urlsplit(self.path).path
        if path == "/live/index.m3u8":
            now = int(time.time() / 2)
            lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", f"#EXT-X-MEDIA-SEQUENCE:{now - 5}"]
            for n in range(now - 5, now + 1):
                lines += ["#EXTINF:2.000,", f"seg{n}.ts"]
            return ("\n".join(lines) + "\n").encode(), "application/vnd.apple.mpegurl"
        m = re.match(r"/live/seg(\d+)\.ts$", path)
        if m:
            segments = sorted(os.listdir(os.path.join(args.dir, "v0")))
            segments = [x for x in segments if x.endswith(".ts")]
            with open(os.path.join(args.dir, "v0", segments[int(m.group(1)) % len(segments)]), "rb") as f:
                return f.read(), "video/mp2t"
        return None

    def do_GET(self, head=False):
        if args.log:
            with LOG_LOCK, open(args.log, "a") as log:
                extra = " ".join(
                    f"{name}={self.headers.get(name, '-').replace(' ', '')}" for name in ("Range", "If-None-Match", "If-Modified-Since"))
                log.write(f"{'HEAD' if head else 'GET'} {self.path} {time.time():.3f} {self.client_address[1]} {extra}\n")
        if self.path.startswith("/live/"):
            generated = self.live(head)
            if generated is not None:
                body, ctype = generated
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)
                return
        full = self._file()
        if full is None:
            body = b"not found\n"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return
        with open(full, "rb") as f:
            data = f.read()
        status, start, end = 200, 0, len(data)
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if m and int(m.group(1)) < len(data):
            start = int(m.group(1))
            end = min(int(m.group(2)) + 1, len(data)) if m.group(2) else len(data)
            status = 206
        ctype = "application/vnd.apple.mpegurl" if full.endswith(".m3u8") else "video/mp2t"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if head:
            return
        try:
            for offset in range(start, end, args.chunk):
                self.wfile.write(data[offset:min(offset + args.chunk, end)])
                self.wfile.flush()
                if args.delay > 0 and not full.endswith(".m3u8"):
                    time.sleep(args.delay)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # clients killed mid-request (the point of the crash script) are not errors


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("portfile")
    parser.add_argument("--chunk", type=int, default=65536)
    parser.add_argument("--delay", type=float, default=0.01)
    parser.add_argument("--max-seconds", type=float, default=3600)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 1024
    with open(args.portfile + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.portfile + ".tmp", args.portfile)
    threading.Timer(args.max_seconds, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
