"""Whether a request to a preview host goes on, decided in one trip to the database's thread:
the live preview of that name, its access rule, its request rate (counted in the shared cache,
so across every web process), and the connection of the session's host."""

import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from calvin.previews.access import access_cookie_valid
from calvin.previews.selectors import PreviewRoute, preview_route
from sessions.models import Host

RATE_WINDOW = 60


@dataclass(frozen=True)
class Admission:
    verdict: str  # open, missing, login, limited, offline
    route: PreviewRoute | None = None
    channel: str = ""
    host_name: str = ""
    retry_after: int = 0


def preview_admit(*, name: str, access_cookie: str = "") -> Admission:
    route = preview_route(name=name)
    if route is None:
        return Admission("missing")
    if route.access == "members" and not (access_cookie and access_cookie_valid(route=route, value=access_cookie)):
        return Admission("login", route)
    now = time.time()
    key = f"preview-rate:{route.id}:{int(now // RATE_WINDOW)}"
    cache.add(key, 0, RATE_WINDOW * 2)
    if cache.incr(key) > settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE:
        return Admission("limited", route, retry_after=max(1, RATE_WINDOW - int(now % RATE_WINDOW)))
    host = Host.objects.filter(id=route.host_id).values_list("channel_name", "name").first() if route.host_id else None
    if not host or not host[0]:
        return Admission("offline", route, host_name=host[1] if host else "")
    return Admission("open", route, channel=host[0], host_name=host[1])
