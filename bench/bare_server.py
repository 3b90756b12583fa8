"""The baseline: a bare MCPServer with one no-op tool, Calvin's transport settings, no auth.

Served by bench/run.py as `uvicorn bare_server:app --app-dir bench`.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="bare")


@server.tool(description="Does nothing.")
async def noop() -> str:
    return "ok"


# Same transport settings as tools/server.py: stateless, JSON responses.
app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True)
