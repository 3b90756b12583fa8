"""State changes of threads, sessions and runners."""

import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from calvin.events import MessagePosted, RunnerStarted, SessionChanged, TurnChanged, announce
from sessions.instructions import session_instructions_write
from sessions.models import Host, Message, Runner, Session, Thread, Turn
from sessions.scheduling import hosts_wake_on_commit
from sessions.tokens import token_digest, token_new


def session_directory_for(session_id: int) -> str:
    return str(Path(settings.CALVIN_SESSIONS_DIR) / f"session-{session_id}")


def session_branch_for(session_id: int) -> str:
    return f"calvin/session-{session_id}"


def session_temp_directory_for(session_id: int) -> str:
    return str(Path(settings.CALVIN_SESSIONS_TMP_DIR) / f"session-{session_id}")


@transaction.atomic
def session_start(
    *,
    workspace,
    owner=None,
    title: str = "",
    prompt: str = "",
    channel_kind: str = Thread.ChannelKind.WEB,
    channel_id: str = "web",
    thread_ts: str | None = None,
    agent=None,
    permission_mode: str = Session.PermissionMode.DEFAULT,
    prompt_platform_ts: str = "",
) -> Session:
    """A new thread with its session, and the first turn when there is a prompt
    (`prompt_platform_ts`: the prompt is the platform's message with that id)."""
    from calvin.workspaces.services import agent_default_for

    agent = agent or agent_default_for(workspace)
    thread = Thread.objects.create(
        workspace=workspace,
        channel_kind=channel_kind,
        channel_id=channel_id,
        thread_ts=thread_ts or uuid.uuid4().hex,
        title=title[:200] or prompt[:80],
        started_by=owner,
    )
    session = Session.objects.create(
        workspace=workspace, thread=thread, owner=owner, agent=agent, permission_mode=permission_mode
    )
    session.directory = session_directory_for(session.id)
    session.temp_directory = session_temp_directory_for(session.id)
    # checkout_repo's checkouts are on this branch: the session's own, in every repository.
    session.branch = session_branch_for(session.id)
    session.save(update_fields=["directory", "temp_directory", "branch"])
    # The session's files are its agent's and the gateway's, no other user's.
    Path(session.directory).mkdir(mode=0o700, parents=True, exist_ok=True)
    # Private to the session: what one session leaves in its temp directory no other sees.
    Path(session.temp_directory).mkdir(mode=0o700, parents=True, exist_ok=True)
    session_instructions_write(session)
    announce(SessionChanged(workspace_id=workspace.id, thread_id=thread.id, session_id=session.id, status="queued"))
    if prompt:
        message_post_by_person(thread=thread, member=owner, text=prompt, platform_ts=prompt_platform_ts)
    return session


def _posted(message: Message, *, workspace_id: int, to_platform: bool) -> None:
    """`to_platform`: Calvin's own message, which a Slack thread's channel shows too (calvin.chat
    records it in its ordered outbox, in this transaction); a web thread's are only the rows."""
    announce(
        MessagePosted(
            workspace_id=workspace_id, thread_id=message.thread_id, message_id=message.id, to_platform=to_platform
        )
    )


def _queued(turn: Turn, session: Session) -> None:
    announce(
        TurnChanged(
            workspace_id=session.workspace_id,
            thread_id=session.thread_id,
            session_id=session.id,
            turn_id=turn.id,
            status=turn.status,
        )
    )


@transaction.atomic
def message_post_by_person(*, thread: Thread, member, text: str, platform_ts: str = "") -> Message:
    """A person's message becomes a queued turn; it is never dropped while the agent is busy.

    `platform_ts`: the message came from the thread's platform (a Slack message's ts). Without
    one it was written in Calvin (the thread page), and a Slack thread shows it too."""
    message = Message.objects.create(
        thread=thread,
        kind=Message.Kind.TEXT,
        author=Message.Author.PERSON,
        member=member,
        text=text,
        platform_ts=platform_ts,
    )
    turn = Turn.objects.create(session=thread.session, prompt=message)
    hosts_wake_on_commit(session_id=turn.session_id)
    _posted(message, workspace_id=thread.workspace_id, to_platform=not platform_ts)
    _queued(turn, thread.session)
    return message


@transaction.atomic
def inbox_post(*, session: Session, text: str, author: str = Message.Author.SYSTEM, member=None, sender_agent=None):
    """A message for the session's agent (a system notice, another agent's message, a
    person's choice on a card): stored in its thread and queued as a turn, never dropped."""
    message = Message.objects.create(
        thread_id=session.thread_id,
        kind=Message.Kind.SYSTEM if author == Message.Author.SYSTEM else Message.Kind.TEXT,
        author=author,
        member=member,
        sender_agent=sender_agent,
        text=text,
    )
    turn = Turn.objects.create(session=session, prompt=message)
    hosts_wake_on_commit(session_id=session.id)
    _posted(message, workspace_id=session.workspace_id, to_platform=author == Message.Author.SYSTEM)
    _queued(turn, session)
    return message


@transaction.atomic
def system_notice_post(*, thread_id: int, text: str) -> Message:
    """A notice for the people in the thread (a stop, a failure, a quota): not a turn for the agent."""
    message = Message.objects.create(
        thread_id=thread_id, kind=Message.Kind.SYSTEM, author=Message.Author.SYSTEM, text=text
    )
    workspace_id = Thread.objects.values_list("workspace_id", flat=True).get(id=thread_id)
    _posted(message, workspace_id=workspace_id, to_platform=True)
    return message


@transaction.atomic
def agent_reply_post(*, session: Session, text: str) -> Message:
    """The agent's reply at the end of a turn, in its thread."""
    message = Message.objects.create(
        thread_id=session.thread_id, kind=Message.Kind.TEXT, author=Message.Author.AGENT, text=text
    )
    _posted(message, workspace_id=session.workspace_id, to_platform=True)
    return message


LIVE_STATUSES = (Session.Status.QUEUED, Session.Status.RUNNING, Session.Status.IDLE)


@transaction.atomic
def agent_inbox_session(*, agent, owner_id: int | None = None) -> Session:
    """The session that takes messages for `agent`: its latest live one, or a new one in a
    new web thread (an agent with no session running still gets its messages)."""
    from calvin.workspaces.models import Agent

    Agent.objects.select_for_update().filter(id=agent.id).first()  # two senders make one session, not two
    live = Session.objects.filter(agent=agent, status__in=LIVE_STATUSES).order_by("-id").first()
    if live:
        return live
    from calvin.workspaces.models import Member

    owner = Member.objects.filter(id=owner_id).first() if owner_id else None
    return session_start(workspace=agent.workspace, owner=owner, agent=agent, title=f"{agent.name}'s inbox")


@transaction.atomic
def runner_start(*, session: Session, host: Host | None = None) -> tuple[Runner, str]:
    """A new runner generation for the session; earlier generations' tokens are revoked.
    `host`: the host starting it for a turn (only it may end it later); None for issue_token's.

    Returns the runner and its token, which is not stored and cannot be shown again.
    """
    if host is not None and host.workspace_id not in (None, session.workspace_id):
        raise ValueError(f"host {host.name} runs only its own workspace's sessions, not session {session.id}")
    Session.objects.select_for_update().filter(id=session.id).first()  # serialise generations
    latest = session.runners.aggregate(latest=Max("generation"))["latest"] or 0
    session.runners.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    token = token_new()
    runner = Runner.objects.create(
        session=session,
        host=host,
        generation=latest + 1,
        token_digest=token_digest(token),
        token_hint=token[:10],
    )
    # tools/reactions.py makes its per-runner counter rows here, in this transaction.
    announce(
        RunnerStarted(
            workspace_id=session.workspace_id,
            thread_id=session.thread_id,
            session_id=session.id,
            runner_id=runner.id,
            generation=runner.generation,
        )
    )
    return runner, token


@transaction.atomic
def runner_revoke(*, runner: Runner, actor=None) -> bool:
    """Revoke one runner generation's token (true only if this call did). `actor`: who asked."""
    from calvin.audit.services import audit_record

    now = timezone.now()
    if Runner.objects.filter(id=runner.id, revoked_at__isnull=True).update(revoked_at=now) != 1:
        return False
    workspace_id = Session.objects.values_list("workspace_id", flat=True).get(id=runner.session_id)
    audit_record(
        verb="runner.token_revoke",
        workspace=workspace_id,
        actor=actor,
        target=runner,
        changes={"revoked_at": (None, now.isoformat())},
    )
    return True
