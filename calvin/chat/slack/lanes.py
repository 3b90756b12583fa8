"""How a Slack channel's lane drains (the posts calvin.chat.slack.outbox queued).

How a lane drains. A drainer holds the lane by a conditional UPDATE of `lease_until` (exactly
one row changes, or it leaves). It takes the lane's first-made waiting post, marks it SENDING in
its own commit, calls Slack, and records what Slack answered (ts, file id) and SENT in its own
commit at once. Then the lane waits `next_at`: the channel's pace after a post, Retry-After
after a 429, a backoff after a 5xx or a timeout. A lane that must wait is released and its
drain queued again with that countdown, so one worker serves many channels at once.

In the order made. A post's place is when its content was made: a tool call's effect was
made when the call was recorded, though its worker may enqueue it after the agent's reply.
So a post waits while a chat effect of a session in its channel, made before it, is not in
the lane yet (pending or applying), and the lane takes its posts by that moment, then id.

Never twice. A post found SENDING may have reached Slack (the worker died in the call, or the
call timed out): Slack is asked first, by the post id in the message's metadata, or by the
file id recorded before the bytes went; chat.update and reactions.add are safe to repeat.

No drain lost. Whoever releases a lane whose `next_at` is ahead queues the next drain for
that moment, even with nothing waiting; so a drain queued by a new post that finds the lane
held, or waiting, can leave: the lane is already in hand. One that finds posts after its
release (enqueued while it released) queues a drain too. Drains lost to a dead worker or a
lost publish are queued again by the sweep (slack_lanes_stalled).
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from calvin.chat.base import ChatPermanentError, ChatTemporaryError
from calvin.chat.models import SlackLane, SlackPost
from calvin.chat.slack.outbox import WAITING, lane_drain_queue
from calvin.chat.slack.web_calls import SENDERS, _post_find
from calvin.events import ToolCallChanged, announce
from secrets_vault.redaction import redact_text

log = logging.getLogger(__name__)

Kind, Status = SlackPost.Kind, SlackPost.Status
# Posts one drain sends before it lets other lanes' drains run (when the pace lets it go on).
BATCH = 20
# Chat effects whose posts go into their session's own thread: a later post to that channel
# waits for them (see _earlier_effect_unqueued). post_thread posts into other threads.
ORDERED_TOOLS = (
    "send_message",
    "edit_message",
    "add_reaction",
    "send_card",
    "ask_user_question",
    "post_card",
    "send_file",
    "request_secret",
)
# How often a lane looks again while an earlier effect is not queued, and for how long at most.
ORDER_POLL_SECONDS = 0.1
ORDER_WAIT_MAX_SECONDS = 300.0
# A file's bytes may take this long per MiB on top of the lease (a lease must outlast its call).
UPLOAD_SECONDS_PER_MIB = 4.0


def _lease_seconds() -> float:
    # Longer than any one post's calls, so an expired lease means a dead drainer.
    return max(30.0, 3 * settings.CALVIN_SLACK_HTTP_TIMEOUT + 10)


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
                    lane_drain_queue(lane_id, (lane["next_at"] - now).total_seconds())
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
    """(the lane, the lease) when this drainer got it: a conditional UPDATE that must change
    exactly one row (free and due), then the lane's team and channel."""
    now = timezone.now()
    until = now + timedelta(seconds=_lease_seconds())
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    due = Q(next_at__isnull=True) | Q(next_at__lte=now)
    if SlackLane.objects.filter(free, due, id=lane_id).update(lease_until=until) != 1:
        return None
    team_id, channel_id = SlackLane.objects.filter(id=lane_id).values_list("team_id", "channel_id").get()
    return SlackLane(id=lane_id, team_id=team_id, channel_id=channel_id), until


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
        lane_drain_queue(lane_id, (next_at - now).total_seconds())
    elif SlackPost.objects.filter(lane_id=lane_id, status__in=WAITING).exists():
        lane_drain_queue(lane_id)


def _lane_serve(lane: SlackLane, lease):
    """Send the lane's posts in the order they were made while its pace lets it. Returns the lease still held
    (None when it was lost) and when the lane may go on (None: nothing was sent)."""
    from calvin.chat.slack.installations import bot_for_team
    from calvin.chat.slack.web_api import slack_client

    bot = bot_for_team(lane.team_id)
    client = slack_client(bot.token) if bot is not None else None
    next_at = None
    for turn in range(BATCH):
        post = _lane_head(lane.id)
        if post is None:
            break
        if _earlier_effect_unqueued(lane, made=post.made):
            # Its turn comes after that effect's posts: look again shortly (the effect's own
            # post queues a drain too, but an effect that fails queues none).
            return lease, timezone.now() + timedelta(seconds=ORDER_POLL_SECONDS)
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


def _lane_head(lane_id: int) -> SlackPost | None:
    """The lane's next post: the one whose content was made first (a tool call's effect was
    made when the call was, however late its worker ran), then the lowest id."""
    return (
        SlackPost.objects.filter(lane_id=lane_id, status__in=WAITING)
        .annotate(made=Coalesce("tool_call__created_at", "created_at"))
        .order_by("made", "id")
        .first()
    )


def _earlier_effect_unqueued(lane: SlackLane, *, made) -> bool:
    """Whether a chat effect for this channel made before `made` still waits for its worker
    (pending or applying), so its posts are not in the lane yet. Calls waiting for a person's
    approval do not hold the channel (that can take hours), nor calls older than the bound
    (stuck ones; the sweep fails them)."""
    from sessions.models import Thread
    from tools.models import ToolCall

    return ToolCall.objects.filter(
        status__in=(ToolCall.Status.PENDING, ToolCall.Status.APPLYING),
        tool__in=ORDERED_TOOLS,
        created_at__lt=made,
        created_at__gte=timezone.now() - timedelta(seconds=ORDER_WAIT_MAX_SECONDS),
        session__thread__channel_kind=Thread.ChannelKind.SLACK,
        session__thread__channel_id=lane.channel_id,
        session__workspace__slack_installation__team_id=lane.team_id,
    ).exists()


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
    _post_sent(post, answer, lane)
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


def _post_sent(post: SlackPost, answer: dict, lane: SlackLane) -> None:
    from sessions.models import Message
    from tools.models import ToolCall

    ts, file_id = answer.get("ts") or "", answer.get("file_id") or ""
    # Its own commit, first: what Slack answered is kept whatever happens next.
    changed = SlackPost.objects.filter(id=post.id, status=Status.SENDING).update(
        status=Status.SENT, slack_ts=ts, slack_file_id=file_id, sent_at=timezone.now(), error=""
    )
    if changed:
        _history_keep(post, lane, ts)
    if not changed or post.part != 0 or post.kind not in (Kind.MESSAGE, Kind.FILE):
        return
    # Copies for readers of the message and the call (a lost one is found from the post again).
    if post.message_id and ts:
        Message.objects.filter(id=post.message_id, platform_ts="").update(platform_ts=ts)
    ids = {key: value for key, value in (("slack_ts", ts), ("slack_file_id", file_id)) if value}
    if post.tool_call_id and ids:
        with transaction.atomic():
            call = ToolCall.objects.select_for_update().filter(id=post.tool_call_id).only("platform_ids").first()
            if call is not None:
                ToolCall.objects.filter(id=call.id).update(platform_ids={**(call.platform_ids or {}), **ids})


def _history_keep(post: SlackPost, lane: SlackLane, ts: str) -> None:
    """What Calvin posted goes into its thread's history (read_thread reads it from there). A file's
    message has no ts in Slack's answer: its own message event brings it."""
    from calvin.chat.slack.history import slack_history_take_edit, slack_history_take_post

    text = post.payload.get("text") or ""
    try:
        if post.kind == Kind.MESSAGE and ts:
            slack_history_take_post(
                team_id=lane.team_id, channel_id=lane.channel_id, thread_ts=post.thread_ts, ts=ts, text=text
            )
        elif post.kind == Kind.UPDATE and ts:
            slack_history_take_edit(team_id=lane.team_id, channel_id=lane.channel_id, ts=ts, text=text)
    except Exception:  # the post is in Slack whatever the history holds; its message event may still bring it
        log.exception("Slack post %s is not in its thread's history", post.id)


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
    the agent told in its inbox. Once per call, whatever number of its posts failed. An
    approved call's approval fails too (its card and the agent say so), through the approvals
    engine's after-apply path, as when the effect itself fails."""
    from approvals.models import PendingApproval
    from approvals.services import ANSWERED_IN_CALL, approval_after_apply
    from sessions.services import inbox_post
    from tools.models import ToolCall

    changed = ToolCall.objects.filter(id=tool_call_id, status=ToolCall.Status.APPLIED).update(
        status=ToolCall.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if not changed:
        return False
    call = ToolCall.objects.select_related("session").get(id=tool_call_id)
    announce(
        ToolCallChanged(
            workspace_id=call.session.workspace_id,
            thread_id=call.session.thread_id,
            session_id=call.session_id,
            tool_call_id=call.id,
            tool=call.tool,
            status=ToolCall.Status.FAILED,
        )
    )
    kind = PendingApproval.objects.filter(tool_call_id=call.id).values_list("kind", flat=True).first()
    if approval_after_apply(tool_call_id=call.id, error=error) and kind not in ANSWERED_IN_CALL:
        return True  # the approval told the agent, in its own words
    inbox_post(session=call.session, text=f"{call.tool} (call {call.id}) was not delivered to Slack: {error}")
    return True


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
