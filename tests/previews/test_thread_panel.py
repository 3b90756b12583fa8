"""The thread page's previews panel, over real HTTP and in Chromium: the session's owner and the
workspace's admins take a preview down and choose who may open it and until when; other members
see the links; another workspace's people see nothing of it."""

from pathlib import Path

import pytest
from django.utils import timezone

from calvin.audit.models import AuditEvent
from calvin.previews.models import Preview
from calvin.workspaces.models import Member
from sessions.services import session_start
from tests.dashboard.conftest import (
    MEMBER_PASSWORD,
    OWNER_PASSWORD,
    STRANGER_PASSWORD,
    browser_login,
    csrf_token_in,
    logged_in,
    other_workspace,  # noqa: F401 (fixtures)
    plain_member,  # noqa: F401
)
from tests.previews.support import preview_of

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture
def session(workspace):
    return session_start(workspace=workspace, owner=Member.objects.get(workspace=workspace), title="Landing page")


@pytest.fixture
def previews(session):
    return [
        preview_of(session, "landing", port=5173),
        preview_of(session, "landing-api", port=8000, access=Preview.Access.MEMBERS),
        preview_of(session, "gone", port=9000, removed_at=timezone.now(), removed_reason="unpreview"),
    ]


def test_the_owner_sees_links_and_controls_a_member_links_only(gateway, session, previews, plain_member):  # noqa: F811
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        page = http.get(f"/threads/{session.thread_id}/").text
    assert 'href="http://landing.preview.localhost:8000/"' in page and "landing-api" in page
    assert "gone.preview" not in page  # ended: not listed
    assert "Take down" in page and "workspace members only" in page
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        page = http.get(f"/threads/{session.thread_id}/").text
        assert 'href="http://landing.preview.localhost:8000/"' in page
        assert "Take down" not in page and 'name="access"' not in page
        token = csrf_token_in(page)
        refused = http.post(f"/previews/{previews[0].id}/take-down/", data={"csrfmiddlewaretoken": token})
        assert refused.status_code == 403
    assert Preview.objects.get(id=previews[0].id).removed_at is None


def test_another_workspace_sees_nothing_and_changes_nothing(gateway, session, previews, other_workspace):  # noqa: F811
    with logged_in(gateway, "stranger", STRANGER_PASSWORD) as http:
        assert http.get(f"/threads/{session.thread_id}/").status_code == 404
        token = csrf_token_in(http.get("/", follow_redirects=True).text)
        data = {"csrfmiddlewaretoken": token, "access": "members", "expires": "none"}
        assert http.post(f"/previews/{previews[0].id}/take-down/", data=data).status_code == 404
        assert http.post(f"/previews/{previews[0].id}/settings/", data=data).status_code == 404
    assert Preview.objects.get(id=previews[0].id).is_live()
    assert Preview.objects.get(id=previews[0].id).access == "anyone"


def test_a_post_without_its_csrf_token_is_refused(gateway, session, previews):
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert http.post(f"/previews/{previews[0].id}/take-down/").status_code == 403
    assert Preview.objects.get(id=previews[0].id).is_live()


def test_in_chromium_the_owner_limits_one_and_takes_the_other_down(gateway, session, previews, page):
    page.set_viewport_size({"width": 1100, "height": 900})
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    panel = page.locator("#previews")
    assert panel.locator("h3").inner_text() == "Previews"
    landing = page.locator("#preview-landing")
    assert landing.locator(".preview-link").inner_text() == "http://landing.preview.localhost:8000/"
    assert "port 5173" in landing.inner_text() and "anyone with the URL" in landing.inner_text()
    assert "workspace members only" in page.locator("#preview-landing-api .preview-access").inner_text()
    # The panel sits between the thread's header and its messages, its controls on one line with the link.
    header = page.locator("#thread-header").bounding_box()
    box = panel.bounding_box()
    assert header["y"] + header["height"] <= box["y"] < page.locator("#messages").bounding_box()["y"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(SCREENSHOTS / "thread-previews.png"))
    page.screenshot(path=str(SCREENSHOTS / "thread-previews-page.png"), full_page=True)

    landing.locator("select[name=access]").select_option("members")
    landing.locator("select[name=expires]").select_option("1d")
    landing.locator("button.preview-save").click()
    page.wait_for_selector("text=Preview landing: changed access and expiry.")
    landing = page.locator("#preview-landing")
    assert "workspace members only" in landing.inner_text() and "until" in landing.inner_text()
    changed = Preview.objects.get(id=previews[0].id)
    assert changed.access == "members" and changed.expires_at > timezone.now()

    page.locator("#preview-landing-api button:text-is('Take down')").click()
    page.wait_for_selector("text=Preview landing-api taken down.")
    assert page.locator("#preview-landing-api").count() == 0
    assert page.locator("#preview-landing").count() == 1
    assert Preview.objects.get(id=previews[1].id).removed_reason == "taken_down"
    assert AuditEvent.objects.filter(verb="preview.remove", via="web", actor_label="owner").count() == 1
    assert AuditEvent.objects.filter(verb="preview.change", via="web").count() == 1


def test_the_panel_follows_the_sessions_previews_live_for_each_viewer(
    gateway,
    session,
    page,
    plain_member,  # noqa: F811
):
    """An open thread page shows a preview the agent makes, a change of who may open it and its
    end without a reload; a plain member's copy shows the link without the owner's controls."""
    from sessions.services import runner_start
    from tools.caller import caller_for_token
    from tools.services.previews import preview_end, preview_record

    _, token = runner_start(session=session)
    caller = caller_for_token(token)
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    page.wait_for_selector("#messages[data-live-seq]", state="attached")
    assert page.locator("#previews").count() == 0

    preview_record(caller=caller, port=5173, name="made-live", listening=True)
    link = page.locator("#preview-made-live .preview-link")
    link.wait_for()
    assert link.inner_text() == "http://made-live.preview.localhost:8000/"
    assert page.locator("#preview-made-live button:text-is('Take down')").count() == 1  # the owner's controls

    member = page.context.browser.new_context().new_page()
    browser_login(member, gateway, "member", MEMBER_PASSWORD)
    member.goto(f"{gateway}/threads/{session.thread_id}/")
    member.wait_for_selector("#messages[data-live-seq]", state="attached")
    preview_record(caller=caller, port=8000, name="second", listening=False)
    member.locator("#preview-second").wait_for()
    assert member.locator("#previews button").count() == 0  # links only, for a plain member

    preview_end(preview_id=Preview.objects.get(name="made-live").id, reason="unpreview")
    page.locator("#preview-made-live").wait_for(state="detached")
    member.locator("#preview-made-live").wait_for(state="detached")
    assert page.locator("#preview-second").count() == 1
    preview_end(preview_id=Preview.objects.get(name="second").id, reason="unpreview")
    page.locator("#previews").wait_for(state="detached")  # no live preview: no panel
