"""Slack events after the ack: what a mention, a DM, a reply or an uninstall changes in Calvin.

The events listener records each delivery once by `event_id` (slack_event_record) and queues
one task; the task claims the row (received -> handled, exactly one row) and applies it here,
in the same transaction, so a worker that dies half-way leaves the row received for the
sweep. Every lookup is scoped to the workspace the event's team is installed into."""

import logging
import re
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from slack_sdk.errors import SlackApiError, SlackRequestError

from calvin.celery import queue_on_commit
from calvin.chat.base import ChatTemporaryError
from calvin.chat.models import SlackEvent, SlackPost, SlackThreadHistory
from calvin.chat.slack.history import slack_history_take_event
from calvin.chat.slack.installations import bot_for_team, installation_remove
from calvin.chat.slack.lookups import member_for_slack_user, slack_thread
from calvin.chat.slack.web_api import slack_client, slack_error
from calvin.workspaces.services import WorkspaceRefused, workspace_admin_now
from secrets_vault.redaction import redact_text
from sessions.models import Message, Session, Thread

log = logging.getLogger(__name__)

# The event types the listener records; any other subscribed event is acknowledged and dropped.
TAKEN_EVENTS = ("app_mention", "message", "app_uninstalled", "tokens_revoked")
# Message subtypes that are a person saying something new. The others (message_changed,
# message_deleted, channel_join, bot_message...) never reach an agent.
PERSON_SUBTYPES = {"", "file_share", "thread_broadcast", "me_message"}
UNINSTALLED = "Calvin was uninstalled from this Slack workspace"
RECEIVED_REACTION = "eyes"
PLATFORM_TS_UNIQUE = "message_unique_platform_ts"  # sessions/migrations/0006


def slack_event_record(*, event_id: str, team_id: str, event: dict, retry_num: int = 0) -> int | None:
    """Keep the delivery as one SlackEvent row and queue its task; a retry, a duplicate, or
    the same event reaching another web process at once finds the row and queues nothing.

    Returns the new row's id, None when the event was already recorded."""
    from calvin.chat.slack.inbound_tasks import handle_slack_event

    with transaction.atomic():
        try:
            # The unique event_id decides: a concurrent insert of the same id waits for the
            # first to commit, then fails here (PostgreSQL and SQLite alike).
            with transaction.atomic():
                row = SlackEvent.objects.create(
                    event_id=event_id,
                    team_id=team_id[:32],
                    event_type=str(event.get("type") or "")[:64],
                    payload=event,
                    retry_num=min(max(retry_num, 0), 32767),
                )
        except IntegrityError:
            # Keep how many times Slack tried (a retry after a slow ack, not a new event).
            SlackEvent.objects.filter(event_id=event_id, retry_num__lt=retry_num).update(retry_num=retry_num)
            return None
        queue_on_commit(handle_slack_event, row.id)
        return row.id


def slack_event_handle(*, slack_event_id: int) -> str | None:
    """Apply one recorded event, once: the row's final status, or None when another worker
    had claimed it (or it was handled already)."""
    with transaction.atomic():
        claimed = SlackEvent.objects.filter(id=slack_event_id, status=SlackEvent.Status.RECEIVED).update(
            status=SlackEvent.Status.HANDLED, handled_at=timezone.now()
        )
        if claimed != 1:
            return None
        row = SlackEvent.objects.get(id=slack_event_id)
        if row.event_type in ("app_uninstalled", "tokens_revoked"):
            status, note = _uninstall_take(row)
        elif row.event_type in ("app_mention", "message"):
            status, note = _message_take(row)
        else:
            status, note = SlackEvent.Status.IGNORED, f"{row.event_type} events are not taken"
        SlackEvent.objects.filter(id=row.id).update(status=status, note=note[:300])
        return status


def slack_event_fail(*, slack_event_id: int, error: Exception) -> bool:
    """The event could not be applied after the task's retries: say why on its row."""
    note = redact_text(f"{type(error).__name__}: {error}")[:300]
    return (
        SlackEvent.objects.filter(id=slack_event_id, status=SlackEvent.Status.RECEIVED).update(
            status=SlackEvent.Status.FAILED, note=note, handled_at=timezone.now()
        )
        == 1
    )


def slack_events_stuck(*, older_than: timedelta) -> list[int]:
    """Rows still received after `older_than`: their task was never published, or its worker died."""
    cutoff = timezone.now() - older_than
    return list(
        SlackEvent.objects.filter(status=SlackEvent.Status.RECEIVED, received_at__lt=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:500]
    )


def slack_events_prune(*, older_than: timedelta) -> int:
    """Forget events settled longer ago than `older_than` (de-duplication needs about an hour:
    Slack's retries); rows still received or failed are kept for the sweep and for people."""
    cutoff = timezone.now() - older_than
    settled = SlackEvent.objects.filter(
        status__in=[SlackEvent.Status.HANDLED, SlackEvent.Status.IGNORED], received_at__lt=cutoff
    )
    return settled.delete()[0]


# -- mentions, DMs and replies


def _not_a_person(event: dict, bot) -> str:
    """Why this message is not a person saying something new ("" when it is)."""
    subtype = event.get("subtype") or ""
    if event.get("bot_id") or subtype == "bot_message" or event.get("bot_profile"):
        return "from a bot"
    if event.get("user") and event.get("user") == bot.bot_user_id:
        return "from Calvin's own bot user"
    if subtype not in PERSON_SUBTYPES:
        return f"subtype {subtype} is not a new message"
    if not event.get("user"):
        return "no author"
    return ""


def _from_another_team(event: dict, team_id: str) -> str:
    """Why the author is not a person of the installation's team ("" when they are): in a
    channel shared with another organisation (Slack Connect) their messages reach Calvin too,
    but only the team Calvin is installed in has members of its workspace."""
    author_team = event.get("user_team") or event.get("source_team") or team_id
    if author_team != team_id:
        return f"from a person of another Slack team ({author_team[:32]}): only {team_id}'s people start or join"
    return ""


def prompt_text(text: str, bot_user_id: str) -> str:
    """The message's text without the mentions of Calvin's bot (`<@U…>` or `<@U…|name>`)."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def _message_take(row: SlackEvent) -> tuple[str, str]:
    bot = bot_for_team(row.team_id)
    if bot is None:
        return SlackEvent.Status.IGNORED, "Calvin is not installed in this Slack team"
    status, note = _message_for_session(row, bot)
    # Whatever it did for a session, the message (any author's, an edit, a deletion) goes into
    # the history of its thread if Calvin keeps that thread: read_thread reads it from there.
    slack_history_take_event(workspace_id=bot.workspace_id, team_id=row.team_id, event=row.payload)
    return status, note


def _message_for_session(row: SlackEvent, bot) -> tuple[str, str]:
    event = row.payload
    refused = _not_a_person(event, bot) or _from_another_team(event, row.team_id)
    if refused:
        return SlackEvent.Status.IGNORED, refused
    channel, ts = event.get("channel") or "", event.get("ts") or ""
    if not channel or not ts:
        return SlackEvent.Status.IGNORED, "no channel or ts"
    root = event.get("thread_ts") or ts
    thread = slack_thread(workspace_id=bot.workspace_id, channel_id=channel, thread_ts=root)
    starts = row.event_type == "app_mention" or event.get("channel_type") == "im"
    if thread is None and not starts:
        return SlackEvent.Status.IGNORED, "a channel message outside Calvin's threads, without a mention"
    member = member_for_slack_user(workspace_id=bot.workspace_id, slack_user_id=event["user"])
    text = prompt_text(event.get("text") or "", bot.bot_user_id) or "(a message with no text)"
    if thread is None:
        session = _session_start(bot, member=member, channel=channel, root=root, ts=ts, text=text)
        if session is not None:
            _react_on_commit(row.team_id, channel, ts)
            return SlackEvent.Status.HANDLED, f"started session {session.id}"
        # Another event started this thread first (two mentions in one thread at once).
        thread = slack_thread(workspace_id=bot.workspace_id, channel_id=channel, thread_ts=root)
    message = _message_post(thread, member=member, text=text, ts=ts)
    if message is None:
        return SlackEvent.Status.IGNORED, f"already taken as a message of session {thread.session.id}"
    _react_on_commit(row.team_id, channel, ts)
    return SlackEvent.Status.HANDLED, f"queued for session {thread.session.id}"


def _session_start(bot, *, member, channel: str, root: str, ts: str, text: str) -> Session | None:
    """A session in the Slack thread rooted at `root`; None when that thread exists already."""
    from calvin.workspaces.models import Workspace
    from sessions.services import session_start

    workspace = Workspace.objects.get(id=bot.workspace_id)
    try:
        with transaction.atomic():
            session = session_start(
                workspace=workspace,
                owner=member,
                prompt=text,
                channel_kind=Thread.ChannelKind.SLACK,
                channel_id=channel,
                thread_ts=root,
                prompt_platform_ts=ts,
            )
            return session
    except IntegrityError as exc:
        if _constraint(exc) != "thread_unique_platform_ids":
            raise
        return None


def _message_post(thread: Thread, *, member, text: str, ts: str) -> Message | None:
    """The person's message in the thread's session inbox, once per Slack message: the
    app_mention and message events of one mention (or two workers) make one Message."""
    from sessions.services import message_post_by_person

    if Message.objects.filter(thread=thread, platform_ts=ts).exists():
        return None
    try:
        with transaction.atomic():
            message = message_post_by_person(thread=thread, member=member, text=text, platform_ts=ts)
    except IntegrityError as exc:  # the other event of the pair committed in between
        if _constraint(exc) != PLATFORM_TS_UNIQUE:
            raise
        return None
    return message


def _constraint(exc: IntegrityError) -> str:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", "") or ""


def _react_on_commit(team_id: str, channel: str, ts: str) -> None:
    from calvin.chat.slack.inbound_tasks import react_to_slack_message

    queue_on_commit(react_to_slack_message, team_id, channel, ts)


def slack_reaction_add(*, team_id: str, channel: str, ts: str, name: str = RECEIVED_REACTION) -> bool:
    """Tell the sender their message was taken. Slack's "already_reacted" is success; a
    permanent refusal is logged and dropped (the message is taken either way); a temporary
    one raises ChatTemporaryError for the task to retry."""
    bot = bot_for_team(team_id)
    if bot is None:
        return False
    try:
        slack_client(bot.token).reactions_add(channel=channel, timestamp=ts, name=name)
    except SlackApiError as exc:
        if (exc.response.data or {}).get("error") == "already_reacted":
            return True
        error = slack_error(exc, doing="reactions.add")
        if isinstance(error, ChatTemporaryError):
            raise error from None
        log.warning("no %s reaction on %s/%s: %s", name, channel, ts, error)
        return False
    except (SlackRequestError, OSError) as exc:
        raise slack_error(exc, doing="reactions.add") from None
    return True


# -- uninstall


def _uninstall_take(row: SlackEvent) -> tuple[str, str]:
    if row.event_type == "tokens_revoked" and not (row.payload.get("tokens") or {}).get("bot"):
        return SlackEvent.Status.IGNORED, "only user tokens were revoked; the bot token still works"
    outcome = slack_team_uninstall(team_id=row.team_id)
    if outcome is None:
        return SlackEvent.Status.IGNORED, "no installation for this team (already removed)"
    return SlackEvent.Status.HANDLED, outcome


@transaction.atomic
def slack_team_uninstall(*, team_id: str, actor=None, via: str | None = "slack") -> str | None:
    """Calvin was removed from the team (or its bot token revoked): forget the installation,
    stop the sessions of the workspace's Slack threads with a notice, fail the posts still
    waiting for Slack (nothing can deliver them), and forget the threads' kept history. None when
    no installation was left. `actor` and `via`: who removed it and from where, for the audit log
    (Slack's own event: the system, "slack")."""
    from sessions.services import LIVE_STATUSES, system_notice_post
    from sessions.turns import session_stop

    workspace_id = installation_remove(team_id=team_id, actor=actor, via=via)
    if workspace_id is None:
        return None
    live = Session.objects.filter(
        workspace_id=workspace_id, thread__channel_kind=Thread.ChannelKind.SLACK, status__in=LIVE_STATUSES
    ).order_by("id")
    stopped = 0
    for session_id, thread_id in live.values_list("id", "thread_id"):
        session_stop(session_id=session_id, via="the Slack uninstall")
        system_notice_post(thread_id=thread_id, text=f"{UNINSTALLED}: this session was stopped.")
        stopped += 1
    failed = SlackPost.objects.filter(
        lane__team_id=team_id, status__in=[SlackPost.Status.QUEUED, SlackPost.Status.SENDING]
    ).update(status=SlackPost.Status.FAILED, error=UNINSTALLED)
    # No events come while the app is out: a history kept on would claim a thread whole that is not.
    SlackThreadHistory.objects.filter(workspace_id=workspace_id, team_id=team_id).delete()
    log.info("Slack team %s uninstalled: %d sessions stopped, %d posts failed", team_id, stopped, failed)
    return f"installation removed; {stopped} sessions stopped; {failed} waiting posts failed"


@transaction.atomic
def workspace_slack_uninstall(*, member, team_id: str) -> str:
    """Forget the workspace's Slack installation of `team_id` (the one the page showed); returns its team's name.

    As when Slack says the app was uninstalled: Calvin's copy of the bot token goes, the running
    sessions of Slack threads stop with a notice, posts waiting for Slack fail. The app stays
    listed in Slack until removed there."""
    from calvin.chat.models import SlackInstallation

    member = workspace_admin_now(member)
    installation = SlackInstallation.objects.select_for_update().filter(workspace_id=member.workspace_id).first()
    if installation is None or installation.team_id != team_id:
        raise WorkspaceRefused("this workspace is not connected to that Slack team (any more): nothing changed")
    if installation.from_environment:
        raise WorkspaceRefused(
            "this connection comes from the gateway's SLACK_BOT_TOKEN: it is made again while that is set;"
            " remove SLACK_BOT_TOKEN from the gateway's settings to disconnect"
        )
    team = installation.team_name or installation.team_id
    # installation_remove records slack.uninstall, once, whoever removes it.
    slack_team_uninstall(team_id=installation.team_id, actor=member, via=None)
    return team
