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
