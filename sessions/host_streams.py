"""A byte stream to a port in a session's sandbox, carried over its host's connection
(docs/previews.md): the requester's half. The host's consumer may live in another web
process (then messages go by the channel layer) or in this one (then they are direct calls).

    stream = await HostStream.open(channel=host.channel_name, session_id=12, port=5173)
    await stream.write(b"GET / HTTP/1.1\\r\\n...")
    while chunk := await stream.read(): ...
    await stream.close()

Flow control: at most WINDOW bytes are in flight each way; the host is given credit for what
was read only when the next read() is asked for, that is after the caller passed it on, and
in sums of CREDIT_AT.
"""

import asyncio
import uuid

from channels.layers import get_channel_layer

from sessions.stream_relay import LOCAL_REQUESTERS, MAX_CHUNK, local_relay

WINDOW = 1024 * 1024
# Credit goes back in sums of at least this much, not one message per chunk read (a kept-alive
# stream's small responses would each cost one); the host still has WINDOW - CREDIT_AT to send.
CREDIT_AT = WINDOW // 4


class StreamRefused(Exception):
    """The stream was not opened: `reason` is the host's word (not_listening, not_running,
    no_sandbox, unknown_session, busy) or "timeout"; `text` says it for people."""

    def __init__(self, reason: str, text: str = ""):
        super().__init__(text or reason)
        self.reason, self.text = reason, text


class StreamLost(Exception):
    """The stream was reset (the host disconnected, the server's socket failed)."""

    def __init__(self, reason: str, text: str = ""):
        super().__init__(text or reason)
        self.reason, self.text = reason, text


class HostStream:
    def __init__(self, channel: str):
        self._channel = channel
        self._relay = local_relay(channel)
        self._layer = None if self._relay is not None else get_channel_layer()
        self._reply = ""
        self._receiver: asyncio.Task | None = None
        self._opened: asyncio.Future = asyncio.get_running_loop().create_future()
        self._incoming: asyncio.Queue = asyncio.Queue()
        self._may_send = 0
        self._credit = asyncio.Event()
        self._owed = 0  # bytes read and passed on, not yet credited to the host
        self._lost: StreamLost | None = None
        self._ended_in = self._ended_out = self._closed = False

    @classmethod
    async def open(cls, *, channel: str, session_id: int, port: int, timeout: float = 10.0) -> "HostStream":
        stream = cls(channel)
        await stream._start(session_id=session_id, port=port, timeout=timeout)
        return stream

    async def _start(self, *, session_id: int, port: int, timeout: float) -> None:
        if self._relay is not None:
            self._reply = f"preview.local!{uuid.uuid4().hex}"
            LOCAL_REQUESTERS[self._reply] = self
        else:
            self._reply = await self._layer.new_channel(prefix="preview")
            self._receiver = asyncio.create_task(self._receive())
        try:
            await self._tell("open", session=session_id, port=port, window=WINDOW)
            self._may_send = await asyncio.wait_for(asyncio.shield(self._opened), timeout)
        except TimeoutError:
            await self.close()
            raise StreamRefused("timeout", f"the session's host did not answer within {timeout:g} s") from None
        except BaseException:
            await self.close()
            raise

    # What arrives (from the relay, directly or by the channel layer)

    def put_nowait(self, message: dict) -> None:
        kind = message.get("type")
        if kind == "stream.opened":
            if not self._opened.done():
                self._opened.set_result(min(int(message.get("window") or 0), WINDOW * 4))
        elif kind == "stream.refused":
            if not self._opened.done():
                self._opened.set_exception(StreamRefused(message.get("reason", ""), message.get("text", "")))
        elif kind == "stream.credit":
            self._may_send += int(message.get("bytes") or 0)
            self._credit.set()
        elif kind == "stream.reset":
            self._lost = StreamLost(message.get("reason", ""), message.get("text", ""))
            if not self._opened.done():
                self._opened.set_exception(StreamRefused(self._lost.reason, self._lost.text))
            self._credit.set()
            self._incoming.put_nowait(None)
        elif kind in ("stream.data", "stream.end"):
            self._incoming.put_nowait(message)

    async def _receive(self) -> None:
        while True:
            self.put_nowait(await self._layer.receive(self._reply))

    @property
    def reusable(self) -> bool:
        """Open both ways with nothing unread: a kept-alive stream may carry another request
        (an idle one the server closed, or the host reset, has its end or reset waiting)."""
        opened = self._opened.done() and not self._opened.cancelled() and self._opened.exception() is None
        over = self._closed or self._ended_in or self._ended_out or self._lost is not None
        return opened and not over and self._incoming.empty()

    # The caller's side

    async def read(self) -> bytes:
        """The next bytes from the server; b"" once it has no more. Raises StreamLost."""
        if self._owed >= CREDIT_AT:
            owed, self._owed = self._owed, 0
            await self._tell("credit", bytes=owed)
        if self._ended_in:
            return b""
        message = await self._incoming.get()
        if message is None:
            raise self._lost
        if message["type"] == "stream.end":
            self._ended_in = True
            return b""
        data = message["data"]
        self._owed += len(data)
        return data

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            while self._may_send <= 0 and self._lost is None:
                self._credit.clear()
                await self._credit.wait()
            if self._lost is not None:
                raise self._lost
            size = min(len(view), MAX_CHUNK, self._may_send)
            self._may_send -= size
            await self._tell("data", data=bytes(view[:size]))
            view = view[size:]

    async def end(self) -> None:
        """No more bytes to the server (it may still answer)."""
        if not self._ended_out and self._lost is None:
            self._ended_out = True
            await self._tell("end")

    async def close(self) -> None:
        """Done with the stream: reset it unless it ended both ways."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._opened.done() and not self._opened.exception() and self._lost is None:
                if not (self._ended_in and self._ended_out):
                    await self._tell("reset", reason="closed")
        finally:
            LOCAL_REQUESTERS.pop(self._reply, None)
            if self._receiver is not None:
                self._receiver.cancel()

    async def _tell(self, kind: str, **fields) -> None:
        event = {"type": f"preview.{kind}", "reply": self._reply, **fields}
        if self._relay is not None:
            await self._relay.handle(event)
        else:
            await self._layer.send(self._channel, event)
