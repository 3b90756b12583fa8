"""The host consumer's half of preview streams (docs/previews.md): it relays each stream between
the web process that asked for it (by the channel layer, or in-process when that is this one)
and the host's websocket. It keeps no bytes: credit passes end to end, so each side's window
bounds what is in flight.

A requester names its stream by its own reply channel; the host knows it by a small integer
this relay chose. Requesters are gateway code (only the gateway's processes write to the channel
layer); the host is not trusted: a frame for a stream it was never given is dropped.
"""

import asyncio
import logging
import struct

log = logging.getLogger(__name__)

DATA = b"D"
HEADER = struct.Struct(">cI")
MAX_CHUNK = 256 * 1024
MAX_STREAMS = 256

# Requesters in this process, by reply name: their messages skip the channel layer.
LOCAL_REQUESTERS: dict = {}
# Host consumers in this process, by channel name: a requester on the same event loop talks to
# them directly (another loop, a second server in this process, goes by the channel layer).
LOCAL_RELAYS: dict = {}


def local_relay(channel: str):
    relay = LOCAL_RELAYS.get(channel)
    return relay if relay is not None and relay.loop is asyncio.get_running_loop() else None


def data_frame(stream: int, payload: bytes) -> bytes:
    return HEADER.pack(DATA, stream) + payload


class StreamRelay:
    def __init__(self, *, send_text, send_bytes, channel_layer):
        self._text, self._bytes = send_text, send_bytes  # JSON, and binary frames, to the host
        self._layer = channel_layer
        # Requesters in this process call in from their own tasks: one frame at a time.
        self._sending = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        self._next = 0
        self._ids: dict[str, int] = {}  # reply name -> stream id
        self._replies: dict[int, str] = {}  # stream id -> reply name
        self._ended: dict[int, int] = {}  # stream id -> which sides said end (1 requester, 2 host)

    async def _send_text(self, message: dict) -> None:
        async with self._sending:
            await self._text(message)

    async def _send_bytes(self, frame: bytes) -> None:
        async with self._sending:
            await self._bytes(frame)

    # From requesters (preview.* channel-layer events, or direct calls in this process)

    async def handle(self, event: dict) -> None:
        kind = event["type"]
        if kind == "preview.open":
            await self.open(event)
        elif kind == "preview.data":
            await self.data(event)
        elif kind in ("preview.credit", "preview.end", "preview.reset"):
            await self.control(event)

    async def open(self, event: dict) -> None:
        reply = event["reply"]
        if len(self._replies) >= MAX_STREAMS:
            await self._to_requester(reply, {"type": "stream.refused", "reason": "busy", "text": "too many streams"})
            return
        self._next += 1
        stream = self._next
        self._ids[reply], self._replies[stream] = stream, reply
        await self._send_text(
            {
                "type": "stream.open",
                "stream": stream,
                "session": event["session"],
                "port": event["port"],
                "window": event["window"],
            }
        )

    async def data(self, event: dict) -> None:
        stream = self._ids.get(event["reply"])
        if stream is not None:
            await self._send_bytes(data_frame(stream, event["data"]))

    async def control(self, event: dict) -> None:
        """credit, end or reset from the requester, passed to the host."""
        stream = self._ids.get(event["reply"])
        if stream is None:
            return
        kind = event["type"].removeprefix("preview.")
        message = {"type": f"stream.{kind}", "stream": stream}
        if kind == "credit":
            message["bytes"] = int(event["bytes"])
        elif kind == "reset":
            message["reason"] = str(event.get("reason", ""))[:200]
            self._forget(stream)
        await self._send_text(message)
        if kind == "end":
            self._end(stream, 1)

    # From the host

    async def host_frame(self, frame: bytes) -> None:
        if len(frame) < HEADER.size or frame[:1] != DATA:
            return
        _, stream = HEADER.unpack_from(frame)
        reply = self._replies.get(stream)
        payload = frame[HEADER.size :]
        if reply is None or len(payload) > MAX_CHUNK:
            return
        await self._to_requester(reply, {"type": "stream.data", "data": payload})

    async def host_message(self, content: dict) -> None:
        stream = content.get("stream")
        reply = self._replies.get(stream) if isinstance(stream, int) else None
        if reply is None:
            return
        kind = content["type"]
        message = {"type": kind}
        if kind == "stream.opened":
            message["window"] = _count(content.get("window"))
        elif kind == "stream.credit":
            message["bytes"] = _count(content.get("bytes"))
        elif kind in ("stream.refused", "stream.reset"):
            message["reason"] = str(content.get("reason", ""))[:40]
            message["text"] = str(content.get("text", ""))[:300]
            self._forget(stream)
        elif kind != "stream.end":
            return
        await self._to_requester(reply, message)
        if kind == "stream.end":
            self._end(stream, 2)

    async def host_gone(self) -> None:
        """The connection ended: every stream on it is over."""
        for stream, reply in list(self._replies.items()):
            self._forget(stream)
            await self._to_requester(
                reply, {"type": "stream.reset", "reason": "host_disconnected", "text": "the host disconnected"}
            )

    def _end(self, stream: int, side: int) -> None:
        self._ended[stream] = self._ended.get(stream, 0) | side
        if self._ended[stream] == 3:
            self._forget(stream)

    def _forget(self, stream: int) -> None:
        self._ended.pop(stream, None)
        reply = self._replies.pop(stream, None)
        if reply is not None:
            self._ids.pop(reply, None)

    async def _to_requester(self, reply: str, message: dict) -> None:
        queue = LOCAL_REQUESTERS.get(reply)
        if queue is not None:
            queue.put_nowait(message)
            return
        try:
            await self._layer.send(reply, message)
        except Exception:  # ChannelFull, the layer down: that stream is lost, not the connection
            log.warning("a preview stream's message could not be passed on", exc_info=True)
            stream = self._ids.get(reply)
            if stream is not None:
                self._forget(stream)
                await self._send_text({"type": "stream.reset", "stream": stream, "reason": "gateway"})


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**31 else 0
