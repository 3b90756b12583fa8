"""What the chat platforms do when the services announce something (subscribed from ChatConfig.ready())."""

from calvin.chat.slack.installations import installations_reseal
from calvin.events import MessagePosted, records
from secrets_vault.services import resealer
from sessions.models import Message

resealer(installations_reseal)  # Slack bot tokens are sealed with the vault's keys too


@records(MessagePosted)
def message_to_platform(event: MessagePosted) -> None:
    """Calvin's own message reaches a Slack thread's channel too, through its ordered outbox, in
    the transaction that stored it (so it is queued exactly when the message exists)."""
    if not event.to_platform:
        return
    from calvin.chat.slack.outbox import thread_message_out

    thread_message_out(Message.objects.select_related("member").get(id=event.message_id))
