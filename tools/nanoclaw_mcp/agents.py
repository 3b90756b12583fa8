"""NanoClaw's agent tools (seed 002, "Agents" and "Self-modification"): thin adapters over
tools.services.agents. Whether a person must approve is approvals.policy's decision, made
on the host; the bounds below are checked by the services, which name every problem."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.services.agents import agent_create_request, mcp_server_add_request, packages_install_request


async def create_agent(
    name: Annotated[str, Field(description="Agent name — also becomes the caller's destination name for it.")],
    ctx: Context,
    instructions: Annotated[
        str | None,
        Field(
            description="Seeds the new agent's starting role and personality, staged as its standing "
            "instructions (at most 20,000 characters)."
        ),
    ] = None,
) -> dict[str, Any]:
    return await call_service(
        agent_create_request, caller=caller_from_context(ctx), name=name, instructions=instructions
    )


async def install_packages(
    ctx: Context,
    apt: Annotated[list[str] | None, Field(description="apt package names (no version specs or flags).")] = None,
    npm: Annotated[list[str] | None, Field(description="npm package names to install globally.")] = None,
    reason: Annotated[str | None, Field(description="Why the packages are needed.")] = None,
) -> dict[str, Any]:
    return await call_service(
        packages_install_request, caller=caller_from_context(ctx), apt=apt, npm=npm, reason=reason
    )


async def add_mcp_server(
    name: Annotated[str, Field(description="Unique server name.")],
    command: Annotated[str, Field(description="Command to launch the server.")],
    ctx: Context,
    args: Annotated[list[str] | None, Field(description="Command arguments.")] = None,
    env: Annotated[
        dict[str, str] | None,
        Field(
            description='Environment variables for the server. A credential\'s value is "onecli-managed" '
            "(the vault secret named like the variable) or vault:NAME, never the credential."
        ),
    ] = None,
) -> dict[str, Any]:
    return await call_service(
        mcp_server_add_request, caller=caller_from_context(ctx), name=name, command=command, args=args, env=env
    )


TOOLS = [
    (
        "create_agent",
        create_agent,
        "Provisions a long-lived companion agent: its own workspace directory and persistent config, wired "
        "both ways as a destination (you reach it by its name; it reaches you as `parent`). The name is "
        "normalised to lowercase words with dashes (1 to 64 characters) and must be new in the workspace and "
        "among your destinations. Fire-and-forget: it returns at once and messages queue until the agent is up. "
        "Approval-gated by CLI scope: agents with cli_scope global create directly "
        '({"status": "created", ...}); every other scope returns {"status": "approval-pending", "approval_id": N} '
        "and you are told the outcome as a system message. There is no send_to_agent tool: use send_message "
        "with `to` set to its name.",
    ),
    (
        "install_packages",
        install_packages,
        "Asks for apt and/or npm packages in your environment. Always approval-gated and fire-and-forget: "
        'returns {"status": "approval-pending", "approval_id": N}; a person approves or denies on a card and '
        "you are told the outcome as a system message. At least one package, at most 20 in all; bare names "
        "only (apt ^[a-z0-9][a-z0-9._+-]*$, npm ^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$: no versions, "
        "flags or spaces). Once approved your environment is rebuilt before your next turn and the packages "
        "persist across all future sessions, unlike a workspace `pnpm install`. reason: at most 2,000 characters.",
    ),
    (
        "add_mcp_server",
        add_mcp_server,
        "Asks to add an MCP server to your config. Always approval-gated and fire-and-forget: returns "
        '{"status": "approval-pending", "approval_id": N} and you are told the outcome as a system message; '
        "once approved your next turn has its tools (no rebuild). name: one label (letters, digits, '-', '_', "
        "1 to 63, starting with a letter or digit), unique among your servers; calvin and nanoclaw are "
        "reserved. command: at most 1,000 characters; args: at most 50, 2,000 characters each, 10,000 in all; "
        "env: at most 50 variables named like ^[A-Za-z_][A-Za-z0-9_]*$. Never put a credential in env, nor ask "
        'for one: write "onecli-managed" as its value (the vault secret named like the variable) or `vault:NAME` '
        "for a secret of another name (ask for a missing one with request_secret); a value equal to one of this "
        "session's secrets is refused.",
    ),
]
