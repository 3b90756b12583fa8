"""Slack's outbox: every Web API effect Calvin has for a channel waits in that channel's lane
(SlackLane) as a SlackPost row, and leaves in id order, one at a time, no faster than Slack
takes them.

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
- `slack_lane_drain(lane_id=...)`, run by calvin.chat.slack.outbox_tasks.drain_slack_lane.

How a lane drains. A drainer holds the lane by a conditional UPDATE of `lease_until` (exactly
one row changes, or it leaves). It takes the lane's oldest waiting post, marks it SENDING in
its own commit, calls Slack, and records what Slack answered (ts, file id) and SENT in its own
commit at once. Then the lane waits `next_at`: the channel's pace after a post, Retry-After
after a 429, a backoff after a 5xx or a timeout. A lane that must wait is released and its
drain queued again with that countdown, so one worker serves many channels at once.

Never twice. A post found SENDING may have reached Slack (the worker died in the call, or the
call timed out): Slack is asked first, by the post id in the message's metadata, or by the
file id recorded before the bytes went; chat.update and reactions.add are safe to repeat.

No drain lost. Whoever releases a lane whose `next_at` is ahead queues the next drain for
that moment, even with nothing waiting; so a drain queued by a new post that finds the lane
held, or waiting, can leave: the lane is already in hand. One that finds posts after its
release (enqueued while it released) queues a drain too. Drains lost to a dead worker or a
lost publish are queued again by the sweep (slack_lanes_stalled).
"""

import json
import logging
import urllib.error
import urllib.request
from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import F, Max, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from slack_sdk.errors import SlackApiError

from calvin.celery import queue_on_commit
from calvin.chat.base import ChatPermanentError, ChatTemporaryError
from calvin.chat.models import SlackInstallation, SlackLane, SlackPost
from calvin.chat.slack.text import blocks_neutralised, blocks_split, mentions_neutralised, text_parts
from secrets_vault.redaction import redact_text

log = logging.getLogger(__name__)

Kind, Status = SlackPost.Kind, SlackPost.Status
WAITING = (Status.QUEUED, Status.SENDING)
METADATA_EVENT = "calvin_post"
EMPTY_TEXT = "(empty message)"
# Posts one drain sends before it lets other lanes' drains run (when the pace lets it go on).
BATCH = 20
# A thread searched for a post that may have arrived: pages of 200, at most this many.
SEARCH_PAGES = 10
# How far before a post was made its message is looked for (clocks and queues drift).
SEARCH_SLACK_SECONDS = 600
# A file's bytes may take this long per MiB on top of the lease (a lease must outlast its call).
UPLOAD_SECONDS_PER_MIB = 4.0


def _id(value):
    return getattr(value, "pk", value)


def _lease_seconds() -> float:
    # Longer than any one post's calls, so an expired lease means a dead drainer.
    return max(30.0, 3 * settings.CALVIN_SLACK_HTTP_TIMEOUT + 10)


def _drain_queue(lane_id: int, countdown: float = 0.0, follow_up: bool = True) -> None:
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


def _scanner(*, thread, tool_call_id=None):
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
        self.scanner = _scanner(thread=thread, tool_call_id=tool_call_id)
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
    """Calvin's own message in a thread (the agent's reply, a notice, a system inbox message)
    to Slack as well, when the thread is a Slack thread; nothing for other threads. Its text
    is redacted against the session's secrets, not refused: it is already stored.

    Never breaks the caller: a message that cannot be queued is logged (without its text)."""
    from sessions.models import Thread

    thread = (
        Thread.objects.filter(id=message.thread_id, channel_kind=Thread.ChannelKind.SLACK)
        .only("id", "workspace_id", "channel_kind", "channel_id", "thread_ts")
        .first()
    )
    if thread is None:
        return []
    try:
        with transaction.atomic():
            return text_out(thread=thread, message=message, text=message.text, refuse=False)
    except Exception as exc:
        log.warning(
            "message %s of thread %s was not queued for Slack: %s",
            message.id,
            thread.id,
            str(exc) if isinstance(exc, ChatPermanentError) else type(exc).__name__,
        )
        return []


# -- the drain


def slack_lane_drain(*, lane_id: int, follow_up: bool = False) -> None:
    """Serve the lane until it must wait or is empty (or BATCH posts went), then hand it on.

    `follow_up`: queued by a drainer for the moment its lane may go on. Such a drain, early
    or beaten to the lane, queues itself again for `next_at`; a drain queued for a new post
    just leaves then, as the lane is in hand."""
    if connection.in_atomic_block:
        # Each step must commit on its own: what Slack answered may never roll back.
        raise RuntimeError("a Slack lane is drained outside any transaction")
    taken = _lease_take(lane_id)
    if taken is None:
        if follow_up:
            lane = SlackLane.objects.filter(id=lane_id).values("next_at", "lease_until").first()
            now = timezone.now()
            if lane and not (lane["lease_until"] and lane["lease_until"] >= now):
                if lane["next_at"] and lane["next_at"] > now:
                    _drain_queue(lane_id, (lane["next_at"] - now).total_seconds())
        return
    lane, lease = taken
    next_at = None
    try:
        lease, next_at = _lane_serve(lane, lease)
    finally:
        if lease is not None:  # released with the moment it may go on, in one statement
            SlackLane.objects.filter(id=lane_id, lease_until=lease).update(
                lease_until=None, **({"next_at": next_at} if next_at else {})
            )
    _lane_hand_on(lane_id, next_at)


def _lease_take(lane_id: int) -> tuple[SlackLane, object] | None:
    """(the lane, the lease) when this drainer got it: one conditional UPDATE, which reads the
    lane's team and channel as it takes it."""
    now = timezone.now()
    until = now + timedelta(seconds=_lease_seconds())
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SlackLane._meta.db_table} SET lease_until = %s"
            " WHERE id = %s AND (lease_until IS NULL OR lease_until < %s) AND (next_at IS NULL OR next_at <= %s)"
            " RETURNING team_id, channel_id",
            [until, lane_id, now, now],
        )
        rows = cursor.fetchall()
    if len(rows) != 1:
        return None
    return SlackLane(id=lane_id, team_id=rows[0][0], channel_id=rows[0][1]), until


def _lease_renew(lane_id: int, lease, seconds: float = 0.0):
    """The lease again from now, if this drainer still holds it (it can have expired and
    been taken by another): the new lease, or None."""
    until = timezone.now() + timedelta(seconds=_lease_seconds() + seconds)
    if until <= lease:
        until = lease + timedelta(microseconds=1)  # a new value: the lease is its holder's token
    renewed = SlackLane.objects.filter(id=lane_id, lease_until=lease).update(lease_until=until)
    return until if renewed == 1 else None


def _lane_hand_on(lane_id: int, next_at) -> None:
    """After the release: queue the lane's next drain for when it may go on, or at once when
    posts came in while it was being released."""
    now = timezone.now()
    if next_at is not None and next_at > now:
        _drain_queue(lane_id, (next_at - now).total_seconds())
    elif SlackPost.objects.filter(lane_id=lane_id, status__in=WAITING).exists():
        _drain_queue(lane_id)


def _lane_serve(lane: SlackLane, lease):
    """Send the lane's posts in id order while its pace lets it. Returns the lease still held
    (None when it was lost) and when the lane may go on (None: nothing was sent)."""
    from calvin.chat.slack.installations import bot_for_team
    from calvin.chat.slack.web_api import slack_client

    bot = bot_for_team(lane.team_id)
    client = slack_client(bot.token) if bot is not None else None
    next_at = None
    for turn in range(BATCH):
        post = SlackPost.objects.filter(lane_id=lane.id, status__in=WAITING).order_by("id").first()
        if post is None:
            break
        if turn or post.kind == Kind.FILE:  # a lease just taken covers one post's calls
            size_mib = (post.payload.get("size") or 0) / (1024 * 1024) if post.kind == Kind.FILE else 0
            lease = _lease_renew(lane.id, lease, seconds=size_mib * UPLOAD_SECONDS_PER_MIB)
            if lease is None:
                return None, None
        wait = _post_send(post, lane, client)
        next_at = timezone.now() + timedelta(seconds=wait)
        if wait > 0:
            break
    return lease, next_at


def _post_send(post: SlackPost, lane: SlackLane, client) -> float:
    """One try at one post; how long the lane waits before its next post."""
    if client is None:
        _post_fail(post, "Calvin is not installed in this Slack workspace any more")
        return 0.0
    was = post.status
    SlackPost.objects.filter(id=post.id).update(status=Status.SENDING, attempts=F("attempts") + 1)
    post.attempts += 1
    try:
        answer = _post_find(client, lane, post) if was == Status.SENDING else None
        fresh = answer is None
        if fresh:
            answer = SENDERS[post.kind](client, lane, post)
    except ChatTemporaryError as exc:
        return _post_later(post, was, exc)
    except ChatPermanentError as exc:
        _post_fail(post, str(exc))
        return 0.0
    except Exception as exc:
        log.exception("Slack post %s could not be sent", post.id)
        _post_fail(post, f"internal error ({type(exc).__name__})")
        return 0.0
    _post_sent(post, answer)
    # Slack counts its pace from the post it took; one found already there took no new slot.
    return settings.CALVIN_SLACK_CHANNEL_PACE_SECONDS if fresh else 0.0


def _post_later(post: SlackPost, was: str, exc: ChatTemporaryError) -> float:
    error = redact_text(str(exc))[:1000]
    if exc.retry_after is not None:
        # 429: Slack did not look at it. Not an attempt, and no more "sent" than before.
        SlackPost.objects.filter(id=post.id).update(status=was, attempts=F("attempts") - 1, error=error)
        return exc.retry_after
    if post.attempts >= settings.CALVIN_SLACK_POST_ATTEMPTS:
        _post_fail(post, f"gave up after {post.attempts} attempts: {error}")
        return 0.0
    # A 5xx or a timeout: it may have arrived, so it stays SENDING and the next try asks first.
    SlackPost.objects.filter(id=post.id).update(error=error)
    return min(30.0, 0.5 * 2 ** (post.attempts - 1))


def _post_sent(post: SlackPost, answer: dict) -> None:
    from sessions.models import Message
    from tools.models import ToolCall

    ts, file_id = answer.get("ts") or "", answer.get("file_id") or ""
    # Its own commit, first: what Slack answered is kept whatever happens next.
    changed = SlackPost.objects.filter(id=post.id, status=Status.SENDING).update(
        status=Status.SENT, slack_ts=ts, slack_file_id=file_id, sent_at=timezone.now(), error=""
    )
    if not changed or post.part != 0 or post.kind not in (Kind.MESSAGE, Kind.FILE):
        return
    # Copies for readers of the message and the call (a lost one is found from the post again).
    if post.message_id and ts:
        Message.objects.filter(id=post.message_id, platform_ts="").update(platform_ts=ts)
    ids = {key: value for key, value in (("slack_ts", ts), ("slack_file_id", file_id)) if value}
    if post.tool_call_id and ids:
        ToolCall.objects.filter(id=post.tool_call_id).update(
            platform_ids=RawSQL("platform_ids || %s::jsonb", (json.dumps(ids),))
        )


def _post_fail(post: SlackPost, error: str) -> None:
    error = redact_text(error)[:1000]
    with transaction.atomic():
        if not SlackPost.objects.filter(id=post.id, status__in=WAITING).update(status=Status.FAILED, error=error):
            return
        if post.message_id and post.kind in (Kind.MESSAGE, Kind.FILE):
            # The rest of a split message (or a file's long comment) cannot stand alone.
            SlackPost.objects.filter(
                lane_id=post.lane_id, message_id=post.message_id, kind=Kind.MESSAGE, part__gt=post.part
            ).filter(status=Status.QUEUED).update(
                status=Status.FAILED, error="an earlier part of this message was not delivered"
            )
        _failure_tell(post, error)
    log.warning("Slack post %s (%s) failed: %s", post.id, post.kind, error)


def _failure_tell(post: SlackPost, error: str) -> None:
    """Who must know: the agent, for its tool call (its inbox message is a notice in the
    thread too); the thread, for the agent's reply; for Calvin's own notices, the log only
    (a notice about a notice Slack refused would be refused in turn)."""
    from sessions.models import Message
    from sessions.services import system_notice_post

    if post.tool_call_id:
        tool_call_delivery_fail(tool_call_id=post.tool_call_id, error=error)
        return
    message = Message.objects.filter(id=post.message_id).values("thread_id", "author").first()
    if message and message["author"] == Message.Author.AGENT and post.kind == Kind.MESSAGE:
        system_notice_post(
            thread_id=message["thread_id"], text=f"The agent's reply could not be delivered to Slack: {error}"
        )


@transaction.atomic
def tool_call_delivery_fail(*, tool_call_id: int, error: str) -> bool:
    """An applied call whose post Slack finally refused: recorded failed with the reason, and
    the agent told in its inbox. Once per call, whatever number of its posts failed."""
    from sessions.services import inbox_post
    from tools.models import ToolCall

    changed = ToolCall.objects.filter(id=tool_call_id, status=ToolCall.Status.APPLIED).update(
        status=ToolCall.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if not changed:
        return False
    call = ToolCall.objects.select_related("session").get(id=tool_call_id)
    inbox_post(session=call.session, text=f"{call.tool} (call {call.id}) was not delivered to Slack: {error}")
    return True


# -- the Web API calls


def _error(exc: Exception, doing: str) -> Exception:
    from calvin.chat.slack.web_api import slack_error

    return slack_error(exc, doing=doing)


def _call(doing: str, method, **kwargs):
    try:
        return method(**kwargs)
    except Exception as exc:
        raise _error(exc, doing) from None


def _slack_error_code(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    return data.get("error", "") if isinstance(data, dict) else ""


def _metadata_post_id(message: dict) -> str | None:
    metadata = message.get("metadata") or {}
    if metadata.get("event_type") != METADATA_EVENT:
        return None
    return str((metadata.get("event_payload") or {}).get("post_id"))


def _thread_search(client, lane: SlackLane, post: SlackPost, matches) -> dict | None:
    """The first message of the post's thread (or channel) that `matches`, asking Slack."""
    oldest = f"{post.created_at.timestamp() - SEARCH_SLACK_SECONDS:.6f}"
    cursor = None
    for _ in range(SEARCH_PAGES):
        kwargs = {"channel": lane.channel_id, "include_all_metadata": True, "limit": 200, "oldest": oldest}
        if cursor:
            kwargs["cursor"] = cursor
        try:
            if post.thread_ts:
                answer = client.conversations_replies(ts=post.thread_ts, **kwargs)
            else:
                answer = client.conversations_history(**kwargs)
        except SlackApiError as exc:
            if _slack_error_code(exc) == "thread_not_found":
                return None  # nothing in that thread yet: the post is not there either
            raise _error(exc, "conversations.replies" if post.thread_ts else "conversations.history") from None
        except Exception as exc:
            raise _error(exc, "conversations.replies" if post.thread_ts else "conversations.history") from None
        for message in answer.get("messages") or []:
            if matches(message):
                return message
        cursor = (answer.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            return None
    return None


def _has_file(file_id: str):
    return lambda message: any(f.get("id") == file_id for f in message.get("files") or [])


def _post_find(client, lane: SlackLane, post: SlackPost) -> dict | None:
    """What Slack already has of a post that was being sent, or None when it has nothing."""
    if post.kind == Kind.MESSAGE:
        found = _thread_search(client, lane, post, lambda m: _metadata_post_id(m) == str(post.id))
        return {"ts": found["ts"]} if found else None
    if post.kind == Kind.FILE and post.slack_file_id:
        found = _thread_search(client, lane, post, _has_file(post.slack_file_id))
        return {"ts": found["ts"], "file_id": post.slack_file_id} if found else None
    return None  # a file whose upload never started; chat.update and reactions.add repeat safely


def _target_ts(client, lane: SlackLane, post: SlackPost) -> str:
    """The ts of the message (part `post.part`) an update or a reaction is for."""
    from sessions.models import Message

    message = Message.objects.filter(id=post.message_id).only("id", "platform_ts").first()
    if message is None:
        raise ChatPermanentError("the message to change is gone")
    if post.part == 0 and message.platform_ts:
        return message.platform_ts
    target = (
        SlackPost.objects.filter(message_id=message.id, kind__in=(Kind.MESSAGE, Kind.FILE), part=post.part)
        .order_by("id")
        .first()
    )
    if target is None or target.status != Status.SENT:
        why = f" ({target.error or target.status})" if target is not None else ""
        raise ChatPermanentError(f"message {message.id} never reached Slack{why}")
    if target.slack_ts:
        return target.slack_ts
    found = _thread_search(client, lane, target, _has_file(target.slack_file_id)) if target.slack_file_id else None
    if found is None:
        raise ChatPermanentError(f"message {message.id} is not in its Slack thread")
    with transaction.atomic():  # found once, kept
        SlackPost.objects.filter(id=target.id).update(slack_ts=found["ts"])
        if target.part == 0:
            Message.objects.filter(id=message.id, platform_ts="").update(platform_ts=found["ts"])
    return found["ts"]


def _send_message(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    kwargs = {
        "channel": lane.channel_id,
        "text": payload.get("text") or "",
        # How a later try finds this message if the answer to this one is lost.
        "metadata": {"event_type": METADATA_EVENT, "event_payload": {"post_id": post.id}},
    }
    if payload.get("blocks"):
        kwargs["blocks"] = payload["blocks"]
    if post.thread_ts:
        kwargs["thread_ts"] = post.thread_ts
    answer = _call("chat.postMessage", client.chat_postMessage, **kwargs)
    return {"ts": answer.get("ts") or ""}


def _send_update(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    ts = payload.get("ts") or _target_ts(client, lane, post)
    kwargs = {"channel": lane.channel_id, "ts": ts, "text": payload.get("text") or ""}
    if "blocks" in payload:
        kwargs["blocks"] = payload["blocks"]
    _call("chat.update", client.chat_update, **kwargs)
    return {"ts": ts}


def _send_reaction(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    ts = payload.get("timestamp") or _target_ts(client, lane, post)
    try:
        client.reactions_add(channel=lane.channel_id, timestamp=ts, name=payload["name"])
    except SlackApiError as exc:
        if _slack_error_code(exc) != "already_reacted":  # what was asked is there
            raise _error(exc, "reactions.add") from None
    except Exception as exc:
        raise _error(exc, "reactions.add") from None
    return {"ts": ts}


def _upload_bytes(url: str, handle, size: int) -> None:
    """files_upload_v2's second call: the bytes, POSTed to the URL Slack gave. Its errors
    never name the URL (it is a capability)."""
    request = urllib.request.Request(
        url,
        data=handle,
        method="POST",
        headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.CALVIN_SLACK_HTTP_TIMEOUT) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 429 or exc.code >= 500:
            raise ChatTemporaryError(f"Slack answered {exc.code} to the file's bytes") from None
        raise ChatPermanentError(f"Slack refused the file's bytes (HTTP {exc.code})") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ChatTemporaryError(f"Slack could not be reached for the file's bytes: {type(exc).__name__}") from None


def _send_file(client, lane: SlackLane, post: SlackPost) -> dict:
    payload = post.payload
    name = payload["stored_name"]
    try:
        size = default_storage.size(name)
    except OSError:
        raise ChatPermanentError("the file is no longer stored") from None
    answer = _call(
        "files.getUploadURLExternal",
        client.files_getUploadURLExternal,
        filename=payload["file_name"],
        length=size,
        alt_txt=payload.get("alt_text") or None,
    )
    file_id = answer["file_id"]
    # Its own commit, before the bytes go: a try after a lost answer looks for this file.
    SlackPost.objects.filter(id=post.id).update(slack_file_id=file_id)
    with default_storage.open(name, "rb") as handle:
        _upload_bytes(answer["upload_url"], handle, size)
    _call(
        "files.completeUploadExternal",
        client.files_completeUploadExternal,
        files=[{"id": file_id, "title": payload.get("title") or payload["file_name"]}],
        channel_id=lane.channel_id,
        initial_comment=payload.get("comment") or None,
        thread_ts=post.thread_ts or None,
    )
    return {"file_id": file_id}


SENDERS = {Kind.MESSAGE: _send_message, Kind.UPDATE: _send_update, Kind.REACTION: _send_reaction, Kind.FILE: _send_file}


# -- the sweep


def slack_lanes_stalled(*, now, grace_seconds: float | None = None, limit: int = 500) -> list[int]:
    """Lanes with a post waiting longer than `grace` that nobody serves: no live lease, and
    not waiting for a `next_at` still to come (or only just past). Their drain was lost."""
    from django.db.models import Exists, OuterRef

    grace = timedelta(seconds=settings.CALVIN_LOST_PENDING_SECONDS if grace_seconds is None else grace_seconds)
    waiting = SlackPost.objects.filter(lane=OuterRef("pk"), status__in=WAITING, created_at__lt=now - grace)
    lanes = (
        SlackLane.objects.filter(Exists(waiting))
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .filter(Q(next_at__isnull=True) | Q(next_at__lt=now - grace))
    )
    return list(lanes.values_list("id", flat=True)[:limit])
