"""Replacing a card a tool call posted: what the worker will post, and what is already shown.

A card's state can change before the worker has posted it (a question answered at once,
a secret set from a link): the stored payload is replaced first, so a later post shows
the new state, and the posted message, if any, is edited in place.
"""

from django.db import transaction

from calvin.chat import chat_adapter_for
from sessions.models import Message
from tools.models import ToolCall


def tool_call_card_replace(*, tool_call_id: int, payload: dict, result: dict | None = None) -> bool:
    """Store `payload` ({items, blocks, text}) as the call's card; edit the posted message.
    True when a posted card was edited. A failed edit raises the adapter's error."""
    fields = {"payload": payload} if result is None else {"payload": payload, "result": result}
    ToolCall.objects.filter(id=tool_call_id).update(**fields)
    message = Message.objects.filter(tool_call_id=tool_call_id).select_related("thread").first()
    if message is None or message.card == payload["items"]:
        return False  # not posted yet (the worker posts the stored payload), or already shown
    with transaction.atomic():
        chat_adapter_for(message.thread).update_card(
            thread=message.thread,
            message=message,
            items=payload["items"],
            blocks=payload["blocks"],
            fallback_text=payload["text"],
        )
    return True
