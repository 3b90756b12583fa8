"""ask_user_question in real Chromium: the card arrives live, a click answers, the waiting call returns its value."""

import pytest
from playwright.sync_api import expect

from tests.conftest import text_of
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login
from tests.tools.test_ask_user_question import ask
from tools.models import Question

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = [
    {"label": "Ship it", "selectedLabel": "Shipped ✓", "value": "ship-7"},
    {"label": "Wait a day", "value": "wait"},
    "Cancel",
]


def test_a_click_in_the_browser_answers_the_waiting_call(agent, page, gateway):
    thread_id = agent.session.thread_id
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")
    page.evaluate("window.__marker = 1")

    future = ask(agent, title="Release 7", question="Ship release 7 to production now?", options=OPTIONS, timeout=60)

    card = page.locator("#messages .msg.agent[data-kind=card] .card")
    expect(card.locator("h3")).to_have_text("Release 7")
    expect(card).to_contain_text("Ship release 7 to production now?")
    choices = card.locator("form.actions button")
    expect(choices).to_have_text(["Ship it", "Wait a day", "Cancel"])
    assert not future.done()

    card.locator("form.actions button", has_text="Ship it").click()

    result = future.result(timeout=20)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "ship-7"
    # The card is replaced live: the chosen button reads its selectedLabel, none can be pressed again.
    expect(choices).to_have_text(["Shipped ✓", "Wait a day", "Cancel"])
    for i in range(3):
        expect(choices.nth(i)).to_be_disabled()
    expect(card.locator("p.note")).to_have_text("Answered by owner")
    question = Question.objects.get(tool_call__session=agent.session)
    assert (question.status, question.answer_index, question.answered_by.user.username) == ("answered", 0, "owner")
    assert page.evaluate("window.__marker") == 1  # no reload: it all came over the websocket
