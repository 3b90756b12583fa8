"""The `calvin` MCP server: tool registration and the Streamable HTTP app behind auth."""

from django.conf import settings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from tools.auth import RunnerTokenAuth
from tools.availability import tool_offered
from tools.http_limits import McpPostOnly

INSTRUCTIONS = (
    "Calvin's tools act beyond your sandbox: they post into this session's thread. "
    "Paths are absolute or relative to the session directory."
)


def build_server(mode: str | None = None) -> MCPServer:
    from tools import cards, files  # each module registers its tools

    server = MCPServer(name="calvin", instructions=INSTRUCTIONS)
    for module in (files, cards):
        for name, fn, description in module.TOOLS:
            if tool_offered(name, mode):
                server.add_tool(fn, name=name, description=description)
    return server


def build_http_app(mode: str | None = None):
    """The Starlette app for /mcp (stateless JSON, so any web process can answer any call)."""
    server = build_server(mode)
    hosts = [h for h in settings.ALLOWED_HOSTS if h != "*"]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection="*" not in settings.ALLOWED_HOSTS,
        allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
        allowed_origins=[f"{scheme}://{h}:*" for h in hosts for scheme in ("http", "https")],
    )
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, transport_security=security
    )
    return McpPostOnly(RunnerTokenAuth(app)), app
