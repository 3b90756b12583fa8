"""Reads of agents' inbox files (tools/services/inbox_files.py): which host may fetch which file.
What a host's turn lists is read where the turn is made (sessions.turn_messages: sessions sits
below tools and reads its models, never its modules)."""

from sessions.hosts import host_for_token, host_is_live
from sessions.models import Host, Session
from tools.models import InboxFile

# The sessions a host holds: the scheduler sticks a session to its host while it lives.
HELD = (Session.Status.QUEUED, Session.Status.RUNNING, Session.Status.IDLE)


def inbox_file_for_host(*, token: str, file_id: int) -> tuple[Host, InboxFile] | None:
    """The file, for a live host (by its token) that holds a session of the file's agent now;
    None for anything else: another host's or a revoked token, another agent's or workspace's file."""
    host = host_for_token(token) if token else None
    if host is None or not host_is_live(host):
        return None
    files = InboxFile.objects.filter(id=file_id)
    if host.workspace_id is not None:
        files = files.filter(workspace_id=host.workspace_id)
    file = files.first()
    if file is None:
        return None
    holds = Session.objects.filter(
        workspace_id=file.workspace_id, agent_id=file.agent_id, host_id=host.id, status__in=HELD
    ).exists()
    return (host, file) if holds else None
