"""Previews in Chromium, as a person opens them: on an origin of their own, which the
dashboard's cookies never reach, and, when members-only, behind Calvin's own login."""

import pytest

from calvin.previews.models import Preview
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login
from tests.previews.support import preview_of
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)
SHOTS = "docs/screenshots"


def local(gateway: str) -> str:
    """The gateway as `up` prints it: localhost, whose cookies are the dashboard's."""
    return gateway.replace("127.0.0.1", "localhost")


def test_the_dashboards_cookies_never_reach_a_preview(gateway, seated, upstream, page, settings):
    session, _, _ = seated
    settings.CALVIN_PUBLIC_URL = local(gateway)
    preview_of(session, "demo", port=upstream.port)
    browser_login(page, local(gateway), "owner", OWNER_PASSWORD)
    names = {cookie["name"] for cookie in page.context.cookies()}
    assert {"sessionid", "csrftoken"} <= names  # logged in on the dashboard's origin

    port = gateway.rsplit(":", 1)[1]
    page.goto(f"http://demo.preview.localhost:{port}/")
    assert page.locator("h1").inner_text() == "hello from the sandbox"
    page.screenshot(path=f"{SHOTS}/preview-page.png")
    seen = upstream.seen[-1]["headers"]
    assert "sessionid" not in seen.get("cookie", "") and "csrftoken" not in seen.get("cookie", "")
    assert seen["host"] == f"localhost:{upstream.port}"


def test_a_members_only_preview_opens_after_calvins_login(gateway, seated, upstream, page, settings):
    session, _, _ = seated
    settings.CALVIN_PUBLIC_URL = local(gateway)
    preview_of(session, "private", port=upstream.port, access=Preview.Access.MEMBERS)
    port = gateway.rsplit(":", 1)[1]

    page.goto(f"http://private.preview.localhost:{port}/")
    assert page.url.startswith(f"{local(gateway)}/accounts/login/")  # Calvin's own origin asks
    page.fill("#id_username", "owner")
    page.fill("#id_password", OWNER_PASSWORD)
    page.click("button:text-is('Log in')")
    page.wait_for_url(f"http://private.preview.localhost:{port}/")
    assert page.locator("h1").inner_text() == "hello from the sandbox"
    access = [c for c in page.context.cookies() if c["name"] == "calvin_preview_access"]
    assert len(access) == 1 and access[0]["domain"] == "private.preview.localhost"  # host-only
    assert access[0]["httpOnly"]
    seen = upstream.seen[-1]["headers"]
    assert "calvin_preview_access" not in seen.get("cookie", "")


def test_a_preview_whose_server_stopped_says_so(gateway, seated, page, settings):
    session, _, _ = seated
    settings.CALVIN_PUBLIC_URL = local(gateway)
    port = free_port()  # nothing listens there
    preview_of(session, "stopped", port=port)
    response = page.goto(f"http://stopped.preview.localhost:{gateway.rsplit(':', 1)[1]}/")
    assert response.status == 502
    assert page.locator("h1").inner_text() == "The preview's server is not running"
    assert f"Nothing listens on port {port}" in page.locator("body").inner_text()
    page.screenshot(path=f"{SHOTS}/preview-not-running.png")
