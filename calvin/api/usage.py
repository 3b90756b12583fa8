"""The workspace's use: its quotas with what was used of them (the home's meters), and its days."""

from datetime import timedelta

from ninja import Query, Router
from pydantic import BaseModel, Field

from calvin.api.principal import Principal
from calvin.api.problems import Problem
from calvin.api.schemas import UsageOut
from calvin.dashboard.workspace_selectors import usage_meters
from calvin.workspaces.models import DailyUsage, Workspace
from calvin.workspaces.quotas import utc_today

router = Router(tags=["usage"])


class UsageQuery(BaseModel):
    days: int = Field(30, ge=1, le=366, description="How many UTC days back to list, today included.")


def _workspace_of(principal: Principal) -> Workspace:
    # The meters count the whole workspace: an agent limited to its own group does not read them.
    if principal.is_agent and not principal.whole_workspace:
        raise Problem(
            403, "the workspace's usage is for people and agents with cli_scope global", code="scope_too_narrow"
        )
    return Workspace.objects.get(id=principal.workspace_id)


@router.get("/usage", response=UsageOut, summary="The workspace's quotas, what was used of them, and its days")
def usage_get(request, query: Query[UsageQuery]):
    workspace = _workspace_of(request.auth)
    today = utc_today()
    days = DailyUsage.objects.filter(workspace=workspace, day__gt=today - timedelta(days=query.days)).order_by("-day")
    return {
        "meters": usage_meters(workspace),
        "days": days.values("day", "tool_calls", "turns", "agent_seconds", "cost_usd"),
    }
