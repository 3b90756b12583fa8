"""Who calls the API: an agent (a runner's token, scoped by its agent's `cli_scope`) or a
person (an API token, acting as their membership of one workspace)."""

from dataclasses import dataclass

from calvin.api.tokens import PREFIX as PERSON_PREFIX
from calvin.api.tokens import api_token_live
from calvin.workspaces.models import Agent
from tools.caller import Caller, caller_for_token


@dataclass(frozen=True)
class Principal:
    workspace_id: int
    kind: str  # "agent" or "person"
    # An agent: its cli_scope ("group": its own agent and what hangs off it; "global": the whole
    # workspace). A person: "workspace" (what their role allows).
    scope: str
    agent_id: int | None = None
    session_id: int | None = None
    runner_id: int | None = None
    member_id: int | None = None
    role: str = ""
    token_id: int | None = None
    caller: Caller | None = None  # an agent's: what its tool calls are recorded with

    @property
    def key(self) -> str:
        """Whose Idempotency-Keys these are."""
        return f"runner:{self.runner_id}" if self.kind == "agent" else f"token:{self.token_id}"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def whole_workspace(self) -> bool:
        return self.kind == "person" or self.scope == Agent.CliScope.GLOBAL

    @property
    def is_admin(self) -> bool:
        return self.kind == "person" and self.role in ("owner", "admin")


class CliScopeDisabled(Exception):
    """A runner's token whose agent may not use the API at all."""


def principal_for_token(token: str) -> Principal | None:
    """None for an unknown, revoked or expired token; CliScopeDisabled for an agent whose
    cli_scope is `disabled`."""
    if token.startswith(PERSON_PREFIX):
        row = api_token_live(token)
        if row is None:
            return None
        member = row.member
        return Principal(
            workspace_id=member.workspace_id,
            kind="person",
            scope="workspace",
            member_id=member.id,
            role=member.role,
            token_id=row.id,
        )
    caller = caller_for_token(token)
    if caller is None:
        return None
    scope = Agent.objects.filter(id=caller.agent_id).values_list("cli_scope", flat=True).first()
    if scope is None:
        raise CliScopeDisabled("this runner's session has no agent: only an agent's runner may use ncl or the API")
    if scope == Agent.CliScope.DISABLED:
        raise CliScopeDisabled(
            "this agent's cli_scope is disabled: it may not use ncl or the API (an admin can change it on the agent)"
        )
    return Principal(
        workspace_id=caller.workspace_id,
        kind="agent",
        scope=scope,
        agent_id=caller.agent_id,
        session_id=caller.session_id,
        runner_id=caller.runner_id,
        caller=caller,
    )
