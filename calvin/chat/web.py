"""Calvin's own chat channel: the thread is the Message table, delivery is a websocket push."""

from calvin.dashboard.events import thread_push_on_commit
from sessions.models import Message


class WebChannel:
    def delivered(self, *, thread, tool_call_id: int) -> dict | None:
        message = Message.objects.filter(thread=thread, tool_call_id=tool_call_id).only("id").first()
        return None if message is None else {"message_id": message.id}

    def _deliver(self, *, tool_call_id: int, fields: dict) -> dict:
        # Called inside the transaction that marks the call applied, so the message and
        # "applied" commit together; the unique tool_call is the last line of defence.
        message = Message.objects.create(tool_call_id=tool_call_id, **fields)
        thread_push_on_commit(message)
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
