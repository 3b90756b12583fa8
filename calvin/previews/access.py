"""Members-only previews: a login on Calvin's origin hands the preview host a cookie of its own.

The preview host never sees Calvin's session cookie (another origin). A person who opens a
members-only preview is sent to `access_login_url` on Calvin's origin; once logged in (and a
member of the preview's workspace) they are sent back with a token in the URL, valid 60 s and
once; the proxy exchanges it (`access_exchange`) for a cookie value, set host-only on that
preview's host, which names the preview and the person and is checked on each request
(`access_cookie_valid`). Each has a signing salt of its own, so neither passes for the other.
"""

import hashlib
from urllib.parse import urlencode

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.urls import reverse

from calvin.chat.links import public_base
from calvin.previews.selectors import PreviewRoute, preview_route
from calvin.workspaces.models import Member

ACCESS_COOKIE = "calvin_preview_access"
TOKEN_SALT = "calvin.previews.access-token"
COOKIE_SALT = "calvin.previews.access-cookie"
TOKEN_SECONDS = 60
# A person removed from the workspace loses access within this long on pages already open.
MEMBERSHIP_CACHE_SECONDS = 30


def access_token_make(*, preview_id: int, user_id: int) -> str:
    return signing.dumps({"p": preview_id, "u": user_id}, salt=TOKEN_SALT, compress=False)


def access_login_url(*, name: str, next_path: str) -> str:
    """Where a members-only preview sends a person without its cookie: Calvin's own origin."""
    path = reverse("previews:access", args=[name])
    return f"{public_base()}{path}?{urlencode({'next': next_path})}"


def is_member(*, workspace_id: int, user_id: int, cached: bool = True) -> bool:
    """Whether an active person is a member of the workspace; `cached`: as read within
    MEMBERSHIP_CACHE_SECONDS (each request of an open page asks)."""
    key = f"preview-member:{workspace_id}:{user_id}"
    member = cache.get(key) if cached else None
    if member is None:
        member = Member.objects.filter(workspace_id=workspace_id, user_id=user_id, user__is_active=True).exists()
        cache.set(key, member, MEMBERSHIP_CACHE_SECONDS)
    return member


def _signed(value: str, *, salt: str, max_age: float) -> dict | None:
    try:
        data = signing.loads(value, salt=salt, max_age=max_age)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("p"), int) and isinstance(data.get("u"), int)):
        return None
    return data


def access_exchange(*, name: str, token: str) -> str | None:
    """The cookie value for a hand-off token, or None: a bad or stale token, one used already,
    another preview's, a preview no longer live, or a person no longer a member."""
    data = _signed(token, salt=TOKEN_SALT, max_age=TOKEN_SECONDS)
    route = preview_route(name=name)
    if data is None or route is None or data["p"] != route.id:
        return None
    if route.access not in ("anyone", "members"):
        return None
    if not is_member(workspace_id=route.workspace_id, user_id=data["u"], cached=False):
        return None
    # Once: a token seen in a log or a browser's history opens nothing afterwards.
    used = f"preview-token-used:{hashlib.sha256(token.encode()).hexdigest()}"
    if not cache.add(used, 1, TOKEN_SECONDS * 2):
        return None
    return signing.dumps({"p": route.id, "u": data["u"]}, salt=COOKIE_SALT, compress=False)


def access_cookie_valid(*, route: PreviewRoute, value: str) -> bool:
    data = _signed(value, salt=COOKIE_SALT, max_age=settings.CALVIN_PREVIEW_ACCESS_SECONDS)
    if data is None or data["p"] != route.id:
        return False
    return is_member(workspace_id=route.workspace_id, user_id=data["u"])
