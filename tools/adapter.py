"""What every MCP tool function shares: call a service off the event loop, translate refusals."""

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver.exceptions import ToolError

from tools.errors import ToolRefused


def _in_thread(service, kwargs):
    close_old_connections()  # tool threads live outside Django's request cycle
    return service(**kwargs)


# Not thread-sensitive: calls run side by side, each thread on its own DB connection.
_run = sync_to_async(_in_thread, thread_sensitive=False)


async def call_service(service, **kwargs):
    try:
        return await _run(service, kwargs)
    except ToolRefused as exc:
        raise ToolError(str(exc)) from None
