"""What hosts report about the turns they run, and Stop.

Every report names the turn (the first of its batch) and is applied only while that batch
is still running on the reporting host: a host that lost its turns (its heartbeat lapsed
and they ran elsewhere) changes nothing with a late report.
"""

import logging

from django.db import transaction
from django.utils import timezone

from calvin.events import SessionStopped, announce
from sessions.changes import activity, host_changed, session_changed, turns_changed
from sessions.models import Host, Runner, Session, Turn
from sessions.secrets_port import agent_text_redacted

log = logging.getLogger(__name__)

MAX_REPLY = 40_000
MAX_EVENT_TEXT = 4_000
EVENT_KINDS = ("text", "tool_use", "tool_result", "error")
FINISHED = {"done": Turn.Status.DONE, "failed": Turn.Status.FAILED, "stopped": Turn.Status.STOPPED}
STOP_MARKS = ("stopped by ", "stopped from ")  # what session_stop writes in a running turn's error


def stop_requested(error: str) -> bool:
    """Whether Stop was pressed for this running turn (only session_stop sets a running turn's error)."""
    return error.startswith(STOP_MARKS)


def _batch(*, host_id: int, turn_id: int):
    return Turn.objects.filter(batch_id=turn_id, host_id=host_id, status=Turn.Status.RUNNING)


def _session_of(*, host_id: int, turn_id: int) -> Session | None:
    turn = _batch(host_id=host_id, turn_id=turn_id).select_related("session").first()
    return turn.session if turn else None


def _redacted(session: Session, text: str) -> str:
    """What the agent says goes to people: never a secret value in the clear."""
    return agent_text_redacted(session, text)


@transaction.atomic
def turn_started(*, host_id: int, turn_id: int, directory: str, temp_directory: str) -> bool:
    """The agent's process started. The session's directories are where its host put them."""
    session = _session_of(host_id=host_id, turn_id=turn_id)
    if session is None:
        return False
    Session.objects.filter(id=session.id).update(
        directory=str(directory)[:500], temp_directory=str(temp_directory)[:500]
    )
    activity(session, kind="started", text="working")
    return True


@transaction.atomic
def turn_event(*, host_id: int, turn_id: int, event: dict) -> bool:
    """A streamed event of the provider: shown live on the thread's pages; errors are kept."""
    if isinstance(event, dict) and event.get("kind") == "usage":  # spend so far: sessions/usage.py
        from sessions.usage import turn_usage_report

        return turn_usage_report(host_id=host_id, turn_id=turn_id, raw=event.get("usage"))
    if not isinstance(event, dict) or event.get("kind") not in EVENT_KINDS:
        return False
    session = _session_of(host_id=host_id, turn_id=turn_id)
    if session is None:
        return False
    text = _redacted(session, event.get("text")[:MAX_EVENT_TEXT] if isinstance(event.get("text"), str) else "")
    name = event.get("name") if isinstance(event.get("name"), str) else ""
    activity(session, kind=event["kind"], text=text, name=name[:200])
    if event["kind"] == "error" and text:
        # What went wrong (a package build that failed, a conversation not found) stays in the
        # thread, not only on the pages watching it now.
        from sessions.services import system_notice_post

        system_notice_post(thread_id=session.thread_id, text=text)
    return True


@transaction.atomic
def turn_finish(
    *,
    host_id: int,
    turn_id: int,
    status: str,
    reply: str = "",
    error: str = "",
    agent_session_id: str = "",
    usage=None,
) -> bool:
    """The turn ended: its reply goes to the thread, an error or a stop is said there too."""
    turns = list(_batch(host_id=host_id, turn_id=turn_id).select_for_update().select_related("session"))
    if not turns or status not in FINISHED:
        return False
    session = turns[0].session
    now = timezone.now()
    stopped_by = next((t.error for t in turns if stop_requested(t.error)), "")
    Turn.objects.filter(id__in=[t.id for t in turns]).update(
        status=FINISHED[status], finished_at=now, error=(stopped_by or str(error))[:2000]
    )
    more = session.turns.filter(status=Turn.Status.QUEUED).exists()
    updates = {"status": Session.Status.QUEUED if more else Session.Status.IDLE}
    if isinstance(agent_session_id, str) and agent_session_id:
        updates["agent_session_id"] = agent_session_id[:100]
    Session.objects.filter(id=session.id).update(**updates)
    seconds = (now - min(t.started_at or now for t in turns)).total_seconds()
    from calvin.workspaces.quotas import quota_agent_seconds_add

    quota_agent_seconds_add(workspace_id=session.workspace_id, seconds=seconds)
    from sessions.usage import turn_usage_record

    turn_usage_record(turns=turns, raw=usage, seconds=seconds, host_id=host_id)  # checked there, never trusted
    from sessions.services import agent_reply_post, system_notice_post

    if isinstance(reply, str) and reply.strip():
        agent_reply_post(session=session, text=_redacted(session, reply[:MAX_REPLY]))
    if status == "stopped":
        system_notice_post(thread_id=session.thread_id, text=f"Stopped ({stopped_by or 'the turn was stopped'}).")
    elif status == "failed":
        system_notice_post(
            thread_id=session.thread_id,
            text=f"The agent failed: {_redacted(session, str(error)[:2000]) or 'no reason given'}",
        )
    turns_changed(session, [t.id for t in turns], FINISHED[status])
    session_changed(session, updates["status"])
    host_changed(host_id, "load")
    activity(session, kind="finished", text=status)
    return True


@transaction.atomic
def session_stop(*, session_id: int, member=None, via: str = "web") -> str:
    """Stop: the running turn's whole process tree ends on its host, queued messages are
    dropped from the queue (they stay in the thread). Returns what to tell the person."""
    session = Session.objects.select_for_update().get(id=session_id)
    announce(SessionStopped(workspace_id=session.workspace_id, thread_id=session.thread_id, session_id=session.id))
    who = f"stopped by {member}" if member else f"stopped from {via}"
    status_before = session.status
    now = timezone.now()
    queued = Turn.objects.filter(session=session, status=Turn.Status.QUEUED).update(
        status=Turn.Status.STOPPED, error=who, finished_at=now
    )
    # For the announcements only: the turns this UPDATE stopped (none other has this stamp).
    stopped = Turn.objects.filter(session=session, status=Turn.Status.STOPPED, finished_at=now, error=who)
    stopped_ids = list(stopped.values_list("id", flat=True)) if queued else []
    running = Turn.objects.filter(session=session, status=Turn.Status.RUNNING)
    batch = running.values_list("batch_id", "host_id").first()
    if batch is None:
        Session.objects.filter(id=session.id).update(status=Session.Status.IDLE)
        if status_before != Session.Status.IDLE:
            session_changed(session, Session.Status.IDLE)
        if queued:
            turns_changed(session, stopped_ids, Turn.Status.STOPPED)
            from sessions.services import system_notice_post

            _stop_audited(session, member=member, via=via, changes={"status": (status_before, "idle")}, queued=queued)
            system_notice_post(thread_id=session.thread_id, text=f"Stopped ({who}) before the agent started.")
            return "stopped before the agent started"
        return "the agent is not running"
    running.update(error=who)
    turns_changed(session, stopped_ids, Turn.Status.STOPPED)
    _stop_audited(session, member=member, via=via, changes={"status": (status_before, "stopping")}, queued=queued)
    turn_id, host_id = batch
    from sessions.hosts import host_is_live

    host = Host.objects.filter(id=host_id).first() if host_id else None
    if host is None or not host_is_live(host):
        _stop_unreached(session_id=session.id, who=who)
        return "stopped (its host could not be reached)"
    from sessions.host_link import host_send

    # Should it be gone by the time this is sent, its lapse ends the turn stopped (hosts._requeue).
    transaction.on_commit(lambda: host_send(host_id, {"type": "stop", "session": session.id, "turn": turn_id}))
    return "stopping"


# The channels an audit row names; session_stop's `via` may be a phrase for the thread ("the admin by ann").
AUDIT_CHANNELS = ("web", "slack", "admin", "calvin-command", "cli", "api", "system")


def _stop_audited(session: Session, *, member, via: str, changes: dict, queued: int) -> None:
    from calvin.audit.services import audit_record

    if queued:
        changes["queued_turns"] = (queued, 0)
    channel = via if via in AUDIT_CHANNELS else ("admin" if via.startswith("the admin") else None)
    audit_record(
        verb="session.stop", workspace=session.workspace_id, actor=member, target=session, changes=changes, via=channel
    )


@transaction.atomic
def _stop_unreached(*, session_id: int, who: str) -> None:
    """Stop with no host to tell: the turn ends now, and a host that comes back with it is
    told to stop it (its registration finds the turn is no longer its own)."""
    session_turns_end(
        session_id=session_id,
        status=Turn.Status.STOPPED,
        error=who,
        notice=f"Stopped ({who}). Its host could not be reached; the agent is not run again for this message.",
    )


@transaction.atomic
def session_turns_end(*, session_id: int, status: str, error: str, notice: str) -> bool:
    """End a session's running turn from the gateway's side, when its host cannot report the
    end (it is gone, or the turn outlived every bound): the thread is told, and the session
    leaves the host and its runner ends, so its next message starts afresh on any host."""
    turns = list(
        Turn.objects.select_for_update()
        .filter(session_id=session_id, status=Turn.Status.RUNNING)
        .select_related("session")
    )
    if not turns:
        return False
    session = turns[0].session
    now = timezone.now()
    Turn.objects.filter(id__in=[t.id for t in turns]).update(status=status, finished_at=now, error=error[:2000])
    more = session.turns.filter(status=Turn.Status.QUEUED).exists()
    Session.objects.filter(id=session_id).update(
        host=None, status=Session.Status.QUEUED if more else Session.Status.IDLE
    )
    Runner.objects.filter(session_id=session_id, revoked_at__isnull=True).update(revoked_at=now)
    turns_changed(session, [t.id for t in turns], status)
    session_changed(session, Session.Status.QUEUED if more else Session.Status.IDLE)
    host_changed(session.host_id, "load")
    seconds = (now - min(t.started_at or now for t in turns)).total_seconds()
    from calvin.workspaces.quotas import quota_agent_seconds_add

    quota_agent_seconds_add(workspace_id=session.workspace_id, seconds=seconds)
    from sessions.usage import turn_usage_record

    turn_usage_record(turns=turns, raw=None, seconds=seconds)  # its host reported no usage: minutes only
    from sessions.services import system_notice_post

    system_notice_post(thread_id=session.thread_id, text=notice)
    activity(session, kind="finished", text=status)
    if more:
        from sessions.scheduling import hosts_wake_on_commit

        hosts_wake_on_commit(session_id=session.id)
    return True
