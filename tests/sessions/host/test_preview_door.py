"""The door of previews, for real: servers an agent starts in its bwrap sandbox, reached from
the host only through the forwarder's door (a Unix socket only the daemon sees), and nothing
else: not the host's own loopback, not another session's sandbox."""

import asyncio
import os
import shlex
import socket
import sys
import time

import pytest

from sessions.host.preview_streams import PreviewRefused
from tests.sessions.host import Roots, a_turn, command, shell
from tests.sessions.host.test_stop import marker, processes_with

# The agent: an HTTP server on each port named (GET /big/N streams N bytes, POST answers the
# body's length and hash); on the port after each, one that reads to EOF and then answers; on
# the next, one that accepts and never reads.
SERVERS = r"""
import hashlib, http.server, socket, sys, threading

class Page(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/big/"):
            left = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(left))
            self.end_headers()
            while left:
                self.wfile.write(b"x" * min(left, 65536))
                left -= min(left, 65536)
            return
        self.answer(f"hello from {self.server.server_address[1]} at {self.path}\n".encode())

    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(f"{len(data)} {hashlib.sha256(data).hexdigest()}".encode())

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

def until_eof(port):
    listener = socket.create_server(("127.0.0.1", port))
    while True:
        client, _ = listener.accept()
        got = b""
        while chunk := client.recv(65536):
            got += chunk
        client.sendall(b"got %d bytes: %s" % (len(got), got[:20]))
        client.close()

def never_reads(port):
    listener = socket.create_server(("127.0.0.1", port))
    held = []
    while True:
        held.append(listener.accept()[0])

for port in (int(arg) for arg in sys.argv[1:] if arg.isdigit()):  # any other argument: a mark
    threading.Thread(target=never_reads, args=(port + 2,), daemon=True).start()
    threading.Thread(target=until_eof, args=(port + 1,), daemon=True).start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
threading.Event().wait()
"""


def serving(*ports: int) -> dict:
    return command(sys.executable, "-c", SERVERS, *map(str, ports))


async def ready(runner, port: int, timeout: float = 15.0):
    """Waits for the agent's server; returns the first connection that got through."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await runner.preview_connect(port)
        except PreviewRefused as refused:
            assert refused.reason in ("not_listening", "not_running"), refused.reason
            assert time.monotonic() < deadline, f"the agent's server on {port} never answered: {refused.text}"
            await asyncio.sleep(0.05)


async def get(runner, port: int, path: str = "/") -> bytes:
    reader, writer = await runner.preview_connect(port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def refused(runner, port) -> PreviewRefused:
    started = time.monotonic()
    with pytest.raises(PreviewRefused) as caught:
        await runner.preview_connect(port)
    assert time.monotonic() - started < 2  # at once, not after a timeout
    return caught.value


def test_a_server_in_the_sandbox_answers_through_the_door_and_nothing_else_does(tmp_path):
    roots = Roots(tmp_path)
    sandbox = roots.bwrap()
    first, _ = roots.runner(1, sandbox)
    second, _ = roots.runner(2, sandbox)
    outside = socket.create_server(("127.0.0.1", 0))  # the host's own loopback
    host_port = outside.getsockname()[1]

    async def scenario():
        assert (await refused(first, 8000)).reason == "not_running"  # no turn yet
        turns = [
            asyncio.create_task(first.run_turn(a_turn(serving(8000)))),
            asyncio.create_task(second.run_turn(a_turn(serving(8100), session=2))),
        ]
        try:
            for runner, port in ((first, 8000), (second, 8100)):
                _, writer = await ready(runner, port)
                writer.close()
            answer = await get(first, 8000, "/index.html")
            assert answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n")[0]
            assert answer.endswith(b"hello from 8000 at /index.html\n")
            nothing = await refused(first, 8050)
            assert nothing.reason == "not_listening"
            assert "nothing listens on port 8050" in nothing.text and "refused" in nothing.text.lower()
            assert (await refused(first, host_port)).reason == "not_listening"  # not the host's
            assert (await refused(first, 8100)).reason == "not_listening"  # not the other session's
            assert (await get(second, 8100)).endswith(b"hello from 8100 at /\n")
            assert (await refused(first, 3128)).reason == "not_listening"  # not the agent's way out
            for port in (0, 65536, -1, "80", True):
                assert (await refused(first, port)).reason == "not_listening"
        finally:
            for runner in (first, second):
                await runner.stop()
            finished = await asyncio.gather(*turns)
        assert [f["status"] for f in finished] == ["stopped", "stopped"]
        assert (await refused(first, 8000)).reason == "not_running"  # the turn's sandbox ended with it
        assert not first.door_socket.exists()

    try:
        asyncio.run(scenario())
    finally:
        outside.close()


def test_the_door_reads_one_bounded_line_and_half_closes(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())

    async def raw(line: bytes) -> bytes:
        reader, writer = await asyncio.open_unix_connection(short_path(runner.door_socket))
        writer.write(line)
        try:
            answer = await asyncio.wait_for(reader.read(), 10)
        except ConnectionResetError:  # closed with bytes of ours unread
            answer = b""
        writer.close()
        return answer

    async def scenario():
        turn = asyncio.create_task(runner.run_turn(a_turn(serving(8000))))
        try:
            _, writer = await ready(runner, 8000)
            writer.close()
            assert await raw(b"1" * 40 + b"\n") == b""  # too long: closed unanswered
            assert await raw(b"0\n") == b"ERR 22\n"
            assert await raw(b"8000 \n") == b"ERR 22\n"
            reader, writer = await runner.preview_connect(8001)  # reads until EOF, then answers
            writer.write(b"ping")
            await writer.drain()
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 10) == b"got 4 bytes: ping"
            writer.close()
        finally:
            await runner.stop()
            await turn

    asyncio.run(scenario())


def test_the_door_does_not_leak_into_the_agent_and_a_planted_link_is_replaced(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    runner.door_socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = tmp_path / "target"
    target.write_text("untouched")
    os.symlink(target, runner.door_socket)
    finished = asyncio.run(runner.run_turn(a_turn(shell("for f in /proc/$$/fd/*; do readlink $f; done; true"))))
    assert finished["status"] == "done", finished
    assert "socket:" not in finished["reply"], finished["reply"]  # only its pipes and /dev/null
    assert target.read_text() == "untouched" and not runner.door_socket.exists()


def test_a_host_without_bwrap_serves_no_previews(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.none())

    async def scenario():
        turn = asyncio.create_task(runner.run_turn(a_turn(serving(8000))))
        try:
            await asyncio.sleep(0.5)
            for port in (8000, 0):
                assert (await refused(runner, port)).reason == "no_sandbox"
        finally:
            await runner.stop()
            await turn

    asyncio.run(scenario())


def backgrounded(port: int, mark: str) -> dict:
    """An agent that starts its server in the background and ends its turn at once."""
    server = shlex.join([sys.executable, "-c", SERVERS, str(port), mark])
    return shell(f"{server} > /dev/null 2>&1 & echo started")


def test_a_previewed_server_outlives_its_turn_until_the_previews_are_gone(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    mark = marker()

    async def scenario():
        started = time.monotonic()
        finished = await runner.run_turn(a_turn(backgrounded(8000, mark), previews=[8000]))
        assert (finished["status"], finished["reply"]) == ("done", "started")
        assert time.monotonic() - started < 3  # the kept sandbox does not hold the turn
        _, writer = await ready(runner, 8000)  # after the turn: the sandbox was kept
        writer.close()
        assert (await get(runner, 8000, "/after")).endswith(b"hello from 8000 at /after\n")
        assert processes_with(mark)
        await runner.previews_update([8000, 5173])  # still previewed: kept
        assert (await get(runner, 8000)).endswith(b"hello from 8000 at /\n")
        await runner.previews_update([])
        assert (await refused(runner, 8000)).reason == "not_running"
        assert processes_with(mark) == [] and not runner.door_socket.exists()

    asyncio.run(scenario())


def test_a_kept_sandbox_ends_on_stop_and_before_the_next_turn_which_is_told(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    first, second = marker(), marker()

    async def scenario():
        await runner.run_turn(a_turn(backgrounded(8000, first), previews=[8000]))
        _, writer = await ready(runner, 8000)
        writer.close()
        assert await runner.stop() is False  # no turn was running; the kept sandbox ends all the same
        assert (await refused(runner, 8000)).reason == "not_running"
        assert processes_with(first) == []

        await runner.run_turn(a_turn(backgrounded(8000, second), number=2, previews=[8000]))
        _, writer = await ready(runner, 8000)
        writer.close()
        finished = await runner.run_turn(a_turn(command("cat"), number=3, prompt="and now?", previews=[8000]))
        note = "[system] Your preview servers (port 8000) stopped with the previous turn's sandbox"
        assert finished["reply"].startswith(note) and finished["reply"].endswith("\n\nand now?")
        assert processes_with(second) == []
        assert (await refused(runner, 8000)).reason == "not_listening"  # turn 3's, kept, serves nothing
        await runner.stop()
        assert (await refused(runner, 8000)).reason == "not_running"

    asyncio.run(scenario())


def test_without_previews_what_the_agent_left_running_ends_with_its_turn(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    mark = marker()

    async def scenario():
        finished = await runner.run_turn(a_turn(backgrounded(8000, mark), previews=[]))
        assert finished["status"] == "done"
        assert (await refused(runner, 8000)).reason == "not_running"
        assert processes_with(mark) == []

    asyncio.run(scenario())


def short_path(path) -> str:
    """The socket by a name within AF_UNIX's 108 bytes, however deep the test's directory is
    (as door_connect reaches it: through a descriptor of its directory, kept open)."""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    KEPT_OPEN.append(directory)
    return f"/proc/self/fd/{directory}/{path.name}"


KEPT_OPEN: list[int] = []
