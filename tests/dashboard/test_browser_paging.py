"""Long threads in real Chromium: a page that missed more than one catch-up holds reloads to the latest page."""

import pytest
from playwright.sync_api import expect

from sessions.models import Message
from tests.dashboard.conftest import OWNER_PASSWORD, announced_message, browser_login

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_page_that_missed_too_much_reloads_and_shows_the_latest_messages(gateway, make_agent, page):
    thread_id = make_agent().session.thread_id
    Message.objects.create(thread_id=thread_id, author=Message.Author.AGENT, text="shown when the page rendered")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)

    missed = []

    def post_a_lot_before_the_script_runs(route):
        # Between the page's render and its socket's catch-up, 101 messages arrive: more than one answer holds.
        if not missed:
            missed.extend(announced_message(thread_id, f"missed {i}") for i in range(101))
        route.continue_()

    page.route("**/static/dashboard/thread.js", post_a_lot_before_the_script_runs)
    loads = []
    page.on("load", lambda _: loads.append(page.url))
    page.goto(f"{gateway}/threads/{thread_id}/")

    messages = page.locator("#messages .msg")
    expect(messages.last).to_contain_text("missed 100")
    expect(messages).to_have_count(50)
    expect(messages.first).to_contain_text("missed 51")
    expect(page.locator("#earlier-messages")).to_have_attribute("href", f"?before={missed[51].id}")
    page.wait_for_selector("#live-status[data-state=live]")
    assert loads == [f"{gateway}/threads/{thread_id}/"] * 2  # rendered once, then reloaded once
