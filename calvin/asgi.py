"""One ASGI app: Django (views, admin), the MCP servers at /mcp and /mcp/nanoclaw, websockets at /ws/,
and preview hosts (calvin/previews/proxy.py) before any of them."""

import asyncio
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()

from django.core.signals import request_finished  # noqa: E402
from django.db import connections  # noqa: E402


def _close_request_connections(**kwargs):
    """Under ASGI, Django runs each request's synchronous code in a thread of its own: a connection
    kept for CONN_MAX_AGE outlived its thread, one per request, until PostgreSQL refused new
    clients (bench/api.py at 20 clients). Closed as the request ends; the MCP tools' and the
    workers' threads live on and keep theirs. A test's transaction (an atomic block) is left be,
    and so is an event loop's thread (Django's test client ends a streamed body there; no
    request's thread is)."""
    try:
        asyncio.get_running_loop()
        return
    except RuntimeError:
        pass
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


request_finished.connect(_close_request_connections, dispatch_uid="calvin.asgi.close_request_connections")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from calvin.dashboard.origin import SameOriginValidator  # noqa: E402
from calvin.previews.addresses import is_preview_host  # noqa: E402
from calvin.previews.proxy import header, preview_http  # noqa: E402
from calvin.previews.proxy_ws import preview_websocket  # noqa: E402
from calvin.routing import websocket_urlpatterns  # noqa: E402
from sessions.consumers import HostConsumer  # noqa: E402
from tools.server import build_http_app  # noqa: E402

mcp_app, mcp_lifespan = build_http_app()


async def http_app(scope, receive, send):
    # A preview host is another origin, the agent's: nothing there reaches Calvin's own views.
    if is_preview_host(header(scope, b"host")):
        return await preview_http(scope, receive, send)
    path = scope["path"]
    if path == "/mcp" or path.startswith("/mcp/"):
        return await mcp_app(scope, receive, send)
    return await django_app(scope, receive, send)


pages_websockets = SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
host_websocket = HostConsumer.as_asgi()


async def websocket_app(scope, receive, send):
    if is_preview_host(header(scope, b"host")):
        return await preview_websocket(scope, receive, send)
    # Host daemons authenticate with a bearer token, not a browser's cookie: no Origin to
    # check (a page cannot set the header), and no login session.
    if scope["path"] == "/ws/host/":
        return await host_websocket(scope, receive, send)
    return await pages_websockets(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": websocket_app,
        # Both MCP servers' session managers run inside this lifespan.
        "lifespan": mcp_lifespan,
    }
)
