"""Servers a preview shows, for the proxy's tests: plain HTTP (pages, streamed bodies, uploads,
server-sent events, cookies, an oversized head) and a WebSocket echo, on this machine's loopback."""

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from websockets.sync.server import serve

CHUNK = 64 * 1024


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list = []  # each request's path and headers (names lowercased), as this server read them

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, headers=()):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        Handler.seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
        if self.path == "/":
            self._send(200, b"<h1>hello from the sandbox</h1>", [("Content-Type", "text/html")])
        elif self.path.startswith("/big"):
            size = int(self.path.split("=", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = b"x" * CHUNK
            while size > 0:
                self.wfile.write(block[: min(size, CHUNK)])
                size -= CHUNK
        elif self.path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            for number in range(3):
                self.wfile.write(f"data: {number} {time.time()}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.5)
            self.close_connection = True
        elif self.path == "/cookies":
            self._send(
                200,
                b"cookies",
                [
                    ("Set-Cookie", "own=1; Path=/; HttpOnly"),
                    ("Set-Cookie", "wide=1; Domain=preview.localhost; Path=/"),
                    ("Set-Cookie", "sessionid=forged; Path=/"),
                ],
            )
        elif self.path.startswith("/slow"):
            time.sleep(0.5)
            self._send(200, b"slow")
        elif self.path == "/extra":  # a second answer no request asked for, in the same write
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nmine")
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
        elif self.path == "/close":
            self._send(200, b"closing", [("Connection", "close")])
            self.close_connection = True
        elif self.path == "/bighead":
            self._send(200, b"head", [("X-Big", "y" * 100_000)])
        else:
            self._send(404, b"no such page here")

    def do_POST(self):
        Handler.seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
        digest, size = hashlib.sha256(), 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while (length := int(self.rfile.readline().strip(), 16)) > 0:
                data = self.rfile.read(length)
                digest.update(data)
                size += len(data)
                self.rfile.readline()
            self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left > 0:
                data = self.rfile.read(min(left, CHUNK))
                digest.update(data)
                size += len(data)
                left -= len(data)
        self._send(200, json.dumps({"size": size, "sha256": digest.hexdigest()}).encode())


class Upstream:
    def __init__(self):
        Handler.seen = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def seen(self) -> list:
        return Handler.seen

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class EchoUpstream:
    """A WebSocket server that sends back what it receives, and what the handshake carried."""

    def __init__(self):
        self.handshakes: list[dict] = []

        def echo(connection):
            self.handshakes.append(dict(connection.request.headers.raw_items()))
            for message in connection:
                connection.send(message)

        self.server = serve(echo, "127.0.0.1", 0)
        self.port = self.server.socket.getsockname()[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
