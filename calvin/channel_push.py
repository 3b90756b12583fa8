"""Sending to a Channels group from synchronous code (workers, views, services): a leaf that
the live console (calvin.dashboard.events) and waiting tool calls (tools' questions) share."""

import asyncio
import threading

from channels.layers import get_channel_layer

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _layer_loop() -> asyncio.AbstractEventLoop:
    """One long-lived event loop per process for sync callers (workers, views).

    async_to_sync would build a new loop, and with it a new Redis connection, per push.
    """
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="channel-layer", daemon=True).start()
    return _loop


def group_send(group: str, event: dict) -> None:
    send = get_channel_layer().group_send(group, event)
    asyncio.run_coroutine_threadsafe(send, _layer_loop()).result(timeout=10)
