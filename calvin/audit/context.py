"""Where the current request came from, for the audit rows its services write.

A view's middleware sets the client address and the channel once; services called deeper
down (approval_decide, session_stop, ...) read them when they record an AuditEvent, so no
service needs a request. Celery tasks, Slack listeners and management commands set their
own channel with `audit_origin(...)`.
"""

import contextlib
import contextvars
from dataclasses import dataclass


@dataclass(frozen=True)
class Origin:
    via: str = "system"  # web, admin, slack, calvin-command, cli, api, system
    ip: str | None = None


SYSTEM = Origin()
_origin: contextvars.ContextVar[Origin] = contextvars.ContextVar("audit_origin", default=SYSTEM)  # noqa: B039 (frozen)


def origin_current() -> Origin:
    return _origin.get()


@contextlib.contextmanager
def audit_origin(*, via: str, ip: str | None = None):
    token = _origin.set(Origin(via=via, ip=ip))
    try:
        yield
    finally:
        _origin.reset(token)


class AuditOriginMiddleware:
    """The client address (from the socket: uvicorn rewrites it only for trusted proxies) and
    whether the request is the admin's or the dashboard's."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        via = "admin" if request.path.startswith("/admin/") else "web"
        with audit_origin(via=via, ip=request.META.get("REMOTE_ADDR") or None):
            return self.get_response(request)
