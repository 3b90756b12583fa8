"""Hosts: their tokens, their connection to the gateway, and what happens when they go quiet.

A host daemon dials out to /ws/host/ (sessions/consumers.py) with a token made here. The
Host row records which connection speaks for it (the consumer's channel name), so any web
process can reach it through the channel layer (sessions/host_link.py).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from calvin.events import TurnChanged, announce
from sessions.changes import host_changed, sessions_changed
from sessions.models import Host, Runner, Session, Turn
from sessions.tokens import HOST_PREFIX, token_digest, token_new

MAX_ATTEMPTS = 3  # a turn interrupted this many times (its host died each time) fails instead


@transaction.atomic
def host_create(*, name: str, workspace=None, actor=None) -> tuple[Host, str]:
    """A host and its token, which is shown once and stored only as a digest. `actor`: who made it."""
    from calvin.audit.services import audit_record

    token = token_new(HOST_PREFIX)
    host = Host.objects.create(name=name, workspace=workspace, token_digest=token_digest(token), token_hint=token[:10])
    changes = {"name": (None, name), "token_hint": (None, host.token_hint)}
    audit_record(verb="host.create", workspace=workspace, actor=actor, target=host, changes=changes)
    host_changed(host.id, "created", workspace_id=host.workspace_id)
    return host, token


@transaction.atomic
def host_token_reset(*, host: Host, actor=None) -> str:
    """A new token for the host; the old one stops working and its connection is closed.
    `actor`: who asked (a Member or a User), for the audit log."""
    from calvin.audit.services import audit_record

    token = token_new(HOST_PREFIX)
    old_channel = host.channel_name
    Host.objects.filter(id=host.id).update(
        token_digest=token_digest(token), token_hint=token[:10], revoked_at=None, channel_name=""
    )
    # The hints only: never the token (audit_record refuses a "token" field anyway).
    audit_record(
        verb="host.token_reset",
        workspace=host.workspace_id,
        actor=actor,
        target=host,
        changes={"token_hint": (host.token_hint, token[:10])},
    )
    host_changed(host.id, "token_reset", workspace_id=host.workspace_id)
    if old_channel:
        _close_on_commit(old_channel, "the host's token was replaced")
    return token


def host_for_token(token: str) -> Host | None:
    if not token.startswith(HOST_PREFIX):
        return None
    return Host.objects.filter(token_digest=token_digest(token), revoked_at__isnull=True).first()


@transaction.atomic
def host_revoke(*, host_id: int, actor=None) -> bool:
    """Revoke the token and disconnect the host now; its turns go back to the queue.
    `actor`: who asked (a Member or a User), for the audit log."""
    from calvin.audit.services import audit_record

    host = Host.objects.select_for_update().filter(id=host_id, revoked_at__isnull=True).first()
    if host is None:
        return False
    channel = host.channel_name
    now = timezone.now()
    Host.objects.filter(id=host_id).update(revoked_at=now, channel_name="", last_heartbeat_at=None)
    audit_record(
        verb="host.token_revoke",
        workspace=host.workspace_id,
        actor=actor,
        target=host,
        changes={"revoked_at": (None, now.isoformat())},
    )
    host_changed(host_id, "revoked", workspace_id=host.workspace_id)
    host_turns_requeue(host_id=host_id, reason="its host was revoked")
    # The tokens it holds for idle sessions too: a revoked host is not trusted with any.
    Runner.objects.filter(host_id=host_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if channel:
        _close_on_commit(channel, "the host's token was revoked")
    return True


def _close_on_commit(channel: str, reason: str) -> None:
    from sessions.host_link import host_channel_send

    transaction.on_commit(lambda: host_channel_send(channel, {"type": "host.close", "reason": reason}))


def host_runners(host: Host):
    """The runners this host may end: those it started, of sessions it may run."""
    runners = Runner.objects.filter(host_id=host.id)
    return runners.filter(session__workspace_id=host.workspace_id) if host.workspace_id else runners


@dataclass(frozen=True)
class Registration:
    stale_turns: list[int]  # turns the host still runs that are no longer its own: it stops them
    replaced_channel: str  # an older connection of the same host, to be closed


@transaction.atomic
def host_register(
    *, host_id: int, channel_name: str, capacity: int, version: str, sandbox: str, running: list[int], runners: list
) -> Registration:
    """The daemon said who it is. `running`: the turns it still runs; `runners`: the
    (session, generation) pairs whose tokens it still holds (none after a restart)."""
    host = Host.objects.select_for_update().get(id=host_id)
    replaced = host.channel_name if host.channel_name != channel_name else ""
    now = timezone.now()
    Host.objects.filter(id=host_id).update(
        channel_name=channel_name,
        capacity=max(0, min(int(capacity), 1000)),
        version=str(version)[:40],
        sandbox=str(sandbox)[:20],
        connected_at=now,
        last_heartbeat_at=now,
    )
    host_changed(host_id, "connected", workspace_id=host.workspace_id)
    still_ours = set(
        Turn.objects.filter(host_id=host_id, status=Turn.Status.RUNNING).values_list("batch_id", flat=True)
    )
    stale = [turn for turn in running if turn not in still_ours]
    # A runner whose token the host no longer holds (it restarted) cannot serve its session
    # again: the next turn starts a new generation there. Only runners this host row started,
    # of its own workspace's sessions: never issued ones, nor another host's of the same name.
    held = {(int(s), int(g)) for s, g in runners}
    stale_runners = [
        runner.id
        for runner in host_runners(host).filter(revoked_at__isnull=True).only("id", "session_id", "generation")
        if (runner.session_id, runner.generation) not in held
    ]
    Runner.objects.filter(id__in=stale_runners).update(revoked_at=now)
    # Turns it was running but no longer reports (it restarted mid-turn) run again.
    lost = Turn.objects.filter(host_id=host_id, status=Turn.Status.RUNNING).exclude(batch_id__in=running)
    _requeue(lost, reason="its host restarted")
    return Registration(stale_turns=stale, replaced_channel=replaced)


def host_heartbeat(*, host_id: int, channel_name: str) -> bool:
    """False when this connection no longer speaks for the host (revoked, or replaced)."""
    return (
        Host.objects.filter(id=host_id, channel_name=channel_name, revoked_at__isnull=True).update(
            last_heartbeat_at=timezone.now()
        )
        == 1
    )


def host_lapsed(*, host_id: int) -> bool:
    """The sweep cleared this host's connection (its heartbeat lapsed), and nothing else did: it is
    neither revoked nor taken over by a newer connection, so it may register again."""
    return Host.objects.filter(id=host_id, revoked_at__isnull=True, channel_name="").exists()


def host_disconnected(*, host_id: int, channel_name: str) -> None:
    """The connection closed. Its turns stay its own until the heartbeat lapses: a host that
    reconnects within the lapse carries on with them."""
    if Host.objects.filter(id=host_id, channel_name=channel_name).update(channel_name=""):
        host_changed(host_id, "disconnected")


def _requeue(turns, *, reason: str, skip_locked: bool = False) -> list[int]:
    """Running turns back to the queue; their sessions leave the host and their runners end,
    so the next host starts a new runner generation. A turn someone stopped is not run again:
    it ends stopped, and the thread is told."""
    from sessions.turns import session_turns_end, stop_requested

    locked = turns.select_for_update(skip_locked=skip_locked, of=("self",))
    rows = list(locked.values_list("id", "session_id", "attempts", "session__thread_id", "error"))
    stopped = {row[1]: row[4] for row in rows if stop_requested(row[4])}
    for session_id, who in stopped.items():
        session_turns_end(
            session_id=session_id,
            status=Turn.Status.STOPPED,
            error=who,
            notice=f"Stopped ({who}). Its host could not be told ({reason}); the agent is not run again for this.",
        )
    rows = [row for row in rows if row[1] not in stopped]
    if not rows:
        return []
    ids = [row[0] for row in rows]
    sessions = {row[1] for row in rows}
    # A turn whose hosts keep dying under it (it may be what kills them) is not tried forever.
    given_up = [row for row in rows if row[2] >= MAX_ATTEMPTS]
    Turn.objects.filter(id__in=[row[0] for row in given_up]).update(
        status=Turn.Status.FAILED,
        error=f"{reason}; not tried again after {MAX_ATTEMPTS} attempts",
        finished_at=timezone.now(),
    )
    from sessions.services import system_notice_post

    for thread_id in {row[3] for row in given_up}:
        system_notice_post(
            thread_id=thread_id,
            text=f"The agent's turn was interrupted {MAX_ATTEMPTS} times ({reason}); it is not tried again."
            " Send a message to try once more.",
        )
    Turn.objects.filter(id__in=ids).exclude(id__in=[row[0] for row in given_up]).update(
        status=Turn.Status.QUEUED, host=None, runner=None, batch=None, started_at=None, error=reason
    )
    from sessions.scheduling import host_wait_text, turn_host_wait_tell

    for session_id, thread_id in {(row[1], row[3]) for row in rows if row not in given_up}:
        first = Turn.objects.filter(session_id=session_id, status=Turn.Status.QUEUED).order_by("id").first()
        turn_host_wait_tell(turn_id=first.id, thread_id=thread_id, text=host_wait_text(reason))
    waiting = set(
        Turn.objects.filter(session_id__in=sessions, status=Turn.Status.QUEUED).values_list("session_id", flat=True)
    )
    Session.objects.filter(id__in=waiting).update(host=None, status=Session.Status.QUEUED)
    Session.objects.filter(id__in=sessions - waiting).update(host=None, status=Session.Status.IDLE)
    _requeue_announced(rows, given_up)
    sessions_changed(waiting, Session.Status.QUEUED)
    sessions_changed(sessions - waiting, Session.Status.IDLE)
    Runner.objects.filter(session_id__in=sessions, revoked_at__isnull=True).update(revoked_at=timezone.now())
    from sessions.scheduling import hosts_wake_on_commit

    hosts_wake_on_commit()
    return sorted(sessions)


def _requeue_announced(rows: list, given_up: list) -> None:
    failed = {row[0] for row in given_up}
    threads = dict(Session.objects.filter(id__in={row[1] for row in rows}).values_list("id", "workspace_id"))
    for turn_id, session_id, _attempts, thread_id, _error in rows:
        status = Turn.Status.FAILED if turn_id in failed else Turn.Status.QUEUED
        announce(
            TurnChanged(
                workspace_id=threads[session_id],
                thread_id=thread_id,
                session_id=session_id,
                turn_id=turn_id,
                status=status,
            )
        )


def host_turns_requeue(*, host_id: int, reason: str) -> list[int]:
    return _requeue(Turn.objects.filter(host_id=host_id, status=Turn.Status.RUNNING), reason=reason)


def hosts_lapsed(*, now: datetime | None = None):
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS)
    return Host.objects.filter(last_heartbeat_at__lt=cutoff)


@transaction.atomic
def hosts_sweep(*, now: datetime | None = None) -> list[int]:
    """Hosts whose heartbeat lapsed lose their turns (they run elsewhere) and their
    connection slot; so do turns whose host row is gone; turns that outlived every bound
    end. Returns the sessions queued again."""
    requeued = []
    for host in hosts_lapsed(now=now).select_for_update(skip_locked=True):
        Host.objects.filter(id=host.id).update(channel_name="", last_heartbeat_at=None)
        host_changed(host.id, "lapsed", workspace_id=host.workspace_id)
        requeued += host_turns_requeue(host_id=host.id, reason=f"its host {host.name} stopped answering")
    orphaned = Turn.objects.filter(status=Turn.Status.RUNNING, host__isnull=True)
    requeued += _requeue(orphaned, reason="its host was deleted", skip_locked=True)
    turns_overdue_end(now=now)
    from sessions.scheduling import turns_without_host_tell

    turns_without_host_tell(now=now)
    return requeued


def turns_overdue(*, now: datetime | None = None):
    """Running turns older than any turn may run (its host stops it at the turn timeout),
    with a grace for the host's own report to arrive."""
    bound = settings.CALVIN_TURN_TIMEOUT_SECONDS + settings.CALVIN_TURN_GRACE_SECONDS
    return Turn.objects.filter(
        status=Turn.Status.RUNNING, started_at__lt=(now or timezone.now()) - timedelta(seconds=bound)
    )


def turns_overdue_end(*, now: datetime | None = None) -> list[int]:
    """A host that heartbeats but never ends a turn cannot hold its session running: the turn
    fails, the thread is told, and the host is told to stop it. Returns the sessions ended."""
    from sessions.host_link import host_send
    from sessions.turns import session_turns_end

    ended = []
    locked = turns_overdue(now=now).select_for_update(skip_locked=True, of=("self",))
    rows = locked.values_list("session_id", "host_id", "host__name")
    for session_id, host_id, host_name in {row[0]: row for row in rows}.values():
        seconds = settings.CALVIN_TURN_TIMEOUT_SECONDS
        text = f"its host {host_name} did not end it within the {seconds:g} s a turn may run"
        if session_turns_end(
            session_id=session_id,
            status=Turn.Status.FAILED,
            error=f"ended by the gateway: {text}",
            notice=f"The agent's turn was ended: {text}. Send a message to start it again.",
        ):
            ended.append(session_id)
            if host_id:
                message = {"type": "stop", "session": session_id, "reason": "the turn ran too long"}
                transaction.on_commit(lambda h=host_id, m=message: host_send(h, m))
    return ended


@transaction.atomic
def host_delete(*, host_id: int, actor=None) -> bool:
    """Delete a host: its connection closes and its running turns run elsewhere first (the
    rows would otherwise lose their host and stay running). `actor`: who deleted it."""
    from calvin.audit.services import audit_record

    host = Host.objects.select_for_update().filter(id=host_id).first()
    if host is None:
        return False
    audit_record(
        verb="host.delete", workspace=host.workspace_id, actor=actor, target=host, changes={"name": (host.name, None)}
    )
    host_turns_requeue(host_id=host_id, reason=f"its host {host.name} was deleted")
    host_changed(host_id, "deleted", workspace_id=host.workspace_id)
    # Before the row goes: its runners would lose their host and pass for issued ones.
    Runner.objects.filter(host_id=host_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if host.channel_name:
        _close_on_commit(host.channel_name, "the host was deleted")
    host.delete()
    return True


def host_is_live(host: Host, *, now: datetime | None = None) -> bool:
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS)
    return bool(
        host.channel_name and host.revoked_at is None and host.last_heartbeat_at and host.last_heartbeat_at >= cutoff
    )
