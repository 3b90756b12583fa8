"""The web channel in real Chromium: log in, start a session, watch the agent's card and image arrive live."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from sessions.models import Message, Session
from sessions.services import runner_start
from tests.conftest import Agent, text_of
from tests.dashboard.conftest import CARD, OWNER_PASSWORD, PNG_1X1, off_the_loop

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Run the nightly build and report back"


def test_the_agents_card_and_image_appear_live_without_a_reload(gateway, celery_worker, workspace, page):
    page.goto(f"{gateway}/")
    expect(page).to_have_url(f"{gateway}/accounts/login/?next=/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", OWNER_PASSWORD)
    page.click("button:text-is('Log in')")
    expect(page).to_have_url(f"{gateway}/w/acme/")

    page.fill("#id_prompt", PROMPT)
    page.click("button:text-is('Start')")
    expect(page).to_have_url(re.compile(rf"^{re.escape(gateway)}/threads/\d+/$"))
    thread_id = int(re.search(r"/threads/(\d+)/$", page.url).group(1))
    expect(page.locator("#messages .msg.person")).to_contain_text(PROMPT)
    page.wait_for_selector("#live-status[data-state=live]")
    page.evaluate("window.__marker = 1")

    # The agent of the very session the browser shows.
    session = Session.objects.select_related("thread", "owner__user").get(thread_id=thread_id)
    assert session.workspace_id == workspace.id and session.owner.user.username == "owner"
    runner, token = runner_start(session=session)
    agent = Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    (Path(session.directory) / "build-time.png").write_bytes(PNG_1X1)

    result = off_the_loop(agent.call, "post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    result = off_the_loop(
        agent.call, "send_file", {"path": "build-time.png", "comment": "Build time", "alt_text": "Build time graph"}
    )
    assert not result.is_error, text_of(result)

    card = page.locator("#messages .msg.agent[data-kind=card] .card")
    expect(card.locator("h3")).to_have_text("Nightly build report")
    expect(card.locator("table.grid th")).to_have_text(["Suite", "Passed", "Failed"])
    expect(card.locator("table.grid tr").nth(1).locator("td")).to_have_text(["api", "412", "0"])
    expect(card.locator("table.grid tr").nth(2).locator("td")).to_have_text(["web", "198", "1"])
    expect(card.locator(".fields > div")).to_have_text(["Branch release-7", "Duration 14m 02s"], use_inner_text=True)
    expect(card.locator("figure figcaption")).to_have_text(["Minutes per suite", "Build minutes this week"])
    expect(card.locator("figure svg rect")).to_have_count(2)
    expect(card.locator("figure svg polyline")).to_have_count(1)
    button = card.locator("a.button")
    expect(button).to_have_text("Open the logs")
    expect(button).to_have_attribute("href", "https://ci.example.com/runs/4711")

    file_message = page.locator("#messages .msg.agent[data-kind=file]")
    expect(file_message).to_contain_text("Build time")
    image = file_message.locator("img.inline")
    expect(image).to_have_attribute("alt", "Build time graph")
    image_message = Message.objects.get(thread_id=thread_id, kind=Message.Kind.FILE)  # pushed after its commit
    expect(image).to_have_attribute("src", f"/threads/{thread_id}/files/{image_message.id}/")
    # The browser fetched the file through the view and decoded it as the 1x1 PNG.
    page.wait_for_function("(img) => img.complete && img.naturalWidth === 1", arg=image.element_handle())

    # Each message shows once, the person's prompt is still there, and the page never reloaded.
    expect(page.locator("#messages .msg")).to_have_count(3)
    assert page.evaluate("window.__marker") == 1


def test_the_thread_page_shows_notices_not_its_messages_above_the_thread(gateway, celery_worker, workspace, page):
    """The thread's messages once, in the thread; above it only Django's notices (a Stop's outcome)."""
    page.goto(f"{gateway}/accounts/login/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", OWNER_PASSWORD)
    page.click("button:text-is('Log in')")
    page.fill("#id_prompt", PROMPT)
    page.click("button:text-is('Start')")
    expect(page.locator("#messages .msg.person")).to_contain_text(PROMPT)
    page.reload()
    expect(page.locator("#messages .msg")).to_have_count(1)
    expect(page.locator("main ul.notices")).to_have_count(0)

    page.click("#stop-agent")
    notices = page.locator("main ul.notices li")
    expect(notices).to_have_count(1)
    expect(notices.first).to_contain_text("Stop:")
    expect(page.locator("#messages .msg.person")).to_have_count(1)
