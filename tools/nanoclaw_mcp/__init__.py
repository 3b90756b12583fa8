"""The `nanoclaw` MCP server's tools (seed 002): thin adapters over tools/services.

In the seed's order: messaging, then interactive cards, then agents.
"""

from tools.nanoclaw_mcp import agents, interactive, messaging

TOOLS = [*messaging.TOOLS, *interactive.TOOLS, *agents.TOOLS]
