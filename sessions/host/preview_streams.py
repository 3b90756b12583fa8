"""Previews on the host: streams from the gateway carried to servers in sessions' sandboxes.

One stream is one connection, made through the session's door (egress_forwarder.py, inside
the sandbox, on a Unix socket only this daemon can reach): the daemon never connects to a
TCP port itself, so a stream reaches nothing but the sandbox's own loopback. The protocol is
docs/previews.md: JSON `stream.*` control messages, binary data frames
`b"D" + id (4 bytes, big-endian) + payload`, and a window of credit each way per stream.

Data frames go out one at a time through one pump, so the daemon's other messages (turn
events, replies, heartbeats) wait behind at most one frame of 64 KiB, never behind a queue.
"""

import asyncio
import contextlib
import logging
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

log = logging.getLogger("calvin.host")

MAX_STREAMS = 256  # per connection: the daemon's descriptors are shared by every session
MAX_PAYLOAD = 256 * 1024
RECEIVE_WINDOW = 256 * 1024  # what the gateway may send a stream before the host's credit
DEFAULT_WINDOW = 256 * 1024
MAX_WINDOW = 16 * 1024 * 1024
DOOR_TIMEOUT = 5.0

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Send = Callable[[dict], Awaitable[None]]


class PreviewRefused(Exception):
    """No connection to the port; `reason` is one of the contract's stream.refused reasons."""

    def __init__(self, reason: str, text: str):
        super().__init__(text)
        self.reason, self.text = reason, text


# The door's socket


def door_listen(path: Path) -> socket.socket:
    """A listening socket at `path`, whose directory is the daemon's own (0700). Whatever
    was there (a stale socket, anything) is replaced, never followed; bound through the
    directory's descriptor, since a Unix socket's path is limited to 107 bytes."""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=directory)
        listener.bind(f"/proc/self/fd/{directory}/{path.name}")
        os.chmod(f"/proc/self/fd/{directory}/{path.name}", 0o600)
        listener.listen(128)
    except BaseException:
        listener.close()
        raise
    finally:
        os.close(directory)
    return listener


def door_remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.unlink(path.name, dir_fd=directory)
        finally:
            os.close(directory)


async def door_connect(path: Path, port: int) -> Streams:
    """A connection to 127.0.0.1:<port> of the sandbox whose door is at `path`."""
    gone = PreviewRefused("not_running", "the session's sandbox is not running now")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            await asyncio.get_running_loop().sock_connect(sock, f"/proc/self/fd/{directory}/{path.name}")
        finally:
            os.close(directory)
    except OSError:
        sock.close()
        raise gone from None
    except BaseException:
        sock.close()
        raise
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_PAYLOAD)
    try:
        writer.write(b"%d\n" % port)
        answer = await asyncio.wait_for(reader.readline(), DOOR_TIMEOUT)
    except (OSError, TimeoutError, ValueError):
        writer.close()
        raise gone from None
    except BaseException:
        writer.close()
        raise
    if answer == b"OK\n":
        return reader, writer
    writer.close()
    if not answer.startswith(b"ERR "):
        raise gone  # the door closed: its sandbox ended meanwhile
    try:
        said = os.strerror(int(answer[4:]))
    except (ValueError, OverflowError):
        said = "refused"
    raise PreviewRefused("not_listening", f"nothing listens on port {port} in the session's sandbox ({said})")


def session_connector(*, runners: dict, sessions_root: Path) -> Callable[[object, object], Awaitable[Streams]]:
    """The daemon's way to a session's port: through its runner, which knows its sandbox."""

    async def connect(session, port) -> Streams:
        runner = runners.get(session) if isinstance(session, int) and not isinstance(session, bool) else None
        if runner is None:
            if isinstance(session, int) and (sessions_root / f"session-{session}").is_dir():
                raise PreviewRefused("not_running", "no sandbox of this session is running on its host now")
            raise PreviewRefused("unknown_session", "this host has no such session")
        return await runner.preview_connect(port)

    return connect


async def preview_probe_answer(*, request: dict, connect, send: Send) -> None:
    """Answer a {"op": "preview.probe", "session": S, "port": P} request: does a connection succeed now?"""
    port = request.get("port")
    try:
        _, writer = await connect(request.get("session"), port)
    except PreviewRefused as refused:
        listening, reason, why = False, refused.reason, refused.text
    else:
        writer.close()
        listening, reason, why = True, "", f"a server listens on port {port} in the session's sandbox"
    reply = {"type": "reply", "request": request.get("request"), "ok": True, "listening": listening, "why": why}
    await send(reply | ({"reason": reason} if reason else {}))


# The streams of one connection


class _Stream:
    def __init__(self, number: int, window: int):
        self.number = number
        self.window = window  # bytes the host may still send before credit
        self.credited = asyncio.Event()
        self.incoming: deque[bytes] = deque()  # from the gateway, not yet written to the server
        self.unwritten = 0  # received and not yet credited back
        self.allowed = RECEIVE_WINDOW  # what the gateway may have sent so far: the window and every credit
        self.arrived = asyncio.Event()
        self.ended_in = False  # the gateway sent stream.end
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task | None = None


def _number(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**32 else None


class PreviewStreams:
    """The streams of one websocket connection; `close` drops them all when it goes."""

    def __init__(self, *, send: Send, send_data: Callable[[bytes], Awaitable[None]], connect):
        self.send, self.send_data, self.connect = send, send_data, connect
        self.streams: dict[int, _Stream] = {}
        self._frames: asyncio.Queue = asyncio.Queue()
        self._pump: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    # From the receive loop: never blocks it

    def handle(self, message: dict) -> None:
        kind, number = message.get("type"), _number(message.get("stream"))
        if number is None:
            return
        if kind == "stream.open":
            return self._open(number, message)
        stream = self.streams.get(number)
        if stream is None:
            return  # already gone (a reset crossed it, say)
        if kind == "stream.credit":
            granted = message.get("bytes")
            if isinstance(granted, int) and not isinstance(granted, bool) and granted > 0:
                stream.window = min(stream.window + granted, MAX_WINDOW)
                stream.credited.set()
        elif kind == "stream.end":
            stream.ended_in = True
            stream.arrived.set()
        elif kind == "stream.reset":
            self._drop(stream)

    def data(self, frame: bytes) -> None:
        if len(frame) < 5 or frame[:1] != b"D":
            return
        stream = self.streams.get(int.from_bytes(frame[1:5], "big"))
        payload = frame[5:]
        if stream is None or not payload:
            return
        if stream.writer is None or stream.ended_in:
            return self._reset(stream, "data before stream.opened or after stream.end")
        stream.allowed -= len(payload)
        if len(payload) > MAX_PAYLOAD or stream.allowed < 0:
            return self._reset(stream, "more bytes than the window")
        stream.incoming.append(payload)
        stream.unwritten += len(payload)
        stream.arrived.set()

    async def close(self) -> None:
        """The connection dropped: every stream's socket is closed."""
        for stream in list(self.streams.values()):
            self._drop(stream)
        for task in [*self._tasks, *([self._pump] if self._pump else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # The work

    def _spawn(self, coroutine) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _open(self, number: int, message: dict) -> None:
        if number in self.streams:
            log.warning("preview stream %s opened twice; the second open is ignored", number)
            return
        if len(self.streams) >= MAX_STREAMS:
            text = f"at most {MAX_STREAMS} preview streams at once on this host's connection"
            self._spawn(self._say({"type": "stream.refused", "stream": number, "reason": "busy", "text": text}))
            return
        window = message.get("window")
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
            window = DEFAULT_WINDOW
        stream = _Stream(number, min(window, MAX_WINDOW))
        self.streams[number] = stream
        stream.task = self._spawn(self._run(stream, message.get("session"), message.get("port")))

    def _drop(self, stream: _Stream) -> None:
        if self.streams.get(stream.number) is stream:
            del self.streams[stream.number]
        if stream.writer is not None:
            stream.writer.transport.abort()
        if stream.task is not None and stream.task is not asyncio.current_task():
            stream.task.cancel()

    def _reset(self, stream: _Stream, reason: str) -> None:
        self._drop(stream)
        self._spawn(self._say({"type": "stream.reset", "stream": stream.number, "reason": reason}))

    async def _say(self, message: dict) -> None:
        with contextlib.suppress(Exception):  # the connection went: close() follows
            await self.send(message)

    async def _run(self, stream: _Stream, session, port) -> None:
        try:
            try:
                reader, stream.writer = await self.connect(session, port)
            except OSError as error:
                raise PreviewRefused("not_running", f"the session's sandbox could not be reached: {error}") from None
        except PreviewRefused as refused:
            self.streams.pop(stream.number, None)
            reply = {"type": "stream.refused", "stream": stream.number, "reason": refused.reason}
            await self._say(reply | {"text": refused.text})
            return
        try:
            await self.send({"type": "stream.opened", "stream": stream.number, "window": RECEIVE_WINDOW})
            ways = [asyncio.ensure_future(self._out(stream, reader)), asyncio.ensure_future(self._in(stream))]
            try:
                done, _ = await asyncio.wait(ways, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                for way in ways:
                    way.cancel()
            for way in done:
                way.result()
        except OSError as error:
            if self.streams.get(stream.number) is stream:
                await self._say(
                    {"type": "stream.reset", "stream": stream.number, "reason": f"the server's side: {error}"}
                )
        except Exception:  # the websocket went (ConnectionClosed): close() drops the rest
            pass
        finally:
            self._drop(stream)

    async def _out(self, stream: _Stream, reader: asyncio.StreamReader) -> None:
        """The server's bytes to the gateway, never more than the credit given."""
        while True:
            while stream.window <= 0:
                stream.credited.clear()
                await stream.credited.wait()
            chunk = await reader.read(min(MAX_PAYLOAD, stream.window))
            if not chunk:
                break
            stream.window -= len(chunk)
            await self._frame(b"D" + stream.number.to_bytes(4, "big") + chunk)
        await self.send({"type": "stream.end", "stream": stream.number})

    async def _in(self, stream: _Stream) -> None:
        """The gateway's bytes to the server; credit once they are written and drained."""
        writer = stream.writer
        while True:
            if stream.incoming:
                chunks = list(stream.incoming)
                stream.incoming.clear()
                writer.write(b"".join(chunks))
                await writer.drain()
                written = sum(len(chunk) for chunk in chunks)
                stream.unwritten -= written
                if not stream.ended_in:
                    stream.allowed += written
                    await self.send({"type": "stream.credit", "stream": stream.number, "bytes": written})
            elif stream.ended_in:
                writer.write_eof()  # half-close: the server may go on answering
                return
            else:
                stream.arrived.clear()
                await stream.arrived.wait()

    async def _frame(self, frame: bytes) -> None:
        """Sent by the pump, in turn with every other stream's frames."""
        sent = asyncio.get_running_loop().create_future()
        self._frames.put_nowait((frame, sent))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._send_frames())
        await sent

    async def _send_frames(self) -> None:
        while True:
            frame, sent = await self._frames.get()
            if sent.cancelled():
                continue  # its stream was reset: its bytes are not sent
            try:
                await self.send_data(frame)
            except Exception as error:
                if not sent.done():
                    sent.set_exception(error)
            else:
                if not sent.done():
                    sent.set_result(None)
