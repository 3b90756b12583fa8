"""One ASGI app: Django (views, admin), the MCP servers at /mcp and /mcp/nanoclaw, websockets at /ws/."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from calvin.dashboard.origin import SameOriginValidator  # noqa: E402
from calvin.routing import websocket_urlpatterns  # noqa: E402
from sessions.consumers import HostConsumer  # noqa: E402
from tools.server import build_http_app  # noqa: E402

mcp_app, mcp_lifespan = build_http_app()


async def http_app(scope, receive, send):
    path = scope["path"]
    if path == "/mcp" or path.startswith("/mcp/"):
        return await mcp_app(scope, receive, send)
    return await django_app(scope, receive, send)


pages_websockets = SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
host_websocket = HostConsumer.as_asgi()


async def websocket_app(scope, receive, send):
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
