"""Calvin's own chat channel: the thread is the Message table, delivery is a websocket push."""

from django.utils import timezone

from calvin.dashboard.events import thread_push_on_commit
from sessions.models import Message, Reaction


class WebChannel:
    def delivered(self, *, thread, tool_call_id: int) -> dict | None:
        message = (
            Message.objects.filter(thread=thread, tool_call_id=tool_call_id, delivered_at__isnull=False)
            .only("id")
            .first()
        )
        return None if message is None else {"message_id": message.id}

    def _deliver(self, *, tool_call_id: int, fields: dict) -> dict:
        # Called inside the transaction that marks the call applied, so the message and
        # "applied" commit together; the unique tool_call is the last line of defence.
        message = Message.objects.create(tool_call_id=tool_call_id, **fields)
        thread_push_on_commit(message)
        return {"message_id": message.id}

    def _changed(self, message: Message, replace: bool = True, **fields) -> dict:
        for name, value in fields.items():
            setattr(message, name, value)
        message.save(update_fields=list(fields))
        thread_push_on_commit(message, replace=replace)
        return {"message_id": message.id}

    def post_message(self, *, thread, message: Message, tool_call_id: int) -> dict:
        # First shown now: a new message for the pages, not a change to one they have.
        return self._changed(message, replace=False, delivered_at=timezone.now())

    def edit_message(self, *, thread, message: Message, text: str) -> dict:
        return self._changed(message, text=text, edited_at=timezone.now())

    def add_reaction(self, *, thread, message: Message, emoji: str, agent_id: int) -> dict:
        Reaction.objects.get_or_create(message=message, emoji=emoji, agent_id=agent_id)
        thread_push_on_commit(message, replace=True)
        return {"message_id": message.id}

    def post_card(
        self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int | None, author: str = "agent"
    ) -> dict:
        return self._deliver(
            tool_call_id=tool_call_id,
            fields={
                "thread": thread,
                "kind": Message.Kind.CARD,
                "author": author,
                "text": fallback_text,
                "card": items,
                "blocks": blocks,
            },
        )

    def update_card(self, *, thread, message: Message, items: list, blocks: list, fallback_text: str) -> dict:
        return self._changed(message, card=items, blocks=blocks, text=fallback_text)

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
