"""Calvin's own chat channel: the thread is the Message table, delivery is a websocket push."""

import logging

from django.db import transaction

from calvin.dashboard.events import thread_broadcast
from sessions.models import Message

log = logging.getLogger(__name__)


def _push(message: Message) -> None:
    try:
        thread_broadcast(message)
    except Exception:
        # Delivered all the same: pages catch up from the database when they reconnect.
        log.warning("live push of message %s failed", message.id, exc_info=True)


class WebChannel:
    def _deliver(self, *, tool_call_id: int, fields: dict) -> dict:
        # Called inside the transaction that marks the call applied, so the message and
        # "applied" commit together; the unique tool_call is the last line of defence.
        message = Message.objects.create(tool_call_id=tool_call_id, **fields)
        transaction.on_commit(lambda: _push(message))
        return {"message_id": message.id}

    def post_message(self, *, thread, text: str, tool_call_id: int, author: str = Message.Author.AGENT) -> dict:
        return self._deliver(
            tool_call_id=tool_call_id,
            fields={"thread": thread, "kind": Message.Kind.TEXT, "author": author, "text": text},
        )

    def post_card(self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int) -> dict:
        return self._deliver(
            tool_call_id=tool_call_id,
            fields={
                "thread": thread,
                "kind": Message.Kind.CARD,
                "author": Message.Author.AGENT,
                "text": fallback_text,
                "card": items,
                "blocks": blocks,
            },
        )

    def upload_file(
        self,
        *,
        thread,
        stored_name: str,
        file_name: str,
        title: str,
        comment: str,
        alt_text: str,
        content_type: str,
        tool_call_id: int,
    ) -> dict:
        return self._deliver(
            tool_call_id=tool_call_id,
            fields={
                "thread": thread,
                "kind": Message.Kind.FILE,
                "author": Message.Author.AGENT,
                "text": comment,
                "file": stored_name,
                "file_name": file_name,
                "file_title": title,
                "file_alt_text": alt_text,
                "content_type": content_type,
            },
        )
