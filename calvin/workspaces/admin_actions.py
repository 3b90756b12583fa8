"""Pause and resume agents from the admin, after a confirmation page (calvin/workspaces/pauses.py)."""

from calvin.admin_actions import operator_action
from calvin.operators import operator_for
from calvin.workspaces.models import Agent
from calvin.workspaces.pauses import agent_pause, agent_resume


def _pause_plan(agent: Agent) -> str:
    if agent.paused_at:
        return "nothing: it is paused already"
    return "pause it: its sessions take no new turns (a running turn finishes); queued messages wait"


def _resume_plan(agent: Agent) -> str:
    if not agent.paused_at:
        return "nothing: it is not paused"
    return "resume it: its queued messages run"


pause_agents = operator_action(
    name="pause",
    description="Pause the selected agents",
    verb="Pause",
    plan=_pause_plan,
    perform=lambda request, agent: agent_pause(agent_id=agent.id, actor=operator_for(request.user, agent.workspace_id)),
)

resume_agents = operator_action(
    name="resume",
    description="Resume the selected agents",
    verb="Resume",
    plan=_resume_plan,
    perform=lambda request, agent: agent_resume(
        agent_id=agent.id, actor=operator_for(request.user, agent.workspace_id)
    ),
)
