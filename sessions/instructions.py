"""The instructions file a session's agent reads (CLAUDE.md in its session directory).

Composed when the session starts from the agent's standing instructions (set by people in
the admin, or staged by create_agent's `instructions`) and what its tool sets need it to
know: the destinations it may send to. The agent may change its copy; the standing
instructions stay on the Agent for its next sessions.
"""

from pathlib import Path

INSTRUCTIONS_FILE = "CLAUDE.md"


def instructions_compose(*, agent, destination_names: list[str]) -> str:
    parts = []
    if agent.instructions.strip():
        parts.append(f"# Standing instructions\n\n{agent.instructions.strip()}\n")
    if "nanoclaw" in (agent.tool_sets or []):
        names = "\n".join(f"- `{name}`" for name in destination_names)
        parts.append(
            "# Destinations\n\n"
            "`send_message` and `send_file` (mcp__nanoclaw__) take `to`, one of these names; `thread` is this "
            f"session's own thread. Anything else is refused.\n\n{names}\n"
        )
    return "\n".join(parts)


def session_instructions_text(session) -> str:
    from calvin.workspaces.models import Destination

    if session.agent is None:
        return ""
    names = ["thread", *Destination.objects.filter(agent=session.agent).order_by("name").values_list("name", flat=True)]
    return instructions_compose(agent=session.agent, destination_names=names)


def session_instructions_write(session) -> None:
    """For a session whose directory is on the gateway; a host's runner writes its own copy."""
    text = session_instructions_text(session)
    if text:
        (Path(session.directory) / INSTRUCTIONS_FILE).write_text(text)
