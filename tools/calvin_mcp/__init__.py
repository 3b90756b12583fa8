"""The `calvin` MCP server's tools (seed 000): thin adapters over tools/services."""

from tools.calvin_mcp import approval_prompt, cards, files, secrets, threads

TOOLS = [*files.TOOLS, *cards.TOOLS, *secrets.TOOLS, *threads.TOOLS, *approval_prompt.TOOLS]
