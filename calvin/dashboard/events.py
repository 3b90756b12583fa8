"""Pushes to the pages that watch a thread live (Channels groups)."""

import hashlib
import logging

from django.db import transaction
from django.template.loader import render_to_string

from calvin.channel_push import group_send
from sessions.models import Message

log = logging.getLogger(__name__)


def thread_group(thread_id: int) -> str:
    return f"thread.{thread_id}"


def message_event(message: Message, replace: bool = False, reactions=None) -> dict:
    """`replace`: the message was already shown and changed (edited, reacted to, a card decided).

    A message pushed as new has no reactions yet (a reaction waits for its message's
    delivery), so the push path, which every effect takes, costs no query for them.
    """
    if reactions is None:
        reactions = list(message.reactions.all()) if replace else []
    return {
        "type": "thread.message",
        "id": message.id,
        "kind": message.kind,
        "replace": replace,
        "html": render_to_string("chat/_message.html", {"message": message, "reactions": reactions}),
    }


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def login_group(session_key: str) -> str:
    # Group names end up in Redis keys: a digest, never the session key (a bearer credential).
    return "login." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def thread_broadcast(message: Message, replace: bool = False) -> None:
    if replace:
        message = Message.objects.select_related("member", "sender_agent").get(id=message.id)  # as committed
    group_send(thread_group(message.thread_id), message_event(message, replace))


def group_send_quietly(group: str, event: dict) -> None:
    # A lost push leaves the socket open until its next catch-up, which re-checks access itself.
    try:
        group_send(group, event)
    except Exception:
        log.warning("push of %s to %s failed", event["type"], group.split(".")[0], exc_info=True)


def access_recheck_on_commit(user_id: int) -> None:
    """The person's sockets re-check their access once the change that may have taken it commits."""
    transaction.on_commit(lambda: group_send_quietly(user_group(user_id), {"type": "access.recheck"}))


def login_ended_push(session_key: str) -> None:
    """Close the sockets opened under one login session (its logout), not the person's other logins."""
    group_send_quietly(login_group(session_key), {"type": "login.ended"})
