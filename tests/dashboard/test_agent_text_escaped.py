"""Whatever an agent writes is text: every card prop and chart label is escaped, in the HTML and in the SVG."""

import re

import pytest
from django.utils.html import escape
from playwright.sync_api import expect

from calvin.dashboard.events import message_event, thread_broadcast
from sessions.models import Message
from sessions.services import session_start
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login

XSS = "'\"><img src=x onerror=alert(1)>"
ESCAPED = escape(XSS)  # &#x27;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;


def hostile_card() -> list[dict]:
    """A stored card (the shape tools/card_spec/layout.py makes) with the payload in every text prop and label.

    Written directly: the spec's length bounds would keep it out of a chart label, and escaping must
    not depend on them.
    """
    field = {"kind": "field", "label": XSS, "value": XSS}
    series = {"name": XSS, "points": [{"label": XSS, "value": 3}, {"label": XSS, "value": 5}]}
    return [
        {"kind": "header", "text": XSS},  # the Card's title
        {"kind": "header", "text": XSS},  # a Heading
        {"kind": "text", "text": XSS},
        {"kind": "fields", "items": [field]},
        {"kind": "table", "columns": [XSS, XSS], "rows": [[XSS, XSS]]},
        {"kind": "chart", "style": "bar", "title": XSS, "series": [series]},
        {"kind": "chart", "style": "line", "title": XSS, "series": [series]},
        {"kind": "buttons", "items": [{"kind": "button", "label": XSS, "url": "https://ci.example.com/"}]},
    ]


# Where the payload shows: 2 headers, text, field label and value, 2 columns, 2 cells, 2 chart
# captions, the button (12); and in each of the 2 SVG charts (calvin/dashboard/svg_charts.py) 9: its
# <title> and title text, the x label (both points share it), the y axis label (a single series
# names it), the series' data-series, and 2 hover titles naming series and label each: 30.
ESCAPED_PLACES = 30


def hostile_messages(thread) -> list[Message]:
    card = Message.objects.create(
        thread=thread, kind=Message.Kind.CARD, author=Message.Author.AGENT, card=hostile_card()
    )
    text = Message.objects.create(thread=thread, author=Message.Author.AGENT, text=XSS + "\nsecond line")
    return [card, text]


def assert_only_escaped(html: str, places: int) -> None:
    assert "<img" not in html and "onerror=alert(1)>" not in html
    assert html.count(ESCAPED) == places
    svgs = re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
    assert len(svgs) == 2
    for svg in svgs:
        assert "<img" not in svg and ESCAPED in svg


@pytest.mark.django_db
def test_the_thread_page_and_live_events_show_agent_text_escaped(client, workspace, owner_member):
    session = session_start(workspace=workspace, owner=owner_member, title="hostile")
    card, text = hostile_messages(session.thread)
    client.force_login(owner_member.user)
    page = client.get(f"/threads/{session.thread_id}/").content.decode()
    assert_only_escaped(page, ESCAPED_PLACES + 1)  # + the text message
    assert f"<p>{ESCAPED}<br>second line</p>" in page

    assert_only_escaped(message_event(card)["html"], ESCAPED_PLACES)  # what the websocket pushes
    assert f"<p>{ESCAPED}<br>second line</p>" in message_event(text)["html"]


@pytest.mark.django_db(transaction=True)
def test_no_agent_markup_runs_in_chromium_even_without_the_policy(gateway, workspace, owner_member, browser):
    """The CSP would block an inline handler anyway: bypass it, so escaping alone is what is tested."""
    session = session_start(workspace=workspace, owner=owner_member, title="hostile")
    hostile_messages(session.thread)
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")

    # And once more, pushed live (inserted as HTML by the page's script).
    live = Message.objects.create(
        thread=session.thread, kind=Message.Kind.CARD, author=Message.Author.AGENT, card=hostile_card()
    )
    thread_broadcast(live)
    page.wait_for_selector(f"#message-{live.id}")
    page.wait_for_timeout(300)  # a broken image's error event would have fired by now
    assert dialogs == []

    cards = page.locator(".msg[data-kind=card] .card")
    expect(cards).to_have_count(2)
    for i in range(2):
        card = cards.nth(i)
        expect(card.locator("h3")).to_have_text([XSS, XSS])
        expect(card.locator("table.grid th")).to_have_text([XSS, XSS])
        expect(card.locator("figure figcaption")).to_have_text([XSS, XSS])
        expect(card.locator("figure svg text").first).to_have_text(XSS)
        expect(card.locator("a.button")).to_have_text(XSS)
    assert page.locator("img").count() == 0 and page.locator("[onerror]").count() == 0
    context.close()
