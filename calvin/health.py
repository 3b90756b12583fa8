"""Probes: /healthz (the process answers; no database) and /readyz (it can serve: database,
Redis, the Celery broker, migrations; and how many workers were heard in the last minute). No
login, no CSRF, GET and HEAD only. A failing check is named with a fixed word, never with a URL,
host, password or exception text: the probe answers anyone who can reach it. The exception is
logged for the operator."""

import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)

# Seconds a network check may take (Redis connect and PING, the broker's connection).
CHECK_TIMEOUT_SECONDS = 2.0
DATABASE_ALIAS = DEFAULT_DB_ALIAS


@never_cache
@require_safe
def liveness(request):
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readiness(request):
    checks = {"database": database_check()}
    if settings.REDIS_URL:
        checks["redis"] = redis_check()
    checks["broker"] = broker_check()
    checks["migrations"] = migrations_check() if checks["database"] == "ok" else "unchecked"
    ready = all(outcome == "ok" for outcome in checks.values())
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    if settings.REDIS_URL and checks["redis"] == "ok":
        # Reported, not required: a gateway without workers still takes calls (their effects
        # wait, durable), so taking it out of the load balancer would only make things worse.
        body["workers"] = workers_count()
    return JsonResponse(body, status=200 if ready else 503)


def workers_count() -> int | None:
    """Celery workers heard in the last minute (calvin/workers.py); None when it cannot be read."""
    from calvin.workers import workers_answered

    try:
        return len(workers_answered())
    except Exception:
        log.warning("readyz: the workers could not be counted", exc_info=True)
        return None


def database_check() -> str:
    try:
        with connections[DATABASE_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        log.warning("readyz: the database is unreachable", exc_info=True)
        return "unreachable"
    return "ok"


def redis_check() -> str:
    import redis

    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=CHECK_TIMEOUT_SECONDS, socket_connect_timeout=CHECK_TIMEOUT_SECONDS
        )
        try:
            client.ping()
        finally:
            client.close()
    except Exception:
        log.warning("readyz: Redis is unreachable", exc_info=True)
        return "unreachable"
    return "ok"


def broker_check() -> str:
    from calvin.celery import app

    try:
        broker = app.connection_for_write(url=settings.CELERY_BROKER_URL, connect_timeout=CHECK_TIMEOUT_SECONDS)
        with broker as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=CHECK_TIMEOUT_SECONDS)
    except Exception:
        log.warning("readyz: the Celery broker is unreachable", exc_info=True)
        return "unreachable"
    return "ok"


def migrations_check() -> str:
    try:
        executor = MigrationExecutor(connections[DATABASE_ALIAS])
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:
        log.warning("readyz: the migrations could not be read", exc_info=True)
        return "error"
    return "unapplied" if unapplied else "ok"


class ProbeMiddleware:
    """First in MIDDLEWARE: answers the probes before host validation (an orchestrator probes by
    the pod's address, which ALLOWED_HOSTS does not name), the HTTPS redirect (a load balancer
    probes over plain HTTP), sessions and the rest. The answers depend on no Host header."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.probes = {"/healthz": liveness, "/readyz": readiness}

    def __call__(self, request):
        probe = self.probes.get(request.path_info)
        return probe(request) if probe else self.get_response(request)
