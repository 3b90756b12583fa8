"""Whether a request to a preview host goes on, decided in one trip to the database's thread:
the live preview of that name with its session's host (one statement), its access rule, and
its request rate (counted in the shared cache, so across every web process; one round trip).

Every request to a preview passes here, so the lookup is one prepared statement rather than
an ORM query compiled afresh each time (that cost more than the query itself). It must agree
with `Preview.objects.live()`; tests/previews/test_admission.py holds them together.
"""

import functools
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache
from django.db import connection
from django.utils import timezone

from calvin.previews.access import access_cookie_valid
from calvin.previews.models import Preview
from calvin.previews.selectors import PreviewRoute
from sessions.models import Host, Session

RATE_WINDOW = 60
ROUTE_SQL = f"""
SELECT p.id, p.name, p.session_id, p.workspace_id, p.port, s.host_id, p.access, p.expires_at,
       h.channel_name, h.name
FROM {Preview._meta.db_table} p
JOIN {Session._meta.db_table} s ON s.id = p.session_id
LEFT JOIN {Host._meta.db_table} h ON h.id = s.host_id
WHERE p.name = %s AND p.removed_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > %s)
"""


@dataclass(frozen=True)
class Admission:
    verdict: str  # open, missing, login, limited, offline (and bad_host, head_too_large from the proxy)
    route: PreviewRoute | None = None
    channel: str = ""
    host_name: str = ""
    retry_after: int = 0


def route_with_host(name: str) -> tuple[PreviewRoute, str, str] | None:
    """The live preview of that name, its host's channel ("" when not connected) and name."""
    with connection.cursor() as cursor:
        cursor.execute(ROUTE_SQL, [name, timezone.now()])
        row = cursor.fetchone()
    if row is None:
        return None
    return PreviewRoute(*row[:8]), row[8] or "", row[9] or ""


@functools.cache
def _redis():
    """This process's client of the cache's Redis, kept: `django.core.cache.cache` is one per
    async context, so under ASGI each request would open a connection of its own (3-6 ms)."""
    backend = caches.create_connection("default")
    return backend, backend._cache.get_client(None, write=True)


def requests_counted(key: str) -> int:
    """This minute's count for the key, after adding one. With Redis, one pipelined round trip
    (SET NX with the expiry, then INCR) on a kept connection, instead of the cache API's two."""
    if isinstance(cache, RedisCache):
        backend, client = _redis()
        full = backend.make_and_validate_key(key)
        pipe = client.pipeline(transaction=False)
        pipe.set(full, 0, ex=RATE_WINDOW * 2, nx=True)
        pipe.incr(full)
        return int(pipe.execute()[1])
    cache.add(key, 0, RATE_WINDOW * 2)
    return cache.incr(key)


def preview_admit(*, name: str, access_cookie: str = "") -> Admission:
    found = route_with_host(name)
    if found is None:
        return Admission("missing")
    route, channel, host_name = found
    if route.access == "members" and not (access_cookie and access_cookie_valid(route=route, value=access_cookie)):
        return Admission("login", route)
    now = time.time()
    if (
        requests_counted(f"preview-rate:{route.id}:{int(now // RATE_WINDOW)}")
        > settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE
    ):
        return Admission("limited", route, retry_after=max(1, RATE_WINDOW - int(now % RATE_WINDOW)))
    if not channel:
        return Admission("offline", route, host_name=host_name)
    return Admission("open", route, channel=channel, host_name=host_name)
