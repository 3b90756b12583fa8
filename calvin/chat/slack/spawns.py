"""spawn_thread's Slack side: the new thread is a top-level message in the parent's channel, or
in the owner's direct messages when the parent's channel is a code channel (seed 000).

The message goes through the channel's outbox like every post (in order, paced, retried,
never twice). Its ts, the new thread's id, is known only once Slack has taken it, so the
thread is bound then (ChatAdapter.thread_spawned): the child session's own posts are made
after that, and in that channel's lane they leave after the top-level message anyway.

The owner's direct messages are opened with conversations.open before the call is recorded
(tools/services/spawns.py decides when): a network call, so never inside that transaction.
"""

import re

from django.db import transaction
from django.utils import timezone
from slack_sdk.errors import SlackApiError, SlackRequestError

from calvin.chat.base import ChatPermanentError, NewThread
from calvin.chat.models import SlackInstallation, SlackLane, SlackPost
from calvin.chat.slack.outbox import slack_post_enqueue
from calvin.chat.slack.text import mentions_neutralised
from sessions.models import Thread

Kind, Status = SlackPost.Kind, SlackPost.Status
# What conversations.open may answer: a DM (D…), or a channel id Slack uses for one (C…, G…).
CONVERSATION_RE = re.compile(r"[CDG][A-Z0-9]{2,31}")
WITHDRAWN = "withdrawn: Slack had not taken it while spawn_thread waited"


def _team_id(workspace_id: int) -> str:
    team_id = SlackInstallation.objects.filter(workspace_id=workspace_id).values_list("team_id", flat=True).first()
    if not team_id:
        raise ChatPermanentError("Calvin is not installed in this workspace's Slack")
    return team_id


def direct_channel_open(*, workspace_id: int, member) -> str:
    """The id of the DM between Calvin's bot and `member` in the workspace's Slack team
    (conversations.open, which answers the same DM every time)."""
    from calvin.chat.slack.installations import bot_for_team
    from calvin.chat.slack.web_api import slack_client, slack_error

    if member is None or member.workspace_id != workspace_id:
        raise ChatPermanentError("the session has no owner in this workspace")
    user = member.slack_user_id
    if not user:
        raise ChatPermanentError(f"the session's owner ({member}) has no Slack user id")
    bot = bot_for_team(_team_id(workspace_id))
    if bot is None or bot.workspace_id != workspace_id:
        raise ChatPermanentError("Calvin is not installed in this workspace's Slack")
    try:
        answer = slack_client(bot.token).conversations_open(users=user)
    except (SlackApiError, SlackRequestError, OSError, TimeoutError) as exc:
        raise slack_error(exc, doing="opening the owner's direct messages") from None
    channel = (answer.get("channel") or {}).get("id") if isinstance(answer.get("channel"), dict) else None
    if not isinstance(channel, str) or not CONVERSATION_RE.fullmatch(channel):
        raise ChatPermanentError("Slack opened no direct messages with the owner")
    return channel


def spawn_post(*, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> None:
    """Queue the top-level message in the caller's transaction, its mentions made inert, in
    `channel_id` (the owner's DM) or the parent's channel. (The text passed the secrets check
    when the call was recorded; it fits one message: a task of 150 characters and a brief's
    link of about 1,000.)"""
    slack_post_enqueue(
        team_id=_team_id(parent_thread.workspace_id),
        channel_id=channel_id or parent_thread.channel_id,
        kind=Kind.MESSAGE,
        payload={"text": mentions_neutralised(text)},
        thread_ts="",  # top level: the message starts the thread
        tool_call=tool_call_id,
    )


def _permalink(team_id: str, channel: str, ts: str) -> str:
    from calvin.chat.slack.installations import bot_for_team
    from calvin.chat.slack.web_api import slack_client

    try:
        bot = bot_for_team(team_id)
        if bot is not None:
            return slack_client(bot.token).chat_getPermalink(channel=channel, message_ts=ts)["permalink"]
    except Exception:
        pass  # the link's plain form, which Slack redirects to the team's own address
    return f"https://slack.com/archives/{channel}/p{ts.replace('.', '')}"


def _withdraw(post: SlackPost) -> bool:
    """Take a post that has not left back out of its lane: only while no drainer holds the lane
    (one may be sending it), with the lane's row locked so none takes it meanwhile."""
    now = timezone.now()
    with transaction.atomic():
        lease = SlackLane.objects.select_for_update().filter(id=post.lane_id).values_list("lease_until", flat=True)
        held = lease.first()
        if held is not None and held >= now:
            return False
        return (
            SlackPost.objects.filter(id=post.id, status=Status.QUEUED).update(status=Status.FAILED, error=WITHDRAWN)
            == 1
        )


def spawn_thread_made(*, parent_thread, tool_call_id: int, withdraw: bool = False) -> NewThread | None:
    post = (
        SlackPost.objects.filter(tool_call_id=tool_call_id, kind=Kind.MESSAGE, thread_ts="")
        .select_related("lane")
        .order_by("id")
        .first()
    )
    if post is None:
        raise ChatPermanentError("its top-level message is not in the Slack outbox")
    if withdraw and post.status == Status.QUEUED:
        if _withdraw(post):
            raise ChatPermanentError(f"its top-level message was {WITHDRAWN}; nothing was posted, spawn again")
        post.refresh_from_db(fields=["status", "slack_ts", "error"])
    if post.status == Status.FAILED:
        raise ChatPermanentError(f"Slack did not take its top-level message: {post.error}")
    if post.status != Status.SENT:
        return None
    lane = post.lane
    return NewThread(
        channel_kind=Thread.ChannelKind.SLACK,
        channel_id=lane.channel_id,
        thread_ts=post.slack_ts,
        url=_permalink(lane.team_id, lane.channel_id, post.slack_ts),
    )
