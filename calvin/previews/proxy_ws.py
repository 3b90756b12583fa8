"""WebSocket upgrades to a preview (a dev server's hot reload): the browser's side is ASGI's
websocket messages; the server's side is a WebSocket client (the websockets library's sans-I/O
protocol) speaking over one stream, as proxy.py does for HTTP."""

import asyncio
import contextlib

from websockets.client import ClientProtocol
from websockets.frames import Close, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from calvin.previews.proxy import admit, stream_open, target_of, upstream_headers
from sessions.host_streams import HostStream, StreamLost, StreamRefused

MAX_MESSAGE = 16 * 1024 * 1024
# Handed on as the browser sent them; the protocol makes its own Host, Upgrade and key.
PASSED = frozenset({b"cookie", b"origin", b"user-agent", b"x-forwarded-host", b"x-forwarded-proto", b"x-forwarded-for"})
GOING_AWAY = 1001
UNREACHABLE = 1011  # the server could not be reached, or broke off


async def preview_websocket(scope, receive, send) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    admission = await admit(scope)
    if admission.verdict != "open":
        await send({"type": "websocket.close", "code": 1008})  # answered 403 before the upgrade
        return
    try:
        stream = await stream_open(admission)
    except StreamRefused:
        await send({"type": "websocket.close", "code": 1008})
        return
    try:
        await _carry(scope, receive, send, stream, admission.route.port)
    finally:
        await stream.close()


def _handshake_request(protocol: ClientProtocol, scope, port: int):
    request = protocol.connect()
    for key, value in upstream_headers(scope, port):
        if key in PASSED:
            request.headers[key.decode()] = value.decode("latin-1")
    return request


async def _carry(scope, receive, send, stream: HostStream, port: int) -> None:
    uri = parse_uri(f"ws://localhost:{port}" + target_of(scope).decode("latin-1"))
    subprotocols = scope.get("subprotocols") or None
    protocol = ClientProtocol(uri, subprotocols=subprotocols, max_size=MAX_MESSAGE)
    protocol.send_request(_handshake_request(protocol, scope, port))
    await _flush(protocol, stream)
    response = await _handshake_response(protocol, stream)
    if response is None or protocol.handshake_exc is not None:
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.accept", "subprotocol": response.headers.get("Sec-WebSocket-Protocol")})
    up = asyncio.create_task(_browser_to_server(receive, protocol, stream))
    down = asyncio.create_task(_server_to_browser(send, protocol, stream))
    try:
        done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() and not isinstance(task.exception(), StreamLost):
                raise task.exception()
        if down in done:
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": _close_code(protocol)})
    finally:
        for task in (up, down):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _handshake_response(protocol: ClientProtocol, stream: HostStream) -> Response | None:
    while True:
        for event in protocol.events_received():
            if isinstance(event, Response):
                return event
        data = await stream.read()
        if not data:
            return None
        protocol.receive_data(data)


async def _flush(protocol: ClientProtocol, stream: HostStream) -> None:
    data = b"".join(protocol.data_to_send())
    if data:
        await stream.write(data)


async def _browser_to_server(receive, protocol: ClientProtocol, stream: HostStream) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            protocol.send_close(GOING_AWAY)
            await _flush(protocol, stream)
            return
        if message.get("text") is not None:
            protocol.send_text(message["text"].encode())
        elif message.get("bytes") is not None:
            protocol.send_binary(message["bytes"])
        await _flush(protocol, stream)


async def _server_to_browser(send, protocol: ClientProtocol, stream: HostStream) -> None:
    parts, opcode = [], None
    while True:
        data = await stream.read()
        if not data:
            return
        protocol.receive_data(data)
        await _flush(protocol, stream)  # pongs, and the answer to a close
        for frame in protocol.events_received():
            if frame.opcode == Opcode.CLOSE:
                return
            if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                parts, opcode = [frame.data], frame.opcode
            elif frame.opcode == Opcode.CONT:
                parts.append(frame.data)
            else:
                continue
            if frame.fin and opcode is not None:
                data = b"".join(parts)
                parts = []
                if opcode == Opcode.TEXT:
                    await send({"type": "websocket.send", "text": data.decode()})
                else:
                    await send({"type": "websocket.send", "bytes": data})


def _close_code(protocol: ClientProtocol) -> int:
    close = protocol.close_rcvd
    if isinstance(close, Close) and 1000 <= close.code < 5000 and close.code not in (1005, 1006, 1015):
        return close.code
    return UNREACHABLE if close is None else 1000
