"""The announcements of sessions' state changes (calvin/events.py), in one place for turns,
scheduling and hosts: each is called inside the transaction that made the change."""

from calvin.events import AgentActivity, HostChanged, SessionChanged, TurnChanged, announce
from sessions.models import Host, Session


def session_changed(session: Session, status: str) -> None:
    announce(
        SessionChanged(
            workspace_id=session.workspace_id, thread_id=session.thread_id, session_id=session.id, status=status
        )
    )


def turns_changed(session: Session, turn_ids, status: str) -> None:
    for turn_id in turn_ids:
        announce(
            TurnChanged(
                workspace_id=session.workspace_id,
                thread_id=session.thread_id,
                session_id=session.id,
                turn_id=turn_id,
                status=status,
            )
        )


def sessions_changed(session_ids, status: str) -> None:
    """For changes made to many sessions by one UPDATE (a host's turns re-queued)."""
    for session in Session.objects.filter(id__in=list(session_ids)).only("id", "workspace_id", "thread_id"):
        session_changed(session, status)


def activity(session: Session, *, kind: str, text: str = "", name: str = "") -> None:
    """What the agent does now, for the pages watching its thread (not stored)."""
    announce(
        AgentActivity(
            workspace_id=session.workspace_id,
            thread_id=session.thread_id,
            session_id=session.id,
            kind=kind,
            text=text,
            name=name,
        )
    )


def host_changed(host_id: int | None, state: str, workspace_id: int | None = None) -> None:
    """A host connected, went, was revoked, or its load changed (`workspace_id` read when not given)."""
    if not host_id:
        return
    if workspace_id is None:
        workspace_id = Host.objects.filter(id=host_id).values_list("workspace_id", flat=True).first()
    announce(HostChanged(workspace_id=workspace_id or 0, host_id=host_id, state=state))
