"""The `calvin` MCP server's tools (seed 000): thin adapters over tools/services."""

from tools.calvin_mcp import cards, files, secrets

TOOLS = [*files.TOOLS, *cards.TOOLS, *secrets.TOOLS]
