"""Previews for real: a gateway, a host daemon in its own process with its own session
directories, and a `command` agent whose servers run inside its bubblewrap sandbox. The agent's
calls go through the real /mcp with its runner's token (read from its .mcp.json, as an agent
reads it); every request goes through the preview host over real HTTP."""

import asyncio
import hashlib
import json
import os
import socket
import sys
from pathlib import Path

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.asyncio.client import connect as ws_connect

from sessions.models import Host, Turn
from tests.conftest import text_of, wait_for
from tests.sessions.host_processes import commanded, wait_connected
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db(transaction=True)

# The agent's server: a page and its bodies on 8000 (GET /stop ends it), a WebSocket echo on
# 8001; `ready` in the session directory once both listen. The agent runs it as its child and
# stays: the server can stop while the turn goes on.
SERVERS = r"""
import hashlib, http.server, os, threading
from websockets.sync.server import serve

os.makedirs("site", exist_ok=True)

class Page(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path == "/stop":
            os._exit(0)
        if self.path.startswith("/big/"):
            left = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(left))
            self.end_headers()
            while left:
                self.wfile.write(b"x" * min(left, 65536))
                left -= min(left, 65536)
            return
        self.answer(b"<h1>made in the sandbox</h1>", "text/html")
    def do_POST(self):
        left, digest = int(self.headers["Content-Length"]), hashlib.sha256()
        while left:
            data = self.rfile.read(min(left, 65536))
            digest.update(data)
            left -= len(data)
        self.answer(digest.hexdigest().encode(), "text/plain")
    def answer(self, body, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

def echo(connection):
    for message in connection:
        connection.send(message)

ws = serve(echo, "127.0.0.1", 8001)
threading.Thread(target=ws.serve_forever, daemon=True).start()
server = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), Page)
open("ready", "w").write("yes")
server.serve_forever()
"""
AGENT = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1]]); time.sleep(3600)"


def serving(session) -> None:
    commanded(session.agent, [sys.executable, "-c", AGENT, SERVERS])


def server_stop(gateway: str, name: str) -> None:
    try:
        get(gateway, name, "/stop")
    except httpx2.HTTPError:
        pass  # the server ends without answering: that is the point


class AgentCalls:
    """The agent's own MCP client: the URL and runner token its .mcp.json holds."""

    def __init__(self, directory: Path):
        server = json.loads((directory / ".mcp.json").read_text())["mcpServers"]["calvin"]
        self.url, self.headers = server["url"], server["headers"]

    def call(self, tool: str, arguments: dict):
        async def run():
            async with httpx2.AsyncClient(headers=self.headers, timeout=60) as http:
                async with Client(streamable_http_client(self.url, http_client=http), mode="legacy") as client:
                    return await client.call_tool(tool, arguments)

        return asyncio.run(run())


def running(hosts, workspace, name="h1"):
    """A session whose agent's servers run in its sandbox on a connected host."""
    session = new_session(workspace)
    serving(session)
    host = hosts(name)
    wait_connected(host)
    say(session, "serve")
    ready = host.session_directory(session.id) / "ready"
    wait_for(ready.exists, timeout=60)
    return session, host, AgentCalls(host.session_directory(session.id))


def get(gateway: str, name: str, path: str = "/", **options):
    port = int(gateway.rsplit(":", 1)[1])
    headers = {"host": f"{name}.preview.localhost:{port}", **options.pop("headers", {})}
    return httpx2.request(
        options.pop("method", "GET"), f"http://127.0.0.1:{port}{path}", headers=headers, timeout=60, **options
    )


def published(calls: AgentCalls, port: int, name: str | None = None) -> dict:
    arguments = {"port": port, **({"name": name} if name else {})}
    result = calls.call("preview", arguments)
    assert not result.is_error, text_of(result)
    return result.structured_content


def test_a_server_in_the_sandbox_through_its_preview(hosts, workspace, gateway):
    session, host, calls = running(hosts, workspace)
    shown = wait_for(lambda: (p := published(calls, 8000, "demo")) and p["listening"] and p, timeout=30)
    assert shown["name"] == "demo" and shown["url"].startswith("http://demo.preview.localhost:")

    page = get(gateway, "demo")
    assert page.status_code == 200 and page.text == "<h1>made in the sandbox</h1>"

    size = 20 * 1024 * 1024
    port = int(gateway.rsplit(":", 1)[1])
    received = 0
    with httpx2.stream(
        "GET", f"http://127.0.0.1:{port}/big/{size}", headers={"host": f"demo.preview.localhost:{port}"}
    ) as response:
        for chunk in response.iter_bytes():
            received += len(chunk)
    assert received == size

    body = os.urandom(8 * 1024 * 1024)
    assert get(gateway, "demo", "/upload", method="POST", content=body).text == hashlib.sha256(body).hexdigest()

    published(calls, 8001, "demo-ws")

    async def echo():
        sock = socket.create_connection(("127.0.0.1", port))
        async with ws_connect(f"ws://demo-ws.preview.localhost:{port}/", sock=sock) as ws:
            await ws.send("hot reload")
            return await ws.recv()

    assert asyncio.run(echo()) == "hot reload"

    # The server stops: a clear 502, not a hang.
    server_stop(gateway, "demo")
    wait_for(lambda: get(gateway, "demo").status_code == 502, timeout=20)
    assert "not running" in get(gateway, "demo").text

    # unpreview takes it down: 404.
    assert not calls.call("unpreview", {"name": "demo"}).is_error
    assert get(gateway, "demo").status_code == 404

    # The host goes: 503.
    host.kill()
    wait_for(lambda: not Host.objects.get(id=host.host.id).channel_name, timeout=20)
    assert get(gateway, "demo-ws").status_code == 503


def test_a_preview_reaches_only_its_own_sandbox(hosts, workspace, gateway):
    """SSRF: ports outside the sandbox (the gateway's own, another session's server) are not
    reachable through a preview, whatever the agent names."""
    first, host, calls = running(hosts, workspace)
    second = new_session(workspace, title="other")
    serving(second)
    say(second, "serve")
    wait_for((host.session_directory(second.id) / "ready").exists, timeout=60)
    wait_for(lambda: Turn.objects.filter(session=second, status="running").exists(), timeout=10)

    gateway_port = int(gateway.rsplit(":", 1)[1])
    outside = published(calls, gateway_port, "gateway-port")
    assert outside["listening"] is False
    assert get(gateway, "gateway-port").status_code == 502

    # A server on the host's own loopback (outside every sandbox).
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        host_port = listener.getsockname()[1]
        assert published(calls, host_port, "host-port")["listening"] is False
        assert get(gateway, "host-port").status_code == 502
    finally:
        listener.close()

    # Session two's server listens on 8000 in its own sandbox; session one's 8000 is its own.
    mine = published(calls, 8000, "mine")
    assert mine["listening"] is True and get(gateway, "mine").text == "<h1>made in the sandbox</h1>"
    server_stop(gateway, "mine")
    wait_for(lambda: get(gateway, "mine").status_code == 502, timeout=20)  # not the other session's 8000

    # Another session's name is refused.
    theirs = AgentCalls(host.session_directory(second.id))
    refused = theirs.call("preview", {"port": 8000, "name": "mine"})
    assert refused.is_error and "taken by another session" in text_of(refused)


# Starts the server, then ends its turn once the test says so (a file `go` appears).
AGENT_THEN_ENDS = (
    "import os, subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1]])\n"
    "while not os.path.exists('go'): time.sleep(0.05)"
)


def test_the_server_outlives_the_turn_that_started_it(hosts, workspace, gateway):
    """A person opens the URL after the agent's turn ended: the session's sandbox is kept while
    it has previews, and ends when the last one is taken down."""
    session = new_session(workspace)
    commanded(session.agent, [sys.executable, "-c", AGENT_THEN_ENDS, SERVERS])
    host = hosts("h1")
    wait_connected(host)
    say(session, "serve")
    directory = host.session_directory(session.id)
    wait_for((directory / "ready").exists, timeout=60)
    calls = AgentCalls(directory)
    assert published(calls, 8000, "after")["listening"] is True
    (directory / "go").write_text("")
    wait_for(lambda: Turn.objects.filter(session=session, status="done").exists(), timeout=30)

    page = get(gateway, "after")
    assert page.status_code == 200 and page.text == "<h1>made in the sandbox</h1>"

    assert not calls.call("unpreview", {"name": "after"}).is_error
    assert get(gateway, "after").status_code == 404
    # With no preview left the kept sandbox ends: its server with it.
    wait_for(lambda: not published(calls, 8000, "again")["listening"], timeout=20)
