"""What needs a person's approval before it runs: one table of rules, read by every tool.

Host-side, never trusted to the agent. A rule names a tool (on its server, or a source
that is not an MCP server: Claude Code's permission prompts, `ncl`) and the conditions
under which it runs without asking: the calling agent's `cli_scope`, the session's
permission mode. A later issue adds a row here, not another engine. Who decides an approval
once asked is at the end (session_owner_decides).
"""

from dataclasses import dataclass

from calvin.workspaces.models import Workspace

ANY_TOOL = "*"

# Claude Code's own tools that its `acceptEdits` mode accepts without asking.
EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")


@dataclass(frozen=True)
class Rule:
    source: str  # "calvin" or "nanoclaw" (the MCP server), "claude-code" (permission prompts), "ncl"
    tool: str  # the tool's name, or ANY_TOOL
    unless_cli_scopes: frozenset[str] = frozenset()
    unless_permission_modes: frozenset[str] = frozenset()
    why: str = ""


RULES = (
    Rule("nanoclaw", "install_packages", why="changes the agent's environment for every later session"),
    Rule("nanoclaw", "add_mcp_server", why="runs a new program with the agent's next start"),
    Rule(
        "nanoclaw",
        "create_agent",
        unless_cli_scopes=frozenset({"global"}),
        why="provisions a long-lived agent; agents with cli_scope global create directly",
    ),
    Rule(
        "calvin",
        "post_thread",
        unless_permission_modes=frozenset({"bypassPermissions"}),
        why="posts outside the session's own thread",
    ),
    Rule(
        "claude-code",
        ANY_TOOL,
        unless_permission_modes=frozenset({"bypassPermissions"}),
        why="Claude Code asks before a tool use its permission mode does not allow",
    ),
    *(
        Rule(
            "claude-code",
            tool,
            unless_permission_modes=frozenset({"bypassPermissions", "acceptEdits"}),
            why="acceptEdits accepts file edits without asking",
        )
        for tool in EDIT_TOOLS
    ),
    Rule("ncl", "write", why="an agent changing NanoClaw's central configuration"),
)


def rule_for(*, source: str, tool: str, rules: tuple[Rule, ...] = RULES) -> Rule | None:
    """The rule for this tool: its own row first, else its source's ANY_TOOL row, else none."""
    exact = next((r for r in rules if r.source == source and r.tool == tool), None)
    return exact or next((r for r in rules if r.source == source and r.tool == ANY_TOOL), None)


def approval_needed(
    *,
    source: str,
    tool: str,
    cli_scope: str | None = None,
    permission_mode: str | None = None,
    rules: tuple[Rule, ...] = RULES,
) -> bool:
    """True when a person must approve this before it runs; a tool without a rule runs."""
    rule = rule_for(source=source, tool=tool, rules=rules)
    if rule is None:
        return False
    if cli_scope is not None and cli_scope in rule.unless_cli_scopes:
        return False
    return not (permission_mode is not None and permission_mode in rule.unless_permission_modes)


# Who decides. An approval is decided by the workspace's owners and admins and, for most kinds, by
# the person who started the session. Seed 002's self-modification ("an admin gets an approval
# card") changes what every later session of the agent runs, so its starter decides it only where
# the workspace says so (Workspace.self_modification_deciders).
SELF_MODIFICATION = frozenset({"install_packages", "add_mcp_server", "create_agent"})


def session_owner_decides(*, kind: str, deciders: str) -> bool:
    """Whether the person who started the session may decide an approval of `kind`, given the
    workspace's `self_modification_deciders`; owners and admins of the workspace always may."""
    return kind not in SELF_MODIFICATION or deciders == Workspace.SelfModificationDeciders.ADMINS_AND_OWNER


def approval_session_owner_decides(approval) -> bool:
    """session_owner_decides for a PendingApproval, by its session's workspace's setting."""
    return session_owner_decides(kind=approval.kind, deciders=approval.session.workspace.self_modification_deciders)
