"""The pages under a strict Content-Security-Policy, in real Chromium: no inline script or style, nothing blocked."""

import pytest
from playwright.sync_api import expect

from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import CARD, OWNER_PASSWORD, browser_login, off_the_loop

pytestmark = pytest.mark.django_db(transaction=True)

# Runs before the page's own scripts (Playwright injects it past the CSP): record every violation.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""


def expect_the_whole_card(card) -> None:
    expect(card.locator("h3")).to_have_text("Nightly build report")
    expect(card.locator(".fields > div")).to_have_text(["Branch release-7", "Duration 14m 02s"], use_inner_text=True)
    expect(card.locator("table.grid th")).to_have_text(["Suite", "Passed", "Failed"])
    expect(card.locator("figure svg rect")).to_have_count(2)
    expect(card.locator("figure svg polyline")).to_have_count(1)
    expect(card.locator("a.button")).to_have_text("Open the logs")
    # The charts really drew: inline SVG with its presentation attributes is not blocked.
    assert card.locator("figure svg").first.bounding_box()["height"] > 0
    assert card.locator("figure svg rect").first.bounding_box()["width"] > 0


def test_a_thread_page_with_a_full_card_works_under_the_policy(gateway, agent, page):
    result = off_the_loop(agent.call, "post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    wait_for(lambda: Message.objects.filter(tool_call_id=result.structured_content["tool_call_id"]).exists())

    console = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(RECORD_VIOLATIONS)
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    response = page.goto(f"{gateway}/threads/{agent.session.thread_id}/")

    policy = dict(
        part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";") if part.strip()
    )
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["default-src"] == "'self'" and policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'" and policy["base-uri"] == "'none'"
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert page.locator("script:not([src])").count() == 0 and page.locator("style").count() == 0

    # The stylesheet applied, the script ran (the socket is live), the rendered card is whole.
    assert page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor") == "rgb(36, 41, 47)"
    page.wait_for_selector("#live-status[data-state=live]")
    cards = page.locator("#messages .msg.agent[data-kind=card] .card")
    expect_the_whole_card(cards.nth(0))

    # A card pushed live over the websocket renders the same, still without a violation.
    result = off_the_loop(agent.call, "post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    expect(cards).to_have_count(2)
    expect_the_whole_card(cards.nth(1))

    assert page.evaluate("window.__violations") == []
    assert [text for text in console if "Content Security Policy" in text] == []


def test_the_login_page_and_home_page_have_the_policy_and_no_violation(gateway, workspace, page):
    page.add_init_script(RECORD_VIOLATIONS)
    response = page.goto(f"{gateway}/accounts/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    assert page.evaluate("getComputedStyle(document.querySelector('.panel')).borderRadius") == "6px"
    assert page.evaluate("window.__violations") == []


def test_the_admin_works_under_the_policy(gateway, agent, django_user_model, page):
    django_user_model.objects.create_superuser("root", password="pw-admin-123")
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw-admin-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")
    for path in (
        "/admin/",
        "/admin/agent_sessions/session/",
        f"/admin/agent_sessions/session/{agent.session.id}/change/",
        "/admin/agent_sessions/runner/",
        "/admin/workspaces/workspace/add/",
    ):
        response = page.goto(f"{gateway}{path}")
        assert response.status == 200 and "script-src 'self'" in response.headers["content-security-policy"], path
        assert page.evaluate("window.__violations") == [], path
