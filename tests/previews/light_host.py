"""A light host for tests of the gateway's half of previews: it speaks the real /ws/host/
protocol (register, heartbeats, streams) and serves each stream from this machine's own
loopback, with no sandbox, so the proxy, the relay and the flow control are tested on their own.
The host daemon's half (the door in the sandbox) has tests of its own in tests/sessions/host/."""

import asyncio
import json
import struct
import threading

from websockets.asyncio.client import connect

HEADER = struct.Struct(">cI")


class LightHost:
    def __init__(self, *, gateway: str, token: str, name: str = "light", grant_credit: bool = True):
        self.url = "ws://" + gateway.split("://", 1)[1] + "/ws/host/"
        self.token, self.name = token, name
        self.grant_credit = grant_credit  # False: the host never credits what the gateway sends (an upload)
        self.opened: list[dict] = []  # each stream.open the gateway sent
        self.sent_uncredited_max = 0  # the most bytes this host had in flight on one stream
        self.frames_refused_by_window = 0
        self.resets: list[int] = []  # streams the gateway reset
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._ws = None
        self._streams: dict[int, dict] = {}
        self._lock = asyncio.Lock()
        self._ready = threading.Event()

    def start(self) -> "LightHost":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._run(), self._loop)
        assert self._ready.wait(15), "the light host did not register"
        return self

    def stop(self) -> None:
        if not self._loop.is_running():
            return

        async def close():
            if self._ws is not None:
                await self._ws.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _send(self, message) -> None:
        async with self._lock:
            await self._ws.send(message if isinstance(message, bytes) else json.dumps(message))

    async def _run(self) -> None:
        async with connect(self.url, additional_headers={"Authorization": f"Bearer {self.token}"}) as ws:
            self._ws = ws
            await self._send({"type": "register", "name": self.name, "capacity": 1, "version": "1", "sandbox": "bwrap"})
            beat = asyncio.create_task(self._heartbeat())
            try:
                async for raw in ws:
                    if isinstance(raw, bytes):
                        await self._data(raw)
                        continue
                    message = json.loads(raw)
                    kind = message.get("type")
                    if kind == "registered":
                        self._ready.set()
                    elif kind == "stream.open":
                        self.opened.append(message)
                        asyncio.create_task(self._open(message))
                    elif kind == "stream.credit":
                        stream = self._streams.get(message["stream"])
                        if stream:
                            stream["may_send"] += message["bytes"]
                            stream["credit"].set()
                    elif kind == "stream.end":
                        stream = self._streams.get(message["stream"])
                        if stream:
                            stream["writer"].write_eof()
                    elif kind == "stream.reset":
                        self.resets.append(message["stream"])
                        stream = self._streams.pop(message["stream"], None)
                        if stream:
                            stream["writer"].close()
            finally:
                beat.cancel()

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            await self._send({"type": "heartbeat"})

    async def _open(self, message: dict) -> None:
        number = message["stream"]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", message["port"])
        except OSError:
            await self._send({"type": "stream.refused", "stream": number, "reason": "not_listening", "text": "no"})
            return
        stream = {"writer": writer, "may_send": message["window"], "credit": asyncio.Event(), "in_flight": 0}
        self._streams[number] = stream
        await self._send({"type": "stream.opened", "stream": number, "window": message["window"]})
        stream["reader"] = reader
        while chunk := await reader.read(65536):
            while stream["may_send"] < len(chunk):
                stream["credit"].clear()
                await stream["credit"].wait()
            stream["may_send"] -= len(chunk)
            stream["in_flight"] = message["window"] - stream["may_send"]
            self.sent_uncredited_max = max(self.sent_uncredited_max, stream["in_flight"])
            await self._send(HEADER.pack(b"D", number) + chunk)
        if stream.get("silent"):  # the end is told only once the gateway sends again
            await stream["poked"].wait()
        if number in self._streams:
            await self._send({"type": "stream.end", "stream": number})

    def servers_hang_up_unseen(self) -> None:
        """Every server connection closes now, but the gateway hears of it only when it next
        sends on the stream: the race of a kept-alive stream reused as its server closes it."""

        def hang_up():
            for stream in self._streams.values():
                stream["silent"], stream["poked"] = True, asyncio.Event()
                stream["writer"].close()

        self._loop.call_soon_threadsafe(hang_up)

    async def _data(self, frame: bytes) -> None:
        _, number = HEADER.unpack_from(frame)
        stream = self._streams.get(number)
        if stream is None:
            return
        if stream.get("silent"):
            stream["poked"].set()
            return
        stream["writer"].write(frame[HEADER.size :])
        await stream["writer"].drain()
        if self.grant_credit:
            await self._send({"type": "stream.credit", "stream": number, "bytes": len(frame) - HEADER.size})
