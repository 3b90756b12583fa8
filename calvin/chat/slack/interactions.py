"""Slack interactivity and `/calvin` as services: a card button pressed in Slack, the slash
command's answers, and the permission mode change it can make.

Everything is scoped to the Calvin workspace the payload's Slack team is tied to: a payload
from another team finds none of this workspace's threads, sessions or members. The person
is the workspace member their Slack user id maps to (a plain member on first contact); what
they may do is decided by the same services the web channel uses.
"""

import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from calvin.chat.base import ChatPermanentError
from calvin.chat.links import thread_url
from calvin.chat.slack.installations import bot_for_team
from calvin.chat.slack.lookups import member_for_slack_user, slack_thread
from calvin.chat.slack.outbox import secrets_redacted
from calvin.dashboard.actions import ActionRefused, action_press
from sessions.models import Session, Thread, Turn

# A card's button as tools/card_spec/blockkit.py renders it: "<action>:<target_id>:<index>".
ACTION_ID_RE = re.compile(r"(?P<action>[a-z_]{1,40}):(?P<target>[0-9]{1,18}):(?P<index>[0-9]{1,4})")
LINK_ACTION_RE = re.compile(r"link-[0-9]{1,4}")
LIVE = (Session.Status.QUEUED, Session.Status.RUNNING, Session.Status.IDLE)
WHO_MAY_STEER = "Only the person who started this session or a workspace admin can do that."
OTHER_TEAM = "Only people of the Slack workspace Calvin is installed in can do that here."
MODES = {mode.lower(): mode for mode in Session.PermissionMode.values}

HELP = (
    "*/calvin* acts on this channel's latest live Calvin session:\n"
    "• `/calvin status`: its thread, state, permission mode and queue\n"
    "• `/calvin stop`: stop the running turn and drop queued messages (its owner or a workspace admin)\n"
    "• `/calvin mode <"
    + "|".join(Session.PermissionMode.values)
    + ">`: change its permission mode (its owner or a workspace admin)\n"
    "• `/calvin help`: this text"
)


@dataclass(frozen=True)
class Press:
    """One button press as the Slack payload gives it; ids only."""

    team_id: str
    user_id: str
    user_team_id: str
    channel_id: str
    thread_ts: str
    action: str
    target_id: int
    value: str


@dataclass(frozen=True)
class Outcome:
    done: bool
    text: str

    @property
    def ephemeral(self) -> str:
        return self.text if self.done else f"Nothing changed: {self.text}"


def parse_action_id(action_id: str) -> tuple[str, int, int] | None:
    matched = ACTION_ID_RE.fullmatch(action_id or "")
    if matched is None:
        return None
    return matched["action"], int(matched["target"]), int(matched["index"])


def press_from_payload(*, body: dict, action: dict, team_id: str) -> Press | None:
    """The press a block_actions payload describes, or None when it is not a card's button.

    The thread is the message's: a card posted as a reply carries its root in `thread_ts`;
    a card that is the root has none, and its own ts is the thread's."""
    parsed = parse_action_id(action.get("action_id", ""))
    if parsed is None:
        return None
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel_id = container.get("channel_id") or (body.get("channel") or {}).get("id") or ""
    thread_ts = container.get("thread_ts") or message.get("thread_ts") or container.get("message_ts") or ""
    if not channel_id or not thread_ts:
        return None  # a button outside a channel's message (in a modal, say): no thread to act in
    user = body.get("user") or {}
    return Press(
        team_id=team_id,
        user_id=user.get("id", ""),
        user_team_id=user.get("team_id", "") or team_id,
        channel_id=channel_id,
        thread_ts=thread_ts,
        action=parsed[0],
        target_id=parsed[1],
        value=str(action.get("value", "")),
    )


def workspace_id_for_team(team_id: str) -> int | None:
    bot = bot_for_team(team_id) if team_id else None
    return bot.workspace_id if bot else None


def slack_button_press(*, press: Press) -> Outcome:
    """Resolve the press to its thread and member and hand it to the card's handler
    (calvin/dashboard/actions.py); the outcome is what the presser is told."""
    if press.user_team_id != press.team_id:
        return Outcome(False, OTHER_TEAM)
    workspace_id = workspace_id_for_team(press.team_id)
    if workspace_id is None:
        return Outcome(False, "Calvin is not installed in this Slack workspace")
    thread = slack_thread(workspace_id=workspace_id, channel_id=press.channel_id, thread_ts=press.thread_ts)
    if thread is None:
        return Outcome(False, "this card belongs to no Calvin thread of this workspace")
    member = member_for_slack_user(workspace_id=workspace_id, slack_user_id=press.user_id)
    try:
        text = action_press(
            action=press.action,
            thread=thread,
            member=member,
            target_id=press.target_id,
            value=press.value,
            via="slack",
        )
    except ActionRefused as exc:
        return Outcome(False, str(exc))
    return Outcome(True, text)


# /calvin


def session_may_steer(*, member, session: Session) -> bool:
    """Stop it or change its mode: the session's owner, or an owner or admin of its workspace."""
    return session.may_be_decided_by(member)


def channel_session_latest(*, workspace_id: int, channel_id: str) -> Session | None:
    """The channel's most recently started session that is still live, in this workspace only."""
    return (
        Session.objects.filter(
            workspace_id=workspace_id,
            thread__channel_kind=Thread.ChannelKind.SLACK,
            thread__channel_id=channel_id,
            status__in=LIVE,
        )
        .select_related("thread", "owner__user", "agent")
        .order_by("-created_at", "-id")
        .first()
    )


def _which_thread(session: Session) -> str:
    thread = session.thread
    # Slack's escaping, and no "|" to end the link's label early.
    title = (thread.title or "untitled").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    title = title.replace("|", "/")
    started = timezone.localtime(thread.created_at).strftime("%Y-%m-%d %H:%M")
    owner = f"<@{session.owner.slack_user_id}>" if session.owner and session.owner.slack_user_id else session.owner
    return f"the thread <{thread_url(thread.id)}|{title}> (started {started} by {owner or 'someone'})"


def _status(session: Session) -> str:
    queued = Turn.objects.filter(session=session, status=Turn.Status.QUEUED).count()
    agent = session.agent.name if session.agent_id else "(no agent)"
    return (
        f"Calvin in {_which_thread(session)}: agent {agent}, {session.status}, permission mode"
        f" `{session.permission_mode}`, {queued} message{'s' if queued != 1 else ''} queued."
    )


@transaction.atomic
def session_permission_mode_set(*, session_id: int, member, mode: str) -> str:
    """Change the session's permission mode (a conditional update: setting the mode it has
    changes nothing) and tell the thread. Returns what to tell the person."""
    from sessions.services import system_notice_post

    session = Session.objects.select_related("thread").get(id=session_id)
    if not session_may_steer(member=member, session=session):
        raise ActionRefused(WHO_MAY_STEER)
    if mode not in Session.PermissionMode.values:
        raise ActionRefused(f"unknown permission mode {mode!r}; one of " + ", ".join(Session.PermissionMode.values))
    before = session.permission_mode
    changed = Session.objects.filter(id=session.id).exclude(permission_mode=mode).update(permission_mode=mode)
    if not changed:
        return f"The permission mode of {_which_thread(session)} already is `{mode}`."
    from calvin.audit.services import audit_record

    audit_record(
        verb="session.mode",
        workspace=session.workspace_id,
        actor=member,
        target=session,
        changes={"permission_mode": (before, mode)},
        via="calvin-command",
    )
    system_notice_post(
        thread_id=session.thread_id,
        text=f"Permission mode changed from {before} to {mode} by {member} (/calvin in Slack). Approvals follow it"
        " at once; the agent runs with it from its next turn.",
    )
    return f"Permission mode of {_which_thread(session)}: `{before}` → `{mode}`."


def slash_command_answer(*, team_id: str, channel_id: str, user_id: str, text: str, user_team_id: str = "") -> str:
    """What `/calvin <text>` answers (ephemerally) in `channel_id`. A person of another team
    (a channel shared with another organisation) is refused: they are no member here."""
    words = (text or "").split()
    sub = words[0].lower() if words else "help"
    if sub not in ("status", "stop", "mode"):
        return HELP if sub == "help" else f"Unknown subcommand `{words[0][:40]}`.\n{HELP}"
    if (user_team_id or team_id) != team_id:
        return f"Nothing changed: {OTHER_TEAM}"
    workspace_id = workspace_id_for_team(team_id)
    if workspace_id is None:
        return "Calvin is not installed in this Slack workspace."
    session = channel_session_latest(workspace_id=workspace_id, channel_id=channel_id)
    if session is None:
        return "There is no live Calvin session in this channel. Mention Calvin to start one."
    answer = _session_command(sub, words, session=session, workspace_id=workspace_id, user_id=user_id)
    # It names the thread by its title (the agent's words, maybe): a secret set since is redacted.
    try:
        return secrets_redacted(thread=session.thread, value=answer)
    except ChatPermanentError:
        return (
            f"Done, but Calvin cannot check its answer against this session's secrets now, so it is not shown ({sub})."
        )


def _session_command(sub: str, words: list[str], *, session: Session, workspace_id: int, user_id: str) -> str:
    if sub == "status":
        return _status(session)
    member = member_for_slack_user(workspace_id=workspace_id, slack_user_id=user_id)
    if sub == "stop":
        if not session_may_steer(member=member, session=session):
            return f"Nothing changed: {WHO_MAY_STEER} ({_which_thread(session)})"
        from sessions.turns import session_stop

        stopped = session_stop(session_id=session.id, member=member, via="calvin-command")
        return f"Stop, {_which_thread(session)}: {stopped}."
    if len(words) != 2:
        modes = ", ".join(f"`{m}`" for m in Session.PermissionMode.values)
        return f"Give one mode: {modes}. Now {_which_thread(session)} is in `{session.permission_mode}`."
    mode = MODES.get(words[1].lower(), words[1][:40])
    try:
        return session_permission_mode_set(session_id=session.id, member=member, mode=mode)
    except ActionRefused as exc:
        return f"Nothing changed: {exc}"
