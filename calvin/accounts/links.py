"""Absolute links for emails: CALVIN_PUBLIC_URL when set, else the request's own host."""

from urllib.parse import urlencode

from django.conf import settings
from django.utils.http import url_has_allowed_host_and_scheme


def absolute_url(request, path: str) -> str:
    if settings.CALVIN_PUBLIC_URL:
        return settings.CALVIN_PUBLIC_URL.rstrip("/") + path
    return request.build_absolute_uri(path)


def safe_next(request, candidate: str | None) -> str:
    """`candidate` when it is a path or URL of this site, else "" (an off-site `next` is dropped)."""
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return ""


def with_query(path: str, **params: str) -> str:
    given = {name: value for name, value in params.items() if value}
    return f"{path}?{urlencode(given)}" if given else path
