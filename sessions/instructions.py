"""The instructions files a session's agent reads in its session directory: CLAUDE.md and AGENTS.md.

CLAUDE.md is composed when the session starts from the agent's standing instructions (set by
people in the admin, or staged by create_agent's `instructions`) and what its tool sets need
it to know: each set's instructions file (tools/calvin_mcp/instructions.md,
tools/nanoclaw_mcp/instructions.md: when and how to use its tools, the mode's tools only), the
destinations it may send to, and `ncl` (unless its cli_scope is disabled). The agent may change its copy; the standing
instructions stay on the Agent for its next sessions. AGENTS.md is the workspace's definition
(calvin/workspaces/definitions.py), rewritten whenever the definition changes.
"""

import functools
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

INSTRUCTIONS_FILE = "CLAUDE.md"
AGENTS_FILE = "AGENTS.md"
# Each tool set ships its instructions beside its tools (NanoClaw's way): when and how to use them.
# A line "- `tool`: ..." is kept only where the gateway's mode offers that tool.
ROOT = Path(__file__).resolve().parent.parent
TOOL_SET_INSTRUCTIONS = {
    "calvin": ROOT / "tools" / "calvin_mcp" / "instructions.md",
    "nanoclaw": ROOT / "tools" / "nanoclaw_mcp" / "instructions.md",
}
TOOL_LINE = re.compile(r"^- `([a-z_]+)`")

NCL_REACH = {
    "group": "this agent and what hangs off it (its destinations, sessions, approvals, tool calls)",
    "global": "the whole workspace: every agent, session and approval, the members and the audit log",
}
NCL_NOTE = (
    "# ncl\n\n"
    "`ncl` (on your PATH) reads and changes this workspace's configuration through Calvin's API, as this agent: "
    "agents, destinations, members, sessions and their messages, approvals, tool calls, and scheduled tasks "
    '(`ncl tasks create --name N --prompt P --recurrence "0 9 * * 1-5"`: each run is a turn of yours in the '
    "task's own session; send results with send_message). It reaches {reach}. "
    "`ncl help` lists the commands; `--json` gives JSON. Reads answer at once; a change such as "
    "`ncl sessions stop` answers approval-pending (exit code 3) and runs only once a person approves it. "
    "Exit codes: 0 ok, 2 usage, 3 approval-pending, 4 not found, 5 refused, 6 gateway unreachable.\n"
)


@functools.cache
def _tool_set_text(tool_set: str) -> str:
    return TOOL_SET_INSTRUCTIONS[tool_set].read_text(encoding="utf-8")


def tool_set_instructions(tool_set: str) -> str:
    """The tool set's instructions, with the lines of tools this gateway's mode does not offer left out."""
    from tools.availability import tool_offered

    kept = []
    for line in _tool_set_text(tool_set).splitlines():
        tool = TOOL_LINE.match(line)
        if tool is None or tool_offered(tool.group(1), server=tool_set):
            kept.append(line)
    return "\n".join(kept) + "\n"


def instructions_compose(*, agent, destination_names: list[str]) -> str:
    parts = []
    if agent.instructions.strip():
        parts.append(f"# Standing instructions\n\n{agent.instructions.strip()}\n")
    tool_sets = agent.tool_sets or []
    if "calvin" in tool_sets:
        parts.append(tool_set_instructions("calvin"))
    if "nanoclaw" in tool_sets:
        names = "\n".join(f"- `{name}`" for name in destination_names)
        parts.append(tool_set_instructions("nanoclaw"))
        parts.append(
            "# Destinations\n\n"
            "`send_message` and `send_file` (mcp__nanoclaw__) take `to`, one of these names; `thread` is this "
            f"session's own thread. Anything else is refused.\n\n{names}\n"
        )
    if agent.cli_scope != agent.CliScope.DISABLED:
        parts.append(NCL_NOTE.format(reach=NCL_REACH.get(agent.cli_scope, agent.cli_scope)))
    return "\n".join(parts)


def session_instructions_text(session) -> str:
    from calvin.workspaces.models import Destination

    if session.agent is None:
        return ""
    names = ["thread", *Destination.objects.filter(agent=session.agent).order_by("name").values_list("name", flat=True)]
    return instructions_compose(agent=session.agent, destination_names=names)


def agents_md_write_local(directory: Path, text: str) -> bool:
    """AGENTS.md into a session directory on the gateway, if it exists: never through a link
    the agent planted (write_private replaces the name). False when it was not written."""
    from sessions.host.sandbox import write_private

    if directory.is_symlink() or not directory.is_dir():
        return False
    try:
        write_private(directory, AGENTS_FILE, text, mode=0o644)
    except OSError:
        log.warning("AGENTS.md could not be written in %s", directory, exc_info=True)
        return False
    return True


def session_instructions_write(session) -> None:
    """For a session whose directory is on the gateway; a host's runner writes its own copies."""
    from calvin.workspaces.definitions import agents_md_text

    text = session_instructions_text(session)
    if text:
        (Path(session.directory) / INSTRUCTIONS_FILE).write_text(text)
    agents_md_write_local(Path(session.directory), agents_md_text(session.workspace_id))
