"""The recording adapter's platform: counts deliveries per tool call and answers lookups."""

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder:
    """Serve on a loopback port in a thread; `url` is what a thread's channel_id holds.

    delay: seconds each delivery takes before it counts, so concurrent ones overlap.
    hold_first: keep the first delivery's request open after counting it (until
    `release` is set), so the test can kill the worker in the middle of the effect.
    """

    def __init__(self, *, delay: float = 0.0, hold_first: bool = False):
        self.delay = delay
        self.hold_first = hold_first
        self.counts: Counter[int] = Counter()
        self.lookups: Counter[int] = Counter()
        self.first_held = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def deliveries(self, tool_call_id: int) -> int:
        with self._lock:
            return self.counts[tool_call_id]

    def __enter__(self):
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _deliver(self, tool_call_id: int) -> tuple[str, bool]:
        time.sleep(self.delay)
        with self._lock:
            self.counts[tool_call_id] += 1
            hold = self.hold_first and sum(self.counts.values()) == 1
            return f"d-{tool_call_id}-{self.counts[tool_call_id]}", hold

    def _handler(self):
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                delivery_id, hold = recorder._deliver(body["tool_call_id"])
                if hold:
                    recorder.first_held.set()
                    recorder.release.wait(timeout=60)
                try:
                    self._answer(200, {"delivery_id": delivery_id})
                except OSError:
                    pass  # the worker that sent it is gone

            def do_GET(self):
                tool_call_id = int(self.path.rsplit("/", 1)[1])
                with recorder._lock:
                    recorder.lookups[tool_call_id] += 1
                    count = recorder.counts[tool_call_id]
                if count:
                    self._answer(200, {"delivery_id": f"d-{tool_call_id}-1"})
                else:
                    self._answer(404, {"error": "not delivered"})

        return Handler
