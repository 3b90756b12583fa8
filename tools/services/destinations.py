"""An agent's destination map: the names `to` may take, which are also its permission list."""

from dataclasses import dataclass

from calvin.workspaces.models import Agent, Destination
from tools.caller import Caller
from tools.errors import ToolRefused

OWN_THREAD = "thread"  # every session's own thread, whatever its agent's map holds


@dataclass(frozen=True)
class Resolved:
    name: str
    thread_id: int | None  # a chat destination: the thread (or a Slack channel's top level)
    agent: Agent | None  # an agent destination: its inbox


def destination_names(*, agent_id: int | None) -> list[str]:
    names = list(Destination.objects.filter(agent_id=agent_id).order_by("name").values_list("name", flat=True))
    return [OWN_THREAD, *names]


def destination_resolve(*, caller: Caller, to: str) -> Resolved:
    """The destination named `to` in the caller's agent's map, or a refusal listing the valid names."""
    if to == OWN_THREAD:
        return Resolved(name=to, thread_id=caller.thread_id, agent=None)
    row = (
        Destination.objects.filter(agent_id=caller.agent_id, name=to).select_related("target_agent").first()
        if caller.agent_id is not None
        else None
    )
    if row is None:
        valid = ", ".join(destination_names(agent_id=caller.agent_id))
        shown = to if len(to) <= 64 else to[:64] + "…"
        raise ToolRefused(f"unknown destination {shown!r}: `to` must be one of your destinations: {valid}")
    return Resolved(name=row.name, thread_id=row.thread_id, agent=row.target_agent)
