"""Slack's outbox: every Web API effect Calvin has for a channel waits in that channel's lane
(SlackLane) as a SlackPost row, and leaves in the order it was made (calvin.chat.slack.lanes),
one at a time, no faster than Slack takes them.

The contract other code uses:

- `slack_post_enqueue(...)` adds one post to its channel's lane, in the caller's transaction,
  and queues a drain of the lane once that commits. Payloads by kind:
    message:  {"text": str, "blocks": [...]?}           chat.postMessage into `thread_ts`
    update:   {"text": str, "blocks": [...]?, "ts"?}    chat.update of part `part` of `message`
                                                         (or of the message at "ts")
    reaction: {"name": str, "timestamp"?}               reactions.add on part 0 of `message`
                                                         (or on the message at "timestamp")
    file:     {"stored_name", "file_name", "title", "comment", "alt_text", "size"}
                                                         files_upload_v2's three calls
  Text and blocks are sent as given: `text_out`, `card_out`, `file_out`, `change_out`,
  `reaction_out` and `thread_message_out` make them from a thread's Message (secrets
  checked, channel-wide mentions made inert, long text and large cards split).
- `lane_drain_queue(lane_id)` queues calvin.chat.slack.outbox_tasks.drain_slack_lane, which runs
  calvin.chat.slack.lanes.slack_lane_drain.

The lanes drain in calvin.chat.slack.lanes; the Web API calls are calvin.chat.slack.web_calls.
"""

import logging

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Max

from calvin.celery import queue_on_commit
from calvin.chat.base import ChatPermanentError
from calvin.chat.models import SlackInstallation, SlackLane, SlackPost
from calvin.chat.slack.text import blocks_neutralised, blocks_split, mentions_neutralised, text_parts

log = logging.getLogger(__name__)

Kind, Status = SlackPost.Kind, SlackPost.Status
WAITING = (Status.QUEUED, Status.SENDING)
EMPTY_TEXT = "(empty message)"


def _id(value):
    return getattr(value, "pk", value)


def lane_drain_queue(lane_id: int, countdown: float = 0.0, follow_up: bool = True) -> None:
    from calvin.chat.slack.outbox_tasks import drain_slack_lane

    try:
        drain_slack_lane.apply_async((lane_id,), {"follow_up": follow_up}, countdown=max(countdown, 0.0), retry=False)
    except Exception:
        log.warning("could not queue the drain of Slack lane %s; the sweep will", lane_id, exc_info=True)


# -- the contract


def slack_post_enqueue(
    *,
    team_id: str,
    channel_id: str,
    kind: str,
    payload: dict,
    thread_ts: str = "",
    message=None,
    tool_call=None,
    part: int = 0,
) -> SlackPost:
    """Add a post to the lane of `channel_id` in `team_id`, in the caller's transaction; its
    drain is queued once that commits. `message` and `tool_call` are rows or ids (or None)."""
    if kind not in Kind.values:
        raise ValueError(f"unknown Slack post kind {kind!r}")
    with transaction.atomic():
        lane, _ = SlackLane.objects.get_or_create(team_id=team_id, channel_id=channel_id)
        # Held until the caller commits: a lane's posts get their ids in commit order, so a
        # drainer taking the lowest waiting id never passes one that is still being written.
        SlackLane.objects.select_for_update().filter(id=lane.id).values_list("id", flat=True).first()
        post = SlackPost.objects.create(
            lane=lane,
            kind=kind,
            payload=payload,
            thread_ts=thread_ts or "",
            message_id=_id(message),
            tool_call_id=_id(tool_call),
            part=part,
        )
    from calvin.chat.slack.outbox_tasks import drain_slack_lane

    queue_on_commit(drain_slack_lane, lane.id)
    return post


# -- what leaves: a thread's Message as posts


def _team_id(thread) -> str:
    team_id = (
        SlackInstallation.objects.filter(workspace_id=thread.workspace_id).values_list("team_id", flat=True).first()
    )
    if not team_id:
        raise ChatPermanentError("Calvin is not installed in this workspace's Slack")
    return team_id


def content_scanner(*, thread, tool_call_id=None):
    """The secrets check of the session whose content this is: the calling session's for a
    tool call (its destination may be another session's thread), else the thread's own."""
    from secrets_vault.crypto import VaultCorrupt, VaultUnavailable
    from secrets_vault.scanner import scanner_for
    from secrets_vault.services import session_secret_pairs
    from sessions.models import Session
    from tools.models import ToolCall

    fields = ("id", "workspace_id", "agent_id")
    if tool_call_id is not None:
        session_id = ToolCall.objects.filter(id=tool_call_id).values_list("session_id", flat=True).first()
        session = Session.objects.filter(id=session_id).values(*fields).first()
    else:
        session = Session.objects.filter(thread_id=thread.id).values(*fields).first()
    if session is None:
        return None
    try:
        pairs = session_secret_pairs(
            session_id=session["id"], workspace_id=session["workspace_id"], agent_id=session["agent_id"]
        )
    except (VaultUnavailable, VaultCorrupt) as exc:
        # Fail closed: content that cannot be checked is not sent.
        raise ChatPermanentError(f"cannot check this content against the session's secrets: {exc}") from None
    return scanner_for(pairs) if pairs else None


def secrets_redacted(*, thread, value):
    """`value` (text, or blocks) with the values of the thread's session's secrets redacted:
    the same check for what reaches Slack outside the outbox (an ephemeral answer, a /calvin
    answer, a modal). Raises ChatPermanentError when the secrets cannot be read (fail closed)."""
    scanner = content_scanner(thread=thread)
    return value if scanner is None else _strings_map(value, scanner.redact)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _strings_map(value, change):
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: _strings_map(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strings_map(item, change) for item in value]
    return value


class _Outbound:
    """The checks every payload passes before it is enqueued: mentions made inert, then the
    secrets check on exactly what will leave. An agent's content (a tool call) holding a
    secret is refused, as the tools refuse it; Calvin's own text is redacted instead."""

    def __init__(self, *, thread, tool_call_id=None, refuse: bool | None = None):
        self.scanner = content_scanner(thread=thread, tool_call_id=tool_call_id)
        self.refuse = tool_call_id is not None if refuse is None else refuse

    def _checked(self, value, what: str):
        if self.scanner is None:
            return value
        if self.refuse:
            name = self.scanner.find_in(_strings(value))
            if name is not None:
                raise ChatPermanentError(
                    f"{what} contains the value of the secret {name} (plain or encoded); nothing was sent to Slack"
                )
            return value
        return _strings_map(value, self.scanner.redact)

    def text(self, text: str, what: str = "the message") -> str:
        return self._checked(mentions_neutralised(text or ""), what)

    def blocks(self, blocks: list, what: str = "the card") -> list:
        return self._checked(blocks_neutralised(blocks or []), what)


def _fallback(outbound: _Outbound, fallback_text: str) -> str:
    # The notification text of a card: short by construction (card_fallback_text), kept so.
    parts = text_parts(outbound.text(fallback_text, "the card's text"), limit=3000)
    return parts[0] if parts else "Card"


def _card_runs(blocks: list, fallback: str) -> list[dict]:
    runs = blocks_split(blocks)
    if not runs:
        return [{"text": fallback}]
    return [
        {"text": fallback if i == 0 else f"{fallback} (continued {i + 1}/{len(runs)})", "blocks": run}
        for i, run in enumerate(runs)
    ]


def _enqueue_all(*, thread, message, tool_call_id, kind_payloads: list[tuple[str, dict]], first_part: int = 0):
    team_id = _team_id(thread)
    return [
        slack_post_enqueue(
            team_id=team_id,
            channel_id=thread.channel_id,
            kind=kind,
            payload=payload,
            thread_ts=thread.thread_ts,
            message=message,
            tool_call=tool_call_id,
            part=first_part + i,
        )
        for i, (kind, payload) in enumerate(kind_payloads)
    ]


def text_out(*, thread, message, text: str, tool_call_id=None, refuse: bool | None = None) -> list[SlackPost]:
    """A text message into the thread, split into parts Slack takes."""
    outbound = _Outbound(thread=thread, tool_call_id=tool_call_id, refuse=refuse)
    parts = text_parts(outbound.text(text)) or [EMPTY_TEXT]
    return _enqueue_all(
        thread=thread,
        message=message,
        tool_call_id=tool_call_id,
        kind_payloads=[(Kind.MESSAGE, {"text": part}) for part in parts],
    )


def card_out(
    *, thread, message, blocks: list, fallback_text: str, tool_call_id=None, refuse: bool | None = None
) -> list[SlackPost]:
    """A card as Block Kit messages of at most 50 blocks each, in order."""
    outbound = _Outbound(thread=thread, tool_call_id=tool_call_id, refuse=refuse)
    runs = _card_runs(outbound.blocks(blocks), _fallback(outbound, fallback_text))
    return _enqueue_all(
        thread=thread, message=message, tool_call_id=tool_call_id, kind_payloads=[(Kind.MESSAGE, r) for r in runs]
    )


def file_out(
    *, thread, message, stored_name: str, file_name: str, title: str, comment: str, alt_text: str, tool_call_id=None
) -> list[SlackPost]:
    """A file into the thread (files_upload_v2), its comment with it; a comment too long for
    one message continues in text messages after the file."""
    outbound = _Outbound(thread=thread, tool_call_id=tool_call_id)
    names = outbound._checked([file_name, title or "", alt_text or ""], "the file's name, title or alt text")
    comments = text_parts(outbound.text(comment or "", "the file's comment"))
    payload = {
        "stored_name": stored_name,
        "file_name": names[0],
        "title": mentions_neutralised(names[1]) or names[0],
        "comment": comments[0] if comments else "",
        "alt_text": names[2],
        "size": default_storage.size(stored_name),
    }
    kind_payloads = [(Kind.FILE, payload)] + [(Kind.MESSAGE, {"text": rest}) for rest in comments[1:]]
    return _enqueue_all(thread=thread, message=message, tool_call_id=tool_call_id, kind_payloads=kind_payloads)


def change_out(
    *,
    thread,
    message,
    text: str | None = None,
    blocks: list | None = None,
    fallback_text: str = "",
    tool_call_id=None,
    refuse: bool | None = None,
) -> list[SlackPost]:
    """Edit a message already sent (or queued) to Slack in place: each part with chat.update.
    New content needing more parts than were posted continues in new messages; parts left
    over say so. Nothing for a message that never went to Slack."""
    posted = SlackPost.objects.filter(message_id=_id(message), kind=Kind.MESSAGE).aggregate(last=Max("part"))["last"]
    if posted is None:
        return []
    outbound = _Outbound(thread=thread, tool_call_id=tool_call_id, refuse=refuse)
    if blocks is None:
        new = [{"text": part} for part in text_parts(outbound.text(text or ""))] or [{"text": EMPTY_TEXT}]
        left_over = {"text": "(edited: the message now ends above)"}
    else:
        fallback = _fallback(outbound, fallback_text)
        new = _card_runs(outbound.blocks(blocks), fallback)
        note = {"type": "context", "elements": [{"type": "mrkdwn", "text": "(the card now ends above)"}]}
        left_over = {"text": fallback, "blocks": [note]}
    kind_payloads = []
    for part in range(max(posted + 1, len(new))):
        if part <= posted:
            kind_payloads.append((Kind.UPDATE, new[part] if part < len(new) else left_over))
        else:
            kind_payloads.append((Kind.MESSAGE, new[part]))
    return _enqueue_all(thread=thread, message=message, tool_call_id=tool_call_id, kind_payloads=kind_payloads)


def reaction_out(*, thread, message, emoji: str, tool_call_id=None) -> list[SlackPost]:
    return _enqueue_all(
        thread=thread, message=message, tool_call_id=tool_call_id, kind_payloads=[(Kind.REACTION, {"name": emoji})]
    )


def thread_message_out(message) -> list[SlackPost]:
    """Calvin's own message in a thread (the agent's reply, a notice, a system inbox message, a
    person's message written on Calvin's thread page) to Slack as well, when the thread is a
    Slack thread; nothing for other threads. Its text is redacted against the session's
    secrets, not refused: it is already stored.

    Never breaks the caller: a message that cannot be queued is logged (without its text)."""
    from sessions.models import Thread

    thread = (
        Thread.objects.filter(id=message.thread_id, channel_kind=Thread.ChannelKind.SLACK)
        .only("id", "workspace_id", "channel_kind", "channel_id", "thread_ts")
        .first()
    )
    if thread is None:
        return []
    text = message.text
    if message.author == message.Author.PERSON:
        # Written on Calvin's thread page: the bot posts it, so say whose words they are.
        text = f"*{message.member or 'someone'}* (in Calvin): {text}"
    try:
        with transaction.atomic():
            return text_out(thread=thread, message=message, text=text, refuse=False)
    except Exception as exc:
        log.warning(
            "message %s of thread %s was not queued for Slack: %s",
            message.id,
            thread.id,
            str(exc) if isinstance(exc, ChatPermanentError) else type(exc).__name__,
        )
        return []
