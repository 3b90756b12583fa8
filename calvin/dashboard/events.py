"""Pushes to the pages that watch a thread live (Channels groups)."""

import asyncio
import logging
import threading

from channels.layers import get_channel_layer
from django.db import transaction
from django.template.loader import render_to_string

from sessions.models import Message

log = logging.getLogger(__name__)
CATCH_UP_LIMIT = 200

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


def thread_push_on_commit(message: Message) -> None:
    """Push the message to watching pages once its transaction commits.

    A failed push is not a failed delivery: the message is stored, and pages catch up
    from the database when they (re)connect.
    """

    def push():
        try:
            thread_broadcast(message)
        except Exception:
            log.warning("live push of message %s failed", message.id, exc_info=True)

    transaction.on_commit(push)


def thread_events_since(thread_id: int, since: int) -> list[dict]:
    """What a page that last saw message `since` has missed."""
    messages = Message.objects.filter(thread_id=thread_id, id__gt=since).select_related("member").order_by("id")
    return [message_event(m) for m in messages[:CATCH_UP_LIMIT]]
