"""Pausing an agent: its sessions take no new turns (queued ones wait, the thread is told once
by the scheduler), a running turn finishes; resuming lets the waiting turns run.

Kept apart from services.py (workspace_create and friends) so the rule and its notices are
read in one place with sessions/scheduling.py, which enforces it."""

from django.db import transaction
from django.utils import timezone

from calvin.audit.services import audit_record
from calvin.events import AgentChanged, announce
from calvin.operators import OperatorRefused, operator_check, operator_label, operator_user
from calvin.workspaces.models import Agent

PAUSED_MARK = "the agent is paused by "  # the waiting turn's error, as the scheduler writes it


def paused_text(who: str) -> str:
    return f"{PAUSED_MARK}{who}"


@transaction.atomic
def agent_pause(*, agent_id: int, actor) -> str:
    """Pause the agent; returns what to tell the operator. Raises OperatorRefused when it
    changes nothing (not theirs, already paused)."""
    from sessions.models import Session

    agent = Agent.objects.select_for_update(of=("self",)).select_related("paused_by").filter(id=agent_id).first()
    if agent is None:
        raise OperatorRefused(f"there is no agent {agent_id}")
    operator_check(actor, agent.workspace_id)
    if agent.paused_at is not None:
        who = agent.paused_by.get_username() if agent.paused_by else "someone"
        raise OperatorRefused(f"already paused by {who}")
    # A claim holds its session's row while it starts a turn: waiting for those here means a
    # claim either started its turn before the pause committed or sees the pause (it looks again).
    list(Session.objects.select_for_update().filter(agent_id=agent.id).values_list("id", flat=True))
    now = timezone.now()
    Agent.objects.filter(id=agent.id).update(paused_at=now, paused_by=operator_user(actor))
    audit_record(
        verb="agent.pause", workspace=agent.workspace_id, actor=actor, target=agent, changes={"paused": (False, True)}
    )
    announce(
        AgentChanged(workspace_id=agent.workspace_id, agent_id=agent.id, change="paused", by=operator_label(actor))
    )
    return "paused: its sessions take no new turns (a running one finishes); queued messages wait"


@transaction.atomic
def agent_resume(*, agent_id: int, actor) -> str:
    """Resume the agent: its waiting turns run, and threads told it was paused are told it runs again."""
    from sessions.models import Session, Turn

    agent = Agent.objects.select_for_update().filter(id=agent_id).first()
    if agent is None:
        raise OperatorRefused(f"there is no agent {agent_id}")
    operator_check(actor, agent.workspace_id)
    if not Agent.objects.filter(id=agent.id, paused_at__isnull=False).update(paused_at=None, paused_by=None):
        raise OperatorRefused("it is not paused")
    waiting = Turn.objects.filter(session__agent_id=agent.id, status=Turn.Status.QUEUED)
    told = list(
        Session.objects.filter(id__in=waiting.filter(error__startswith=PAUSED_MARK).values("session_id")).values_list(
            "thread_id", flat=True
        )
    )
    waiting.filter(error__startswith=PAUSED_MARK).update(error="")
    audit_record(
        verb="agent.resume", workspace=agent.workspace_id, actor=actor, target=agent, changes={"paused": (True, False)}
    )
    # sessions/reactions.py tells the threads (in this transaction) and wakes the hosts.
    announce(
        AgentChanged(
            workspace_id=agent.workspace_id,
            agent_id=agent.id,
            change="resumed",
            by=operator_label(actor),
            told_thread_ids=tuple(told),
            turns_waiting=waiting.exists(),
        )
    )
    return "resumed: its queued messages run now" if told else "resumed"
