"""What sessions do when the layers below them change (subscribed from AgentSessionsConfig.ready()).

A workspace's definition changed: its live sessions get the new AGENTS.md. However a
repository is saved or deleted (the admin, an import, the ORM), the push runs once per
workspace after the transaction commits. Best effort: a host that is not connected gets the
current text with its session's next turn anyway.
"""

import logging
import time
from collections import defaultdict
from pathlib import Path

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from calvin.events import AgentChanged, on_commit_once, records
from calvin.workspaces.definitions import agents_md_text
from calvin.workspaces.models import Repository
from sessions import host_link
from sessions.instructions import agents_md_write_local
from sessions.models import Session
from sessions.scheduling import hosts_wake_on_commit

log = logging.getLogger(__name__)


@receiver(post_save, sender=Repository, dispatch_uid="repository_saved_agents_md")
@receiver(post_delete, sender=Repository, dispatch_uid="repository_deleted_agents_md")
def _repository_changed(sender, instance, **kwargs):
    agents_md_push_on_commit(workspace_id=instance.workspace_id)


def agents_md_push_on_commit(*, workspace_id: int) -> None:
    """One push per workspace per transaction, however many rows it changed (an import of 500)."""

    def push():
        try:
            agents_md_push(workspace_id=workspace_id)
        except Exception:  # the change is committed; a failed push must not fail the request
            log.exception("AGENTS.md of workspace %s could not be pushed to its sessions", workspace_id)

    on_commit_once(("agents_md", workspace_id), push)


def agents_md_push(*, workspace_id: int) -> None:
    from sessions.services import LIVE_STATUSES

    at = time.time()  # before the read: a host keeps the newest of a push and a turn's copy
    text = agents_md_text(workspace_id)
    by_host = defaultdict(list)
    live = Session.objects.filter(workspace_id=workspace_id, status__in=LIVE_STATUSES)
    for session_id, host_id, directory in live.values_list("id", "host_id", "directory"):
        if host_id is not None:
            by_host[host_id].append(session_id)
        elif directory:  # its directory is on the gateway (an issue_token runner's session)
            agents_md_write_local(Path(directory), text)
    for host_id, session_ids in by_host.items():
        host_link.host_send(host_id, {"type": "session.agents_md", "sessions": session_ids, "text": text, "at": at})


@records(AgentChanged)
def agent_resumed_told(event: AgentChanged) -> None:
    """A resumed agent's threads that were told it was paused are told it runs again (in the
    resume's transaction, as the notices are part of it), and the hosts look for its turns."""
    if event.change != "resumed":
        return
    from sessions.services import system_notice_post

    for thread_id in event.told_thread_ids:
        system_notice_post(thread_id=thread_id, text=f"Resumed by {event.by}: the waiting messages run now.")
    if event.turns_waiting:
        hosts_wake_on_commit()
