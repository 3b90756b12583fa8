"""The Slack chat adapter: a Slack thread is a Calvin Thread (channel_kind "slack", channel_id
the Slack channel, thread_ts the root message's ts) of a workspace tied to a Slack team.

Each method first does what the web channel does, so the Message table stays Calvin's
transcript (the dashboard, read_thread and `delivered()` read it, and it commits with
"applied"); then, in the same transaction, it enqueues the Slack effect in the channel's
ordered outbox (calvin.chat.slack.outbox), which a worker sends. Nothing here calls Slack.
"""

from calvin.chat.base import NewThread, ThreadExcerpt, ThreadTarget
from calvin.chat.slack import outbox
from calvin.chat.web import WebChannel
from sessions.models import Message


def _applying_call_id(tool: str, message: Message) -> int | None:
    """The call whose effect is running for `message`: edit_message and add_reaction's
    effects are not given their call's id, and a failure Slack reports later belongs to it."""
    from tools.models import ToolCall

    return (
        ToolCall.objects.filter(tool=tool, status=ToolCall.Status.APPLYING, payload__message_id=message.id)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


class SlackChannel(WebChannel):
    def post_message(self, *, thread, message: Message, tool_call_id: int) -> dict:
        ids = super().post_message(thread=thread, message=message, tool_call_id=tool_call_id)
        outbox.text_out(thread=thread, message=message, text=message.text, tool_call_id=tool_call_id)
        return ids

    def edit_message(self, *, thread, message: Message, text: str) -> dict:
        ids = super().edit_message(thread=thread, message=message, text=text)
        outbox.change_out(
            thread=thread, message=message, text=text, tool_call_id=_applying_call_id("edit_message", message)
        )
        return ids

    def add_reaction(self, *, thread, message: Message, emoji: str, agent_id: int) -> dict:
        ids = super().add_reaction(thread=thread, message=message, emoji=emoji, agent_id=agent_id)
        outbox.reaction_out(
            thread=thread, message=message, emoji=emoji, tool_call_id=_applying_call_id("add_reaction", message)
        )
        return ids

    def post_card(
        self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int | None, author: str = "agent"
    ) -> dict:
        ids = super().post_card(
            thread=thread,
            items=items,
            blocks=blocks,
            fallback_text=fallback_text,
            tool_call_id=tool_call_id,
            author=author,
        )
        outbox.card_out(
            thread=thread,
            message=ids["message_id"],
            blocks=blocks,
            fallback_text=fallback_text,
            tool_call_id=tool_call_id,
        )
        return ids

    def update_card(self, *, thread, message: Message, items: list, blocks: list, fallback_text: str) -> dict:
        ids = super().update_card(
            thread=thread, message=message, items=items, blocks=blocks, fallback_text=fallback_text
        )
        # A card's new state is Calvin's (a question answered, an approval decided): redacted, not refused.
        outbox.change_out(thread=thread, message=message, blocks=blocks, fallback_text=fallback_text, refuse=False)
        return ids

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
        ids = super().upload_file(
            thread=thread,
            stored_name=stored_name,
            file_name=file_name,
            title=title,
            comment=comment,
            alt_text=alt_text,
            content_type=content_type,
            tool_call_id=tool_call_id,
        )
        outbox.file_out(
            thread=thread,
            message=ids["message_id"],
            stored_name=stored_name,
            file_name=file_name,
            title=title,
            comment=comment,
            alt_text=alt_text,
            tool_call_id=tool_call_id,
        )
        return ids

    # Other Slack threads (read_thread, post_thread): calvin.chat.slack.threads.

    def thread_target(self, *, ref, session) -> ThreadTarget:
        from calvin.chat.slack.threads import thread_target

        return thread_target(ref=ref, session=session)

    def read_thread(self, *, target: ThreadTarget, latest: int) -> ThreadExcerpt:
        from calvin.chat.slack.threads import read_thread

        return read_thread(target=target, latest=latest)

    def post_reply(self, *, target: ThreadTarget, text: str, tool_call_id: int, sender_agent_id: int | None) -> dict:
        from calvin.chat.slack.threads import post_reply

        return post_reply(target=target, text=text, tool_call_id=tool_call_id, sender_agent_id=sender_agent_id)

    # spawn_thread: a top-level message in the parent's channel, or in the owner's direct messages
    # (a code channel's spawn), starts the new thread (calvin.chat.slack.spawns).

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        from calvin.chat.slack.spawns import spawn_post

        spawn_post(parent_thread=parent_thread, text=text, tool_call_id=tool_call_id, channel_id=channel_id)
        return None  # the thread is the message's ts: known once Slack has taken it

    def direct_channel_open(self, *, workspace_id: int, member) -> str:
        from calvin.chat.slack.spawns import direct_channel_open

        return direct_channel_open(workspace_id=workspace_id, member=member)

    def thread_spawned(self, *, parent_thread, tool_call_id: int, withdraw: bool = False) -> NewThread | None:
        from calvin.chat.slack.spawns import spawn_thread_made

        return spawn_thread_made(parent_thread=parent_thread, tool_call_id=tool_call_id, withdraw=withdraw)
