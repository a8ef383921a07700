#!/usr/bin/env python3
"""An IPTV provider on 127.0.0.1 for scripts/iptv-soak.sh: a channel list of three channels and what they point at.

  /list.m3u            #EXTM3U channel list: one (HLS, answers 403 unless the User-Agent its #EXTVLCOPT names
                       is sent), two (a never-ending MPEG-TS body), three (HLS, with a tvg-logo)
  /one/…, /three/…     files of DIR/one and DIR/three (ffmpeg-made HLS)
  /live/channel.ts     DIR/loop.ts sent again and again, for ever: no Content-Length, Connection: close (what IPTV
                       servers send); paced at --rate bytes/s (0: as fast as the client takes it)
  /logo.png            a few bytes

Writes the bound port to PORTFILE. --log FILE gets one line per event: "GET PATH UA=…", "open live N" when a
/live/channel.ts answer starts and "close live N BYTES" when it ends (the client went away). Stops by itself
after --max-seconds.

usage: iptv-origin.py DIR PORTFILE [--rate 0] [--log FILE] [--max-seconds 7200]
"""
import argparse, itertools, os, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import unquote, urlsplit

AGENT = "HLSCacheSoakTV/1.0 (channel one)"
args = None
LOCK = threading.Lock()
COUNTER = itertools.count(1)


def log(line):
    if args.log:
        with LOCK, open(args.log, "a") as f:
            f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_body(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = unquote(urlsplit(self.path).path)
        log(f"GET {path} UA={self.headers.get('User-Agent', '')}")
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if path == "/list.m3u":
            text = (
                f'#EXTM3U x-tvg-url="{base}/epg.xml"\n'
                f'#EXTINF:-1 tvg-id="one" group-title="News",Channel One\n'
                f"#EXTVLCOPT:http-user-agent={AGENT}\n"
                f"{base}/one/index.m3u8\n"
                f'#EXTINF:-1 tvg-id="two" group-title="Live",Channel Two\n'
                f"{base}/live/channel.ts\n"
                f'#EXTINF:-1 tvg-id="three" tvg-logo="{base}/logo.png",Channel Three\n'
                f"{base}/three/index.m3u8\n"
            )
            return self.send_body(200, text.encode(), "audio/x-mpegurl")
        if path == "/logo.png":
            return self.send_body(200, b"\x89PNG\r\n\x1a\nlogo", "image/png")
        if path == "/live/channel.ts":
            return self.live()
        if path.startswith("/one/") and self.headers.get("User-Agent") != AGENT:
            return self.send_body(403, b"forbidden: wrong player\n", "text/plain")
        full = os.path.join(args.dir, path.lstrip("/"))
        if ".." in path.split("/") or not os.path.isfile(full):
            return self.send_body(404, b"not found\n", "text/plain")
        with open(full, "rb") as f:
            data = f.read()
        return self.send_body(200, data, "application/vnd.apple.mpegurl" if full.endswith(".m3u8") else "video/mp2t")

    def live(self):
        with open(os.path.join(args.dir, "loop.ts"), "rb") as f:
            loop = f.read()
        chunk = 188 * 348  # 65,424 bytes: whole TS packets
        number = next(COUNTER)
        self.send_response(200)
        self.send_header("Content-Type", "video/mp2t")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        log(f"open live {number} at {time.time():.3f}")
        sent = 0
        started = time.monotonic()
        try:
            while True:
                offset = sent % len(loop)
                piece = loop[offset:offset + chunk]
                self.wfile.write(piece)
                sent += len(piece)
                if args.rate > 0:
                    ahead = sent / args.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        log(f"close live {number} {sent} at {time.time():.3f}")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("portfile")
    parser.add_argument("--rate", type=float, default=0)
    parser.add_argument("--log", default=None)
    parser.add_argument("--max-seconds", type=float, default=7200)
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    with open(args.portfile + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.portfile + ".tmp", args.portfile)
    threading.Timer(args.max_seconds, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
