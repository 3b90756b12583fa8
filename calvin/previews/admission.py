"""Whether a request to a preview host goes on: the live preview of that name with its
session's host (one statement), its access rule, and its request rate (counted in Redis, so
across every web process; one round trip, and on the event loop one for a lease of many).

Every request to a preview passes here, so the lookup is one statement rather than an ORM
query compiled afresh each time (that cost more than the query itself), and on PostgreSQL and
Redis it runs on the event loop itself (`AsyncLookups`): the hop to a thread of the server's
pool and back cost more than the statement. The statement must agree with
`Preview.objects.live()`; tests/previews/test_admission.py holds them together.
"""

import asyncio
import functools
import time
import weakref
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache
from django.db import connection, connections
from django.utils import timezone
from django.utils.module_loading import import_string

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
    if isinstance(caches["default"], RedisCache):
        backend, client = _redis()
        full = backend.make_and_validate_key(key)
        pipe = client.pipeline(transaction=False)
        pipe.set(full, 0, ex=RATE_WINDOW * 2, nx=True)
        pipe.incr(full)
        return int(pipe.execute()[1])
    cache.add(key, 0, RATE_WINDOW * 2)
    return cache.incr(key)


def rate_key(route: PreviewRoute, now: float) -> str:
    return f"preview-rate:{route.id}:{route.name}:{int(now // RATE_WINDOW)}"


def lease_size(limit: int) -> int:
    """How many requests one process takes from a preview's minute at once: a hundredth of
    the limit, at most 50 (so the processes together stop at most a few percent short of it)."""
    return max(1, min(50, limit // 100))


def verdict(found, *, over_rate: bool, now: float, may_open: bool) -> Admission:
    """The answer from what was looked up; `may_open`: the access rule lets the person in."""
    if found is None:
        return Admission("missing")
    route, channel, host_name = found
    if not may_open:
        return Admission("login", route)
    if over_rate:
        return Admission("limited", route, retry_after=max(1, RATE_WINDOW - int(now % RATE_WINDOW)))
    if not channel:
        return Admission("offline", route, host_name=host_name)
    return Admission("open", route, channel=channel, host_name=host_name)


def may_open(route: PreviewRoute, access_cookie: str) -> bool:
    return route.access != "members" or bool(access_cookie and access_cookie_valid(route=route, value=access_cookie))


def preview_admit(*, name: str, access_cookie: str = "") -> Admission:
    found, now = route_with_host(name), time.time()
    if found is None:
        return Admission("missing")
    allowed = may_open(found[0], access_cookie)
    over_rate = allowed and requests_counted(rate_key(found[0], now)) > settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE
    return verdict(found, over_rate=over_rate, now=now, may_open=allowed)


class AsyncLookups:
    """This process's own PostgreSQL connection and Redis client, on its event loop, for the
    lookups every preview request makes. One statement at a time on the connection (each is
    a fraction of a millisecond); a broken connection is made again, once, at once."""

    def __init__(self):
        self._connection = None
        self._redis = None
        self._lock = asyncio.Lock()
        # Rate key -> requests this process may still admit in that minute without asking Redis
        # (-1: the minute is over its limit). Redis counts the leases handed out, so together
        # the processes never admit more than the limit.
        self._leased: dict[str, int] = {}

    @staticmethod
    def usable() -> bool:
        # From the settings, not connections[] and caches[]: under ASGI each request is a new
        # async context, where caches["default"] builds a backend object afresh.
        engine, backend = settings.DATABASES["default"]["ENGINE"], settings.CACHES["default"]["BACKEND"]
        return engine == "django.db.backends.postgresql" and import_string(backend) is RedisCache

    async def route_with_host(self, name: str):
        import psycopg

        async with self._lock:
            for attempt in (1, 2):
                try:
                    if self._connection is None or self._connection.closed:
                        params = connections["default"].get_connection_params()
                        params = {k: v for k, v in params.items() if k not in ("cursor_factory", "context")}
                        self._connection = await psycopg.AsyncConnection.connect(**params, autocommit=True)
                    cursor = await self._connection.execute(ROUTE_SQL, [name, timezone.now()])
                    row = await cursor.fetchone()
                    break
                except psycopg.OperationalError:
                    self._connection = None
                    if attempt == 2:
                        raise
        if row is None:
            return None
        return PreviewRoute(*row[:8]), row[8] or "", row[9] or ""

    async def within_rate(self, key: str) -> bool:
        left = self._leased.get(key, 0)
        if left:
            if left > 0:
                self._leased[key] = left - 1
            return left > 0
        limit = settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE
        size = lease_size(limit)
        counted = await self.requests_counted(key, size)
        minute = key.rpartition(":")[2]
        self._leased = {k: n for k, n in self._leased.items() if k.endswith(":" + minute)}
        granted = min(size, limit - (counted - size))  # the part of this lease within the limit
        self._leased[key] = granted - 1 if granted > 0 else -1
        return granted > 0

    async def requests_counted(self, key: str, by: int = 1) -> int:
        import redis.asyncio

        if self._redis is None:
            self._redis = (caches.create_connection("default"), redis.asyncio.Redis.from_url(settings.REDIS_URL))
        backend, client = self._redis
        full = backend.make_and_validate_key(key)
        async with client.pipeline(transaction=False) as pipe:
            pipe.set(full, 0, ex=RATE_WINDOW * 2, nx=True)
            pipe.incrby(full, by)
            return int((await pipe.execute())[1])


_LOOKUPS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncLookups]" = weakref.WeakKeyDictionary()


def lookups() -> AsyncLookups:
    """This event loop's lookups: a connection belongs to the loop it was made on."""
    loop = asyncio.get_running_loop()
    found = _LOOKUPS.get(loop)
    if found is None:
        found = _LOOKUPS[loop] = AsyncLookups()
    return found


async def preview_admit_async(*, name: str, access_cookie: str = "") -> Admission:
    """preview_admit on the event loop where the database and cache allow it, else in a thread."""
    if not AsyncLookups.usable():
        return await sync_to_async(preview_admit, thread_sensitive=False)(name=name, access_cookie=access_cookie)
    found, now = await lookups().route_with_host(name), time.time()
    if found is None:
        return Admission("missing")
    allowed = found[0].access != "members" or await sync_to_async(may_open, thread_sensitive=False)(
        found[0], access_cookie
    )
    over_rate = allowed and not await lookups().within_rate(rate_key(found[0], now))
    return verdict(found, over_rate=over_rate, now=now, may_open=allowed)
