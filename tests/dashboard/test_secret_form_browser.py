"""request_secret in real Chromium: the card's button opens the private form, the owner types
the value, and it shows up nowhere: not on the page, not in the websocket traffic, not in the thread."""

import pytest
from playwright.sync_api import expect

from secrets_vault.crypto import new_key
from secrets_vault.models import SecretRequest
from secrets_vault.services import session_secrets
from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login, off_the_loop

pytestmark = pytest.mark.django_db(transaction=True)

VALUE = "sk_live_51Hbrowser-typed-Zq9"


def test_the_owner_sets_a_secret_in_the_browser_and_it_leaks_nowhere(agent, page, gateway, settings):
    settings.SP_STORE_KEY = [new_key()]
    thread_id = agent.session.thread_id
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")

    arguments = {"name": "STRIPE_API_KEY", "reason": "To run the billing tests"}
    result = off_the_loop(agent.call, "request_secret", arguments)
    assert not result.is_error, text_of(result)

    card = page.locator("#messages .msg[data-kind=card] .card").last
    expect(card.locator("h3")).to_have_text("Secret requested: STRIPE_API_KEY")
    card.locator("a.button", has_text="Set STRIPE_API_KEY").click()

    field = page.locator("input[name=value]")
    expect(field).to_have_attribute("type", "password")
    expect(field).to_have_attribute("autocomplete", "off")
    field.fill(VALUE)
    page.click("button:text-is('Set STRIPE_API_KEY')")
    expect(page.locator("p[role=status]")).to_have_text("STRIPE_API_KEY was set by owner.")
    assert VALUE not in page.content()
    assert page.locator("input[name=value]").count() == 0

    page.goto(f"{gateway}/threads/{thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")
    card = page.locator("#messages .msg[data-kind=card] .card").last
    expect(card.locator("p.note")).to_contain_text("STRIPE_API_KEY was set by owner")
    expect(card.locator("a.button")).to_have_count(0)
    expect(page.locator("#messages")).to_contain_text("The secret STRIPE_API_KEY was set by owner")
    assert VALUE not in page.content()

    session = agent.session
    stored = session_secrets(session_id=session.id, workspace_id=session.workspace_id)
    assert [(row.name, value) for row, value in stored] == [("STRIPE_API_KEY", VALUE)]
    assert SecretRequest.objects.get(session=session).status == SecretRequest.Status.SET
    assert frames, "the thread page received live events"
    assert not [frame for frame in frames if VALUE in frame]
    wait_for(lambda: Message.objects.filter(thread_id=thread_id).exists())
    assert not [m for m in Message.objects.filter(thread_id=thread_id) if VALUE in f"{m.text}{m.card}"]
