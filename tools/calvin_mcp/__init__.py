"""The `calvin` MCP server's tools (seed 000): thin adapters over tools/services."""

from tools.calvin_mcp import approval_prompt, cards, files, previews, repositories, secrets, spawns, threads

TOOLS = [
    *files.TOOLS,
    *cards.TOOLS,
    *secrets.TOOLS,
    *repositories.TOOLS,
    *spawns.TOOLS,
    *previews.TOOLS,
    *threads.TOOLS,
    *approval_prompt.TOOLS,
]
