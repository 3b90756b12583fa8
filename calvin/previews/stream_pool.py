"""Streams kept between requests: HTTP keep-alive from the gateway to a preview's server.

A request whose response ended cleanly both ways (h11 says DONE, the server did not ask to
close) gives its stream back; the next request to the same port of the same session over the
same host connection takes it instead of opening another, which saves the open round trip,
the host's connection through the sandbox's door and the server's accept. An idle stream is
closed after IDLE_SECONDS, under the 5 s a Node server keeps an idle connection, so a reuse
rarely meets a server that just closed it; when one does, proxy.py retries a bodiless GET,
HEAD or OPTIONS once on a new stream.

Pools are per event loop (a stream belongs to the loop it was opened on).
"""

import asyncio
import contextlib
import weakref
from dataclasses import dataclass, field

import h11
from django.conf import settings

from sessions.host_streams import HostStream

IDLE_SECONDS = 4.0
MAX_IDLE_PER_PORT = 8  # idle streams hold the host's stream slots and the server's connections


@dataclass(eq=False)
class Upstream:
    """A stream to a preview's server with the HTTP/1.1 client state that goes with it."""

    stream: HostStream
    key: tuple
    connection: h11.Connection = field(
        default_factory=lambda: h11.Connection(
            h11.CLIENT, max_incomplete_event_size=settings.CALVIN_PREVIEW_MAX_RESPONSE_HEAD_BYTES
        )
    )
    reused: bool = False
    expiry: asyncio.TimerHandle | None = None


class StreamPool:
    def __init__(self):
        self._idle: dict[tuple, list[Upstream]] = {}
        self._closing: set[asyncio.Task] = set()

    async def take(self, *, channel: str, session_id: int, port: int, timeout: float) -> Upstream:
        """An idle stream to that port if one is still good, else a new one (StreamRefused)."""
        key = (channel, session_id, port)
        idle = self._idle.get(key, [])
        while idle:
            upstream = idle.pop()
            upstream.expiry.cancel()
            if upstream.stream.reusable:
                upstream.reused = True
                return upstream
            await upstream.stream.close()
        self._idle.pop(key, None)
        stream = await HostStream.open(channel=channel, session_id=session_id, port=port, timeout=timeout)
        return Upstream(stream=stream, key=key)

    async def give_back(self, upstream: Upstream) -> None:
        """Keep the stream for the next request if its exchange finished cleanly, else close it."""
        connection, idle = upstream.connection, self._idle.setdefault(upstream.key, [])
        # Bytes after the response would be read as the next request's answer.
        clean = connection.our_state is h11.DONE and connection.their_state is h11.DONE
        clean = clean and not connection.trailing_data[0]
        if not (clean and upstream.stream.reusable and len(idle) < MAX_IDLE_PER_PORT):
            await upstream.stream.close()
            return
        connection.start_next_cycle()
        upstream.expiry = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._expire, upstream)
        idle.append(upstream)

    def _expire(self, upstream: Upstream) -> None:
        idle = self._idle.get(upstream.key, [])
        with contextlib.suppress(ValueError):
            idle.remove(upstream)
        if not idle:
            self._idle.pop(upstream.key, None)
        task = asyncio.get_running_loop().create_task(upstream.stream.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def idle_count(self) -> int:
        return sum(len(idle) for idle in self._idle.values())


_POOLS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StreamPool]" = weakref.WeakKeyDictionary()


def stream_pool() -> StreamPool:
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = StreamPool()
    return pool
