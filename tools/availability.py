"""Which tools each deployment mode offers, per MCP server.

`calvin`: seed 000's availability table. `nanoclaw`: DESIGN.md's "Deployment modes" —
the tools that touch only the session's own thread (and send_file, whose seed 000 twin
is everywhere) in every mode; creating agents and changing them in self-hosted and hosted.
"""

from django.conf import settings

ONE_MACHINE, SELF_HOSTED, HOSTED = "one-machine", "self-hosted", "hosted"
EVERY_MODE = {ONE_MACHINE, SELF_HOSTED, HOSTED}
SERVED = {SELF_HOSTED, HOSTED}

CALVIN, NANOCLAW = "calvin", "nanoclaw"

# Tools offered per mode. A tool offered but refused by the gateway (preview in
# self-hosted mode) is listed here and refused by its service.
OFFERED = {
    CALVIN: {
        "send_file": EVERY_MODE,
        "post_card": EVERY_MODE,
        "checkout_repo": SERVED,
        "spawn_thread": SERVED,
        "read_thread": SERVED,
        "post_thread": SERVED,
        "request_secret": SERVED,
        "preview": SERVED,
        "unpreview": SERVED,
        # Issue 8, not seed 000: Claude Code's permission prompts, wherever a Claude Code runner runs.
        # Listed only to callers whose provider is claude-code (tools.server.GatewayServer).
        "approval_prompt": EVERY_MODE,
    },
    NANOCLAW: {
        "send_message": EVERY_MODE,
        "send_file": EVERY_MODE,
        "edit_message": EVERY_MODE,
        "add_reaction": EVERY_MODE,
        "ask_user_question": EVERY_MODE,
        "send_card": EVERY_MODE,
        "create_agent": SERVED,
        "install_packages": SERVED,
        "add_mcp_server": SERVED,
    },
}


def tool_offered(name: str, mode: str | None = None, server: str = CALVIN) -> bool:
    return (mode or settings.CALVIN_MODE) in OFFERED[server].get(name, set())


# Tools listed in a mode only for some sessions: seed 000's "when the host has a workspace
# definition" (checkout_repo, self-hosted). The service refuses the call with the same reason.
def definition_needed(name: str, mode: str | None = None, server: str = CALVIN) -> bool:
    return server == CALVIN and name == "checkout_repo" and (mode or settings.CALVIN_MODE) == SELF_HOSTED


def host_has_definition(*, host_id: int | None, workspace_id: int) -> bool:
    """A session's host has its workspace's definition when the session runs on a host and the
    workspace defines at least one repository (the gateway sends the definition with each checkout)."""
    from calvin.workspaces.models import Repository

    return host_id is not None and Repository.objects.filter(workspace_id=workspace_id).exists()


NO_DEFINITION = (
    "checkout_repo needs a workspace definition on the session's host, and this session's host has none:"
    " a workspace owner or admin adds the workspace's repositories in Calvin's admin"
)
