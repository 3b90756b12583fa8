"""Websocket handshakes only from this site's own pages: Origin must match scheme, host and port."""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port


def allowed_origins(scope) -> set[tuple[str, str, int]]:
    """The public URL's origin, and the origin of the Host the browser connected to when it is an allowed host."""
    origins = set()
    if settings.CALVIN_PUBLIC_URL:
        origins.add(_origin(settings.CALVIN_PUBLIC_URL))
    host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin1")
    if host and validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
        # Same origin as the page: channels' own validator matched the host name only, so any
        # port on localhost (another local app) passed.
        scheme = "https" if scope.get("scheme") == "wss" else "http"
        origins.add(_origin(f"{scheme}://{host}"))
    origins.discard(None)
    return origins


def origin_allowed(scope) -> bool:
    origin = dict(scope.get("headers", [])).get(b"origin")
    # Browsers always send Origin on a websocket handshake; none at all is refused, as channels does.
    return origin is not None and _origin(origin.decode("latin1")) in allowed_origins(scope)


class SameOriginValidator:
    """ASGI middleware in front of the websocket routes (cross-site websocket hijacking)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
