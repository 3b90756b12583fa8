"""Which Celery workers are alive: each worker process notes itself in Redis every
WORKER_BEAT_SECONDS; /readyz and `manage.py workers` count those seen in the last minute.

One sorted set per queue (CELERY_TASK_DEFAULT_QUEUE), so two deployments (or test runs) on one
Redis do not count each other's workers. Without Redis (the embedded `up`) the worker runs in
the web process itself and there is nothing to count.
"""

import threading
import time

from django.conf import settings

WORKER_BEAT_SECONDS = 15.0
ANSWERED_WITHIN_SECONDS = 60.0


def _key() -> str:
    return f"calvin:workers:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def _client():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def worker_beat_start(*, hostname: str, stop: threading.Event) -> threading.Thread | None:
    """Note `hostname` now and then every WORKER_BEAT_SECONDS until `stop` is set. A beat that
    fails (Redis restarting) is skipped; the next one puts the worker back."""
    if not settings.REDIS_URL:
        return None

    def beat():
        client = _client()
        while True:
            try:
                client.zadd(_key(), {hostname: time.time()})
            except Exception:  # noqa: BLE001 - a missed beat is what the count is for
                pass
            if stop.wait(WORKER_BEAT_SECONDS):
                break

    thread = threading.Thread(target=beat, name="calvin-worker-beat", daemon=True)
    thread.start()
    return thread


def worker_forget(*, hostname: str) -> None:
    """A clean shutdown leaves the count at once (a killed worker ages out of it)."""
    if settings.REDIS_URL:
        try:
            _client().zrem(_key(), hostname)
        except Exception:  # noqa: BLE001 - it ages out anyway
            pass


def workers_answered(*, within: float = ANSWERED_WITHIN_SECONDS) -> dict[str, float]:
    """Worker name -> seconds since it was last heard, for those heard within `within` seconds.
    Older entries are forgotten here."""
    client = _client()
    now = time.time()
    client.zremrangebyscore(_key(), "-inf", now - 24 * 3600)
    seen = client.zrangebyscore(_key(), now - within, "+inf", withscores=True)
    return {name.decode(): round(now - at, 1) for name, at in seen}
