"""Reads of the workspace's configuration: agents, their destinations, the members."""

from ninja import Query, Router

from calvin.api import scope
from calvin.api.pagination import PageQuery, page, page_of
from calvin.api.schemas import AgentOut, DestinationOut, MemberOut

router = Router(tags=["agents"])


def agent_shown(agent) -> dict:
    return {
        "id": agent.id,
        "name": agent.name,
        "cli_scope": agent.cli_scope,
        "model": agent.model,
        "provider": agent.provider,
        "tool_sets": list(agent.tool_sets or []),
        "apt_packages": list(agent.apt_packages or []),
        "npm_packages": list(agent.npm_packages or []),
        "mcp_servers": sorted(agent.mcp_servers or {}),  # names only: their env may name secrets
        "paused": agent.paused_at is not None,
        "created_at": agent.created_at,
    }


def destination_shown(destination) -> dict:
    return {
        "id": destination.id,
        "agent_id": destination.agent_id,
        "name": destination.name,
        "kind": "agent" if destination.target_agent_id else "thread",
        "thread_id": destination.thread_id,
        "target_agent_id": destination.target_agent_id,
    }


def member_shown(member) -> dict:
    return {"id": member.id, "name": str(member), "role": member.role, "created_at": member.created_at}


@router.get("/agents", response=page_of(AgentOut), summary="List agents")
def agents_list(request, query: Query[PageQuery]):
    return page(scope.agents_visible(request.auth), query, agent_shown)


@router.get("/agents/{agent_id}", response=AgentOut, summary="Get an agent")
def agents_get(request, agent_id: int):
    return agent_shown(scope.one(scope.agents_visible(request.auth), agent_id, "agent"))


@router.get("/agents/{agent_id}/destinations", response=page_of(DestinationOut), summary="List an agent's destinations")
def destinations_list(request, agent_id: int, query: Query[PageQuery]):
    agent = scope.one(scope.agents_visible(request.auth), agent_id, "agent")
    return page(scope.destinations_visible(request.auth).filter(agent=agent), query, destination_shown)


@router.get("/members", response=page_of(MemberOut), summary="List the workspace's members", tags=["members"])
def members_list(request, query: Query[PageQuery]):
    return page(scope.members_visible(request.auth).select_related("user"), query, member_shown)
