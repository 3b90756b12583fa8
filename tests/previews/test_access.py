"""Members-only previews: the login on Calvin's origin, its one-time token, the cookie it becomes.
Over real HTTP through the gateway with people logged in through the login form; a member of
another workspace is refused everywhere."""

import html
import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import signing

from calvin.previews import access
from calvin.previews.access import (
    access_cookie_valid,
    access_exchange,
    access_login_url,
    access_token_make,
)
from calvin.previews.models import Preview
from calvin.previews.selectors import preview_route
from calvin.workspaces.models import Member
from sessions.services import session_start
from tests.dashboard.conftest import OWNER_PASSWORD, STRANGER_PASSWORD, logged_in
from tests.previews.support import preview_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def members_preview(workspace):
    session = session_start(workspace=workspace, owner=Member.objects.get(workspace=workspace), title="t")
    return preview_of(session, "team-app", port=5173, access=Preview.Access.MEMBERS)


@pytest.fixture
def stranger(django_user_model):
    from calvin.workspaces.services import workspace_create

    user = django_user_model.objects.create_user("stranger", password=STRANGER_PASSWORD)
    workspace_create(name="Globex", slug="globex", owner_user=user)
    return user


def hand_off(page: str) -> tuple[str, str, str]:
    """(where, token, next) of the hand-off page's refresh to the preview host (and its link)."""
    refresh = html.unescape(re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', page).group(1))
    link = html.unescape(re.search(r'id="open-preview" href="([^"]+)"', page).group(1))
    assert refresh == link
    parts = urlsplit(link)
    query = parse_qs(parts.query)
    return f"{parts.scheme}://{parts.netloc}{parts.path}", query["token"][0], query["next"][0]


def test_the_login_url_is_on_calvins_origin():
    assert access_login_url(name="team-app", next_path="/a?b=1") == (
        "http://localhost:8000/previews/team-app/access/?next=%2Fa%3Fb%3D1"
    )


def test_a_member_is_sent_back_with_a_token_that_becomes_a_cookie(gateway, members_preview):
    owner_id = Member.objects.get(workspace_id=members_preview.workspace_id).user_id
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = http.get("/previews/team-app/access/", params={"next": "/app/page?x=1"})
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    where, token, next_path = hand_off(response.text)
    assert where == "http://team-app.preview.localhost:8000/__calvin/access" and next_path == "/app/page?x=1"
    value = access_exchange(name="team-app", token=token)
    assert value and value != token
    route = preview_route(name="team-app")
    assert access_cookie_valid(route=route, value=value)
    assert signing.loads(value, salt=access.COOKIE_SALT) == {"p": members_preview.id, "u": owner_id}
    # Once only.
    assert access_exchange(name="team-app", token=token) is None
    # The token is no cookie, nor the cookie a token.
    assert not access_cookie_valid(route=route, value=token)
    assert access_exchange(name="team-app", token=value) is None


def test_a_member_of_another_workspace_is_refused(gateway, members_preview, stranger):
    with logged_in(gateway, "stranger", STRANGER_PASSWORD) as http:
        response = http.get("/previews/team-app/access/", params={"next": "/"})
    assert response.status_code == 403 and "members of its workspace only" in response.text
    # A token made for them anyway is refused at the exchange, and their cookie is not valid.
    token = access_token_make(preview_id=members_preview.id, user_id=stranger.id)
    assert access_exchange(name="team-app", token=token) is None
    forged = signing.dumps({"p": members_preview.id, "u": stranger.id}, salt=access.COOKIE_SALT)
    assert not access_cookie_valid(route=preview_route(name="team-app"), value=forged)


def test_logged_out_goes_to_the_login_first(gateway, members_preview):
    import httpx2

    response = httpx2.get(f"{gateway}/previews/team-app/access/?next=/x", timeout=10)
    assert response.status_code == 302 and response.headers["location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("bad", ["//evil.example/x", "https://evil.example/", "x", "/\\evil", ""])
def test_next_must_be_a_path_with_one_slash(gateway, members_preview, bad):
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = http.get("/previews/team-app/access/", params={"next": bad})
    assert response.status_code == 400 and "single /" in response.text


def test_no_live_preview_is_404(gateway, members_preview):
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert http.get("/previews/ghost/access/").status_code == 404
        assert http.get("/previews/Not_A_Label/access/").status_code == 404
        Preview.objects.filter(id=members_preview.id).update(removed_at="2026-01-01T00:00Z")
        assert http.get("/previews/team-app/access/").status_code == 404


def test_a_token_is_only_good_for_its_preview_its_minute_and_a_live_preview(members_preview, workspace):
    owner_id = Member.objects.get(workspace=workspace).user_id
    other = preview_of(members_preview.session, "other-app", access=Preview.Access.MEMBERS)
    token = access_token_make(preview_id=other.id, user_id=owner_id)
    assert access_exchange(name="team-app", token=token) is None  # another preview's
    assert access_exchange(name="team-app", token="garbage") is None
    stale = access_token_make(preview_id=members_preview.id, user_id=owner_id)
    real_time = time.time
    try:
        time.time = lambda: real_time() + access.TOKEN_SECONDS + 1
        assert access_exchange(name="team-app", token=stale) is None
    finally:
        time.time = real_time
    fresh = access_token_make(preview_id=members_preview.id, user_id=owner_id)
    Preview.objects.filter(id=members_preview.id).update(removed_at="2026-01-01T00:00Z")
    assert access_exchange(name="team-app", token=fresh) is None


def test_the_cookie_ends_with_the_membership_its_age_or_its_preview(members_preview, workspace, settings):
    owner = Member.objects.get(workspace=workspace)
    value = access_exchange(
        name="team-app", token=access_token_make(preview_id=members_preview.id, user_id=owner.user_id)
    )
    route = preview_route(name="team-app")
    assert access_cookie_valid(route=route, value=value)
    settings.CALVIN_PREVIEW_ACCESS_SECONDS = -1
    assert not access_cookie_valid(route=route, value=value)
    settings.CALVIN_PREVIEW_ACCESS_SECONDS = 3600
    # A new preview of the same name is another preview: the old cookie opens nothing there.
    Preview.objects.filter(id=members_preview.id).update(removed_at="2026-01-01T00:00Z")
    again = preview_of(members_preview.session, "team-app", access=Preview.Access.MEMBERS)
    assert not access_cookie_valid(route=preview_route(name="team-app"), value=value)
    assert again.id != members_preview.id
    # Removed from the workspace: refused once the short membership cache has passed.
    from django.core.cache import cache

    Preview.objects.filter(id=again.id).delete()
    Preview.objects.filter(id=members_preview.id).update(removed_at=None)
    route = preview_route(name="team-app")
    assert access_cookie_valid(route=route, value=value)
    owner.user.is_active = False
    owner.user.save()
    cache.delete(f"preview-member:{workspace.id}:{owner.user_id}")
    assert not access_cookie_valid(route=route, value=value)
