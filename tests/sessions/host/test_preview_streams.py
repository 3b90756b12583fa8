"""Preview streams end to end on the host's side: a real HostDaemon dials a websocket server
standing in for the gateway, runs a turn whose agent serves HTTP in its bwrap sandbox, and
carries the gateway's streams there (docs/previews.md): bytes, credit, half-close, reset and
every refusal."""

import asyncio
import contextlib
import hashlib
import json
import socket
import time
from collections import defaultdict

from websockets.asyncio.server import serve

from sessions.host import preview_streams
from sessions.host.daemon import HostDaemon
from sessions.host.sandbox import Sandbox
from tests.sessions.host import a_turn
from tests.sessions.host.test_preview_door import backgrounded, serving
from tests.sessions.host.test_stop import marker, processes_with

HTTP, UNTIL_EOF, NEVER_READS, OTHER = 8000, 8001, 8002, 8100  # in the sandboxes (OTHER: session 2's)


class Gateway:
    """The gateway's end of the host's websocket: what the host sent, and ways to send."""

    def __init__(self):
        self.ws = None
        self.messages: list[dict] = []
        self.data: dict[int, bytearray] = defaultdict(bytearray)
        self.largest_frame = 0
        self.changed = asyncio.Event()
        self.requests = 0

    async def handler(self, ws):
        self.ws = ws
        async for raw in ws:
            if isinstance(raw, bytes):
                assert raw[:1] == b"D"
                self.largest_frame = max(self.largest_frame, len(raw) - 5)
                self.data[int.from_bytes(raw[1:5], "big")] += raw[5:]
            else:
                message = json.loads(raw)
                self.messages.append(message)
                if message["type"] == "register":
                    await ws.send(json.dumps({"type": "registered", "heartbeat_seconds": 0.2}))
            self.changed.set()

    async def until(self, predicate, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        while not (found := predicate()):
            assert time.monotonic() < deadline, "the host did not send what was expected in time"
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.1)
        return found

    def of(self, stream: int, kind: str) -> list[dict]:
        return [m for m in self.messages if m.get("stream") == stream and m["type"] == kind]

    def credited(self, stream: int) -> int:
        return sum(m["bytes"] for m in self.of(stream, "stream.credit"))

    def ended(self, stream: int) -> bool:
        return bool(self.of(stream, "stream.end"))

    async def send(self, message: dict) -> None:
        await self.ws.send(json.dumps(message))

    async def open(self, stream: int, port, *, session=1, window=262144) -> dict:
        await self.send({"type": "stream.open", "stream": stream, "session": session, "port": port, "window": window})
        return await self.until(
            lambda: (self.of(stream, "stream.opened") + self.of(stream, "stream.refused") or [0])[0]
        )

    async def write(self, stream: int, data: bytes, *, window: int = 262144) -> None:
        """Sends `data` in frames of 64 KiB, never more than `window` ahead of the host's credit."""
        sent = 0
        while sent < len(data):
            await self.until(lambda sent=sent: sent - self.credited(stream) < window)
            size = min(65536, len(data) - sent, window - (sent - self.credited(stream)))
            await self.ws.send(b"D" + stream.to_bytes(4, "big") + data[sent : sent + size])
            sent += size

    async def request(self, op: str, **fields) -> dict:
        self.requests += 1
        number = f"r{self.requests}"
        await self.send({"type": "request", "op": op, "request": number, **fields})
        return await self.until(lambda: next((m for m in self.messages if m.get("request") == number), None))


def with_host(tmp_path, scenario, *, sessions=((1, HTTP),), sandbox: Sandbox | None = None):
    """Runs `scenario(gateway, daemon)` with the daemon connected and each session's turn serving."""

    async def run():
        gateway = Gateway()
        async with serve(gateway.handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            daemon = HostDaemon(
                gateway=f"http://127.0.0.1:{port}", token="t", name="h", capacity=4, state_dir=tmp_path / "state"
            )
            if sandbox is not None:
                daemon.sandbox, daemon.allow_unsandboxed = sandbox, True
            connection = asyncio.create_task(daemon.run())
            try:
                await gateway.until(lambda: gateway.ws is not None and daemon.connected.is_set())
                for number, (session, serves) in enumerate(sessions, start=1):
                    await gateway.send(a_turn(serving(serves), number=number, session=session))
                if sandbox is None:
                    for session, serves in sessions:
                        await ready(gateway, session, serves)
                await scenario(gateway, daemon)
            finally:
                await daemon.close()
                connection.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await connection

    asyncio.run(run())


async def ready(gateway: Gateway, session: int, port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not (answer := await gateway.request("preview.probe", session=session, port=port))["listening"]:
        assert time.monotonic() < deadline, f"session {session}'s server never listened: {answer}"
        await asyncio.sleep(0.05)


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: localhost:{HTTP}\r\nConnection: close\r\n\r\n".encode()


def test_a_request_and_its_response_travel_one_stream_which_then_is_gone(tmp_path):
    async def scenario(gateway, daemon):
        assert (await gateway.open(1, HTTP))["type"] == "stream.opened"
        await gateway.write(1, get("/page"))
        await gateway.send({"type": "stream.end", "stream": 1})
        await gateway.until(lambda: gateway.ended(1))
        answer = bytes(gateway.data[1])
        assert answer.split(b"\r\n")[0].endswith(b" 200 OK"), answer
        assert answer.endswith(f"hello from {HTTP} at /page\n".encode())
        await gateway.until(lambda: not daemon.previews.streams)  # both ends sent: gone

    with_host(tmp_path, scenario)


def test_the_host_sends_no_more_than_the_window_until_credit_comes(tmp_path):
    size, window = 1_000_000, 65536

    async def scenario(gateway, daemon):
        await gateway.open(2, HTTP, window=window)
        await gateway.write(2, get(f"/big/{size}"))
        await gateway.until(lambda: len(gateway.data[2]) >= window)
        await asyncio.sleep(0.5)  # room for what a host that ignored the window would send
        assert len(gateway.data[2]) == window
        granted = window
        while not gateway.ended(2):
            if len(gateway.data[2]) == granted:  # everything credited has come: credit some more
                await gateway.send({"type": "stream.credit", "stream": 2, "bytes": 100_000})
                granted += 100_000
            # Until all that is credited has come, not merely some: a wait already met returns without
            # yielding, and this loop would spin with the host's frames never read.
            await gateway.until(lambda g=granted: len(gateway.data[2]) >= g or gateway.ended(2))
            assert len(gateway.data[2]) <= granted
        head, _, body = bytes(gateway.data[2]).partition(b"\r\n\r\n")
        assert b" 200 " in head and body == b"x" * size
        assert gateway.largest_frame <= preview_streams.MAX_PAYLOAD

    with_host(tmp_path, scenario)


def test_an_upload_is_credited_as_written_and_more_than_the_window_resets(tmp_path):
    body = bytes(range(256)) * 3000  # 768,000 bytes: three windows

    async def scenario(gateway, daemon):
        opened = await gateway.open(3, HTTP)
        head = f"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        await gateway.write(3, head.encode() + body, window=opened["window"])
        await gateway.until(lambda: gateway.ended(3))
        assert bytes(gateway.data[3]).endswith(f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode())
        assert gateway.credited(3) >= len(body)  # credit came back for what was written

        # A server that never reads: the bytes pile up on the host until the window is passed (an
        # HTTP server answering 400 to them and closing raced the check with a broken pipe).
        # The host credits what it wrote on, so the excess shows once the server's and the door's
        # socket buffers (a few MB) are full: send far past them without waiting for credit.
        await gateway.open(4, NEVER_READS)
        for _ in range(512):  # 32 MiB
            await gateway.ws.send(b"D" + (4).to_bytes(4, "big") + b"y" * 65536)
        (reset,) = await gateway.until(lambda: gateway.of(4, "stream.reset"))
        assert "window" in reset["reason"]
        await gateway.until(lambda: 4 not in daemon.previews.streams)

    with_host(tmp_path, scenario)


def test_credit_comes_only_for_bytes_the_server_took(tmp_path):
    async def scenario(gateway, daemon):
        await gateway.open(8, NEVER_READS)
        writing = asyncio.create_task(gateway.write(8, b"z" * 40_000_000))
        try:
            await gateway.until(lambda: gateway.credited(8) > 0)
            while True:  # until the socket's buffers are full and credit stops
                credited = gateway.credited(8)
                await asyncio.sleep(0.5)
                if gateway.credited(8) == credited:
                    break
            assert credited < 20_000_000 and not writing.done()
        finally:
            writing.cancel()

    with_host(tmp_path, scenario)


def test_half_close_lets_the_server_answer_after_the_request_ended(tmp_path):
    async def scenario(gateway, daemon):
        await gateway.open(5, UNTIL_EOF)
        await gateway.write(5, b"ping")
        await asyncio.sleep(0.3)
        assert gateway.data[5] == b""  # it reads until EOF before it answers
        await gateway.send({"type": "stream.end", "stream": 5})
        await gateway.until(lambda: gateway.ended(5))
        assert gateway.data[5] == b"got 4 bytes: ping"

    with_host(tmp_path, scenario)


def test_a_reset_drops_the_stream_and_its_flow_stops(tmp_path):
    async def scenario(gateway, daemon):
        await gateway.open(6, HTTP, window=16 * 1024 * 1024)
        await gateway.write(6, get("/big/500000000"))
        await gateway.until(lambda: len(gateway.data[6]) > 100_000)
        await gateway.send({"type": "stream.reset", "stream": 6, "reason": "the browser went away"})
        await gateway.until(lambda: not daemon.previews.streams)
        await asyncio.sleep(0.2)
        got = len(gateway.data[6])
        await asyncio.sleep(0.5)
        assert len(gateway.data[6]) == got < 500_000_000
        assert not gateway.ended(6)

    with_host(tmp_path, scenario)


def test_other_messages_are_not_held_behind_a_busy_stream(tmp_path):
    async def scenario(gateway, daemon):
        await gateway.open(7, HTTP, window=1 << 24)
        await gateway.write(7, get("/big/2000000000"))
        await gateway.until(lambda: len(gateway.data[7]) > 1_000_000)
        beats = sum(1 for m in gateway.messages if m["type"] == "heartbeat")
        flowed = len(gateway.data[7])
        for _ in range(10):
            await gateway.send({"type": "stream.credit", "stream": 7, "bytes": 1 << 24})  # keep it flowing
            started = time.monotonic()
            answer = await gateway.request("preview.probe", session=1, port=HTTP)
            assert answer["listening"] and time.monotonic() - started < 1.0
            await asyncio.sleep(0.1)
        assert not gateway.ended(7) and len(gateway.data[7]) > flowed + 10_000_000  # flowing all along
        assert sum(1 for m in gateway.messages if m["type"] == "heartbeat") > beats  # every 0.2 s

    with_host(tmp_path, scenario)


def test_refusals_say_why(tmp_path, monkeypatch):
    outside = socket.create_server(("127.0.0.1", 0))  # the host's own loopback
    monkeypatch.setattr(preview_streams, "MAX_STREAMS", 3)

    async def scenario(gateway, daemon):
        async def refused(stream, port, session=1) -> dict:
            started = time.monotonic()
            answer = await gateway.open(stream, port, session=session)
            assert answer["type"] == "stream.refused" and time.monotonic() - started < 2, answer
            return answer

        assert (await refused(10, 8050))["reason"] == "not_listening"
        assert (await refused(11, outside.getsockname()[1]))["reason"] == "not_listening"
        assert (await refused(12, OTHER))["reason"] == "not_listening"  # session 2's server
        assert (await gateway.open(13, OTHER, session=2))["type"] == "stream.opened"
        assert (await refused(14, HTTP, session=999))["reason"] == "unknown_session"
        probe = await gateway.request("preview.probe", session=1, port=8050)
        assert (probe["ok"], probe["listening"]) == (True, False)
        assert "nothing listens on port 8050" in probe["why"]
        for stream in (15, 16):
            assert (await gateway.open(stream, HTTP))["type"] == "stream.opened"
        busy = await refused(17, HTTP)
        assert busy["reason"] == "busy" and "at most 3" in busy["text"]
        for stream in (13, 15, 16):
            await gateway.send({"type": "stream.reset", "stream": stream, "reason": "done with it"})
        await daemon.runners[1].stop()
        await gateway.until(lambda: [m for m in gateway.messages if m["type"] == "turn.finished"])
        assert (await refused(18, HTTP))["reason"] == "not_running"
        probe = await gateway.request("preview.probe", session=1, port=HTTP)
        assert not probe["listening"] and "running now" in probe["why"]

    try:
        with_host(tmp_path, scenario, sessions=((1, HTTP), (2, OTHER)))
    finally:
        outside.close()


def test_streams_are_dropped_when_the_connection_drops(tmp_path):
    async def scenario(gateway, daemon):
        await gateway.open(20, UNTIL_EOF)
        await gateway.open(21, HTTP)
        previews = daemon.previews
        writers = [stream.writer for stream in previews.streams.values()]
        await gateway.ws.close()
        await gateway.until(lambda: not previews.streams and all(w.transport.is_closing() for w in writers))

    with_host(tmp_path, scenario)


def test_a_host_without_a_sandbox_serves_no_previews(tmp_path):
    async def scenario(gateway, daemon):
        await gateway.until(lambda: [m for m in gateway.messages if m["type"] == "turn.started"])
        answer = await gateway.open(30, HTTP)
        assert (answer["type"], answer["reason"]) == ("stream.refused", "no_sandbox")
        probe = await gateway.request("preview.probe", session=1, port=HTTP)
        assert not probe["listening"] and "without a sandbox" in probe["why"]

    with_host(tmp_path, scenario, sandbox=Sandbox.none("a test host without bwrap"))


def test_a_previewed_server_is_kept_past_its_turn_until_the_gateway_says_no_previews(tmp_path):
    mark = marker()

    async def scenario(gateway, daemon):
        await gateway.send(a_turn(backgrounded(HTTP, mark), number=40, previews=[HTTP]))
        finished = await gateway.until(lambda: [m for m in gateway.messages if m["type"] == "turn.finished"])
        assert finished[0]["status"] == "done"
        await ready(gateway, 1, HTTP)
        assert (await gateway.open(40, HTTP))["type"] == "stream.opened"
        await gateway.write(40, get("/kept"))
        await gateway.until(lambda: gateway.ended(40))
        assert bytes(gateway.data[40]).endswith(f"hello from {HTTP} at /kept\n".encode())
        await gateway.send({"type": "session.previews", "session": 1, "ports": []})
        await gateway.until(lambda: not processes_with(mark))
        answer = await gateway.open(41, HTTP)
        assert (answer["type"], answer["reason"]) == ("stream.refused", "not_running")

    with_host(tmp_path, scenario, sessions=())
