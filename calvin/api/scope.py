"""What a principal may read: every API query starts from one of these (selectors).

A person sees their workspace; an agent with cli_scope `global` the whole workspace; one with
`group` its own agent and what hangs off it (its destinations, its sessions, their approvals
and tool calls). Nothing here ever reaches another workspace."""

from approvals.models import PendingApproval
from calvin.api.principal import Principal
from calvin.api.problems import Problem
from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Agent, Destination, Member
from sessions.models import Message, Session
from tools.models import ToolCall


def agents_visible(principal: Principal):
    agents = Agent.objects.filter(workspace_id=principal.workspace_id)
    return agents if principal.whole_workspace else agents.filter(id=principal.agent_id)


def destinations_visible(principal: Principal):
    return Destination.objects.filter(agent__in=agents_visible(principal))


def members_visible(principal: Principal):
    return Member.objects.filter(workspace_id=principal.workspace_id)


def sessions_visible(principal: Principal):
    sessions = Session.objects.filter(workspace_id=principal.workspace_id)
    return sessions if principal.whole_workspace else sessions.filter(agent_id=principal.agent_id)


def messages_visible(principal: Principal, session: Session):
    return Message.transcript().filter(thread_id=session.thread_id)


def approvals_visible(principal: Principal):
    return PendingApproval.objects.filter(session__in=sessions_visible(principal))


def tool_calls_visible(principal: Principal):
    return ToolCall.objects.filter(session__in=sessions_visible(principal))


def audit_events_visible(principal: Principal):
    """The audit log: a workspace's owners and admins, and agents with cli_scope global."""
    if not (principal.is_admin or (principal.is_agent and principal.whole_workspace)):
        raise Problem(403, "the audit log is for the workspace's owners and admins", code="admins_only")
    return AuditEvent.objects.filter(workspace_id=principal.workspace_id)


def one(queryset, object_id: int, what: str):
    """The row of that id among those visible, else 404 (another workspace's id included:
    the answer never tells whether it exists elsewhere)."""
    row = queryset.filter(id=object_id).first()
    if row is None:
        raise Problem(404, f"there is no {what} {object_id} that you can see", code="not_found")
    return row
