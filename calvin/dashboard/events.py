"""Pushes to the pages that watch a thread live (Channels groups)."""

import hashlib
import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from calvin.channel_push import group_send
from sessions.models import Message

log = logging.getLogger(__name__)
# One catch-up answer renders at most this much; a page that missed more reloads (latest page).
CATCH_UP_MESSAGES = 100
CATCH_UP_BYTES = 512 * 1024

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


def thread_push_on_commit(message: Message, replace: bool = False) -> None:
    """Push the message to watching pages once its transaction commits.

    A failed push is not a failed delivery: the message is stored, and pages catch up
    from the database when they (re)connect.
    """

    def push():
        try:
            thread_broadcast(message, replace)
        except Exception:
            log.warning("live push of message %s failed", message.id, exc_info=True)

    transaction.on_commit(push)


# A page that reconnects also gets the messages it already has that changed lately (a late
# delivery of a send_message, an edit, a reaction): it may have missed those pushes.
RECENT_CHANGES = timedelta(minutes=10)
RECENT_CHANGES_SHOWN = 50


def _recently_changed(thread_id: int, since: int) -> list[Message]:
    cutoff = timezone.now() - RECENT_CHANGES
    changed = Q(delivered_at__gt=cutoff, tool_call__tool="send_message") | Q(edited_at__gt=cutoff)
    changed |= Q(reactions__created_at__gt=cutoff)
    query = Message.transcript().filter(changed, thread_id=thread_id, id__lte=since).distinct().order_by("id")
    return list(query.select_related("member", "sender_agent").prefetch_related("reactions")[:RECENT_CHANGES_SHOWN])


def thread_catch_up(thread_id: int, since: int) -> tuple[list[dict], bool]:
    """What a page that last saw message `since` has missed, or ([], True) when that is more than one answer holds."""
    query = Message.transcript().filter(thread_id=thread_id, id__gt=since).select_related("member", "sender_agent")
    messages = list(query.prefetch_related("reactions").order_by("id")[: CATCH_UP_MESSAGES + 1])
    if len(messages) > CATCH_UP_MESSAGES:
        return [], True
    events, size = [], 0
    changes = [message_event(m, True, list(m.reactions.all())) for m in _recently_changed(thread_id, since)]
    missed = [message_event(m, False, list(m.reactions.all())) for m in messages]
    for event in [*(changes if since else []), *missed]:
        events.append(event)
        size += len(event["html"].encode())
        if size > CATCH_UP_BYTES:
            return [], True
    return events, False


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
