"""Pushes to the pages that watch a thread live (Channels groups)."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from sessions.models import Message


def thread_group(thread_id: int) -> str:
    return f"thread.{thread_id}"


def message_event(message: Message) -> dict:
    return {
        "type": "thread.message",
        "id": message.id,
        "kind": message.kind,
        "html": render_to_string("chat/_message.html", {"message": message}),
    }


def thread_broadcast(*, message_id: int) -> None:
    message = Message.objects.select_related("member", "tool_call").get(id=message_id)
    async_to_sync(get_channel_layer().group_send)(thread_group(message.thread_id), message_event(message))
