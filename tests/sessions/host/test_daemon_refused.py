"""A host whose token the gateway refuses (4401) stops, however early the refusal comes.

The gateway accepts a host's websocket and then closes it with 4401 when the token is unknown
(a host deleted in the admin, a revoked token). That close can arrive before the daemon has
sent its register: the daemon must still see the refusal and stop, not retry forever (CI saw a
deleted host's daemon retry for 20 s). The server here is a bare TCP server that answers the
upgrade and sends the close frame in the same write, so the order is always that one.
"""

import asyncio
import base64
import hashlib
import struct

import pytest

from sessions.host.daemon import UNAUTHORIZED, HostDaemon, HostRefused
from sessions.host.sandbox import Sandbox

WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _close_frame(code: int, reason: bytes) -> bytes:
    payload = struct.pack("!H", code) + reason
    return bytes([0x88, len(payload)]) + payload  # FIN + close, unmasked (server to client)


async def _refusing_gateway(connections: list) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        connections.append(request)
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + WEBSOCKET_GUID).digest())
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + _close_frame(UNAUTHORIZED, b"token unknown")
        )
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_a_refusal_that_arrives_before_the_register_stops_the_daemon(tmp_path):
    connections: list = []

    async def scenario():
        server = await _refusing_gateway(connections)
        port = server.sockets[0].getsockname()[1]
        daemon = HostDaemon(
            gateway=f"http://127.0.0.1:{port}", token="gone", name="refused", capacity=1, state_dir=tmp_path
        )
        daemon.sandbox = Sandbox.none("not needed: it never registers")
        daemon.allow_unsandboxed = True
        try:
            await asyncio.wait_for(daemon.run(), 10)
        finally:
            server.close()

    with pytest.raises(HostRefused, match="token unknown"):
        asyncio.run(scenario())
    # Once: a refused host does not come back to be refused again.
    assert len(connections) == 1
    assert b"Authorization: Bearer gone" in connections[0]
