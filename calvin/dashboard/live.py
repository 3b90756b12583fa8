"""The live console's subscriptions: what the services announce, pushed to the pages watching."""

from calvin.dashboard.events import group_send, group_send_quietly, message_event, thread_group
from calvin.events import AgentActivity, MessagePosted, reacts_to
from sessions.models import Message


@reacts_to(MessagePosted)
def message_push(event: MessagePosted) -> None:
    """After commit: the message to the thread's pages (a failed push is logged; pages catch up)."""
    message = Message.objects.select_related("member", "sender_agent").get(id=event.message_id)
    group_send(thread_group(message.thread_id), message_event(message, event.replace))


@reacts_to(AgentActivity)
def activity_push(event: AgentActivity) -> None:
    group_send_quietly(
        thread_group(event.thread_id),
        {"type": "thread.activity", "kind": event.kind, "text": event.text, "name": event.name},
    )
