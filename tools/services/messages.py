"""send_message, edit_message and add_reaction: the message service, and their effects.

The id the agent gets back is the Message id in the destination's thread (the id space
people's messages use too), so edit_message and add_reaction address messages one way.
A message to a chat destination exists from the call on and is delivered by the worker;
a message to an agent goes straight into that agent's session inbox as a queued turn.
"""

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from calvin.chat import ChatPermanentError, chat_adapter_for
from calvin.chat.emoji import SHORTCODE, UnknownEmoji, emoji_named
from calvin.workspaces.models import Agent
from secrets_vault.scanner import SecretScanner
from sessions.models import Message
from sessions.services import agent_inbox_session, inbox_post
from tools.caller import Caller
from tools.effects import EffectNotReady, already_delivered
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.common import refuse_secrets, secret_scanner_for, tool_call_record
from tools.services.destinations import destination_resolve

NANOCLAW = ToolCall.Server.NANOCLAW


def _record(caller: Caller, tool: str, arguments: dict, payload: dict, scanner: SecretScanner, **kwargs) -> ToolCall:
    return tool_call_record(
        caller=caller, tool=tool, server=NANOCLAW, arguments=arguments, payload=payload, secrets=scanner, **kwargs
    )


@transaction.atomic
def message_send(*, caller: Caller, text: str, to: str) -> dict:
    destination = destination_resolve(caller=caller, to=to)
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the message", secrets=scanner, content=text)
    arguments = {"text": text, "to": to}
    if destination.agent is not None:
        session = agent_inbox_session(agent=destination.agent, owner_id=_owner_id(caller))
        call = _record(caller, "send_message", arguments, {"session_id": session.id}, scanner, status="applied")
        sender = Agent.objects.filter(id=caller.agent_id).first()
        message = inbox_post(session=session, text=text, author=Message.Author.AGENT, sender_agent=sender)
        Message.objects.filter(id=message.id).update(tool_call=call)
        return {"messageId": message.id, "to": destination.name, "status": "delivered to the agent's inbox"}
    call = _record(caller, "send_message", arguments, {"thread_id": destination.thread_id}, scanner)
    message = Message.objects.create(
        thread_id=destination.thread_id,
        kind=Message.Kind.TEXT,
        author=Message.Author.AGENT,
        text=text,
        tool_call=call,
        delivered_at=None,  # the worker delivers it
    )
    return {"messageId": message.id, "to": destination.name, "status": "queued"}


def _owner_id(caller: Caller) -> int | None:
    from sessions.models import Session

    return Session.objects.filter(id=caller.session_id).values_list("owner_id", flat=True).first()


def _own_message(caller: Caller, message_id: int) -> Message:
    """A message this agent sent (send_message), in any of its sessions, in this workspace."""
    message = (
        Message.objects.filter(
            id=message_id,
            tool_call__tool="send_message",
            tool_call__server=NANOCLAW,
            tool_call__session__agent_id=caller.agent_id,
            tool_call__session__workspace_id=caller.workspace_id,
        ).first()
        if caller.agent_id is not None
        else None
    )
    if message is None:
        raise ToolRefused(f"message {message_id} is not one you sent: edit_message changes only your own messages")
    return message


def _message_in_own_threads(caller: Caller, message_id: int) -> Message:
    """A message in a thread of this agent's sessions, or one this agent sent elsewhere."""
    mine = Q(thread__session__agent_id=caller.agent_id) | Q(
        tool_call__session__agent_id=caller.agent_id, tool_call__server=NANOCLAW
    )
    message = (
        Message.objects.filter(mine, id=message_id, thread__workspace_id=caller.workspace_id).first()
        if caller.agent_id is not None
        else None
    )
    if message is None:
        raise ToolRefused(f"message {message_id} is not in one of your threads: add_reaction reacts only there")
    return message


@transaction.atomic
def message_edit(*, caller: Caller, message_id: int, text: str) -> dict:
    message = _own_message(caller, message_id)
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the new text", secrets=scanner, content=text)
    arguments = {"messageId": message_id, "text": text}
    if message.sender_agent_id is not None:
        # A message in another agent's inbox: the edit is a row change, like the send was.
        Message.objects.filter(id=message.id).update(text=text, edited_at=timezone.now())
        _record(caller, "edit_message", arguments, {"message_id": message.id}, scanner, status="applied")
        return {"messageId": message.id, "status": "edited"}
    call = _record(
        caller, "edit_message", arguments, {"message_id": message.id, "thread_id": message.thread_id}, scanner
    )
    return {"messageId": message.id, "tool_call_id": call.id, "status": "queued"}


def emoji_shortcode(emoji: str) -> str:
    """The stored name of the emoji `emoji` names (`thumbs_up`, `:+1:` and `thumbsup` are one: `+1`);
    the emoji character itself, or a name no standard emoji has, is refused."""
    code = emoji[1:-1] if len(emoji) > 2 and emoji[0] == emoji[-1] == ":" else emoji
    if not SHORTCODE.fullmatch(code):
        raise ToolRefused(
            "emoji must be a shortcode such as thumbs_up or heart (lowercase letters, digits, _ + - '),"
            " not the emoji character"
        )
    try:
        return emoji_named(code).name
    except UnknownEmoji as unknown:
        raise ToolRefused(f"{unknown} (add_reaction takes standard emoji only, by shortcode)") from None


@transaction.atomic
def reaction_add(*, caller: Caller, message_id: int, emoji: str) -> dict:
    code = emoji_shortcode(emoji)
    message = _message_in_own_threads(caller, message_id)
    call = _record(
        caller,
        "add_reaction",
        {"messageId": message_id, "emoji": emoji},
        {"message_id": message.id, "thread_id": message.thread_id, "emoji": code},
        secret_scanner_for(caller),
    )
    return {"messageId": message.id, "emoji": code, "tool_call_id": call.id, "status": "queued"}


# Effects, run by the worker (tools/effects.py EFFECTS).


def _delivered_target(call: ToolCall) -> Message:
    """The message an edit or reaction is for, once its own send is delivered; never before."""
    message = Message.objects.select_related("thread", "tool_call").get(id=call.payload["message_id"])
    if message.delivered_at is None:
        send = message.tool_call
        if send is not None and send.status in (ToolCall.Status.FAILED, ToolCall.Status.EXPIRED):
            raise ChatPermanentError(f"message {message.id} was never delivered ({send.error or send.status})")
        raise EffectNotReady(f"message {message.id} is still queued")
    return message


def send_message_effect(call: ToolCall) -> dict:
    message = Message.objects.select_related("thread").get(tool_call=call)
    adapter = chat_adapter_for(message.thread)
    # A retry asks the platform first, as every chat effect does (tools/effects.py).
    return already_delivered(call, adapter, message.thread) or adapter.post_message(
        thread=message.thread, message=message, tool_call_id=call.id
    )


def edit_message_effect(call: ToolCall) -> dict:
    message = _delivered_target(call)
    return chat_adapter_for(message.thread).edit_message(
        thread=message.thread, message=message, text=call.arguments["text"]
    )


def add_reaction_effect(call: ToolCall) -> dict:
    message = _delivered_target(call)
    agent_id = call.session.agent_id
    return chat_adapter_for(message.thread).add_reaction(
        thread=message.thread, message=message, emoji=call.payload["emoji"], agent_id=agent_id
    )
