"""Pushes to the pages that watch a thread live (Channels groups)."""

import asyncio
import threading

from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from sessions.models import Message

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


def thread_group(thread_id: int) -> str:
    return f"thread.{thread_id}"


def message_event(message: Message) -> dict:
    return {
        "type": "thread.message",
        "id": message.id,
        "kind": message.kind,
        "html": render_to_string("chat/_message.html", {"message": message}),
    }


def thread_broadcast(message: Message) -> None:
    send = get_channel_layer().group_send(thread_group(message.thread_id), message_event(message))
    asyncio.run_coroutine_threadsafe(send, _layer_loop()).result(timeout=10)
