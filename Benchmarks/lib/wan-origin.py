#!/usr/bin/env python3
"""A static HTTP/1.1 origin that behaves like one across the internet, for Benchmarks/prewarm-wan.sh.

Every response waits LATENCY seconds before its first byte (a round trip to a distant CDN edge plus its
time to answer), and every connection sends its bodies at most RATE bytes per second (a per-connection
bandwidth cap, what TCP gets over a long, lossy path). Connections are kept alive; each one is served by
its own thread, so parallel connections each get the full rate, as they do on the internet.

    wan-origin.py ROOT [--latency 0.05] [--rate-mbit 20]

Prints the port it listens on (127.0.0.1, chosen by the OS), then serves until killed. GET and HEAD of
files under ROOT; anything else is 404. Range requests get the whole file (200), which HTTP allows.
"""
import argparse
import http.server
import os
import socketserver
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds before each response's first byte")
    parser.add_argument("--rate-mbit", type=float, default=20.0, help="per-connection bandwidth cap, Mbit/s")
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    rate = args.rate_mbit * 1e6 / 8  # bytes per second
    chunk = 16 * 1024

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def do_HEAD(self):
            self.answer(send_body=False)

        def do_GET(self):
            self.answer(send_body=True)

        def answer(self, send_body):
            path = os.path.realpath(os.path.join(root, self.path.split("?", 1)[0].lstrip("/")))
            time.sleep(args.latency)
            if not path.startswith(root + os.sep) or not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with open(path, "rb") as f:
                body = f.read()
            self.send_response(200)
            kind = "application/vnd.apple.mpegurl" if path.endswith(".m3u8") else "video/mp2t"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not send_body:
                return
            # Paced: never ahead of `rate` since the first byte of the body.
            start = time.monotonic()
            for offset in range(0, len(body), chunk):
                self.wfile.write(body[offset:offset + chunk])
                ahead = (offset + chunk) / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            self.wfile.flush()

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 128

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
