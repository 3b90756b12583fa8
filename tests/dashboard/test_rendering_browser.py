"""The thread page in real Chromium: mrkdwn renders and an agent's <script> stays text, chart cards
have axes and a legend, a chosen send_card button is marked after a reload, times are the reader's."""

import os
import re
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login, off_the_loop
from tests.dashboard.test_rendering import CHOICE_CARD

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("CALVIN_VAR_DIR", "var")) / "screenshots"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
TEXT = (
    "*Deployed* _release 7_ ~yesterday~: <https://ci.example.com/runs/4711|the run>, logs at https://ci.example.com/l\n"
    "```\nnpm test -- --grep '*fast*' <b>\n```\n" + HOSTILE
)


def open_thread(page, gateway, thread_id: int) -> None:
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")


def assert_rendered(message) -> None:
    expect(message.locator("strong")).to_have_text("Deployed")
    expect(message.locator("em")).to_have_text("release 7")
    expect(message.locator("del")).to_have_text("yesterday")
    run = message.locator('a[href="https://ci.example.com/runs/4711"]')
    expect(run).to_have_text("the run")
    expect(run).to_have_attribute("rel", "noopener noreferrer")
    expect(message.locator('a[href="https://ci.example.com/l"]')).to_have_attribute("rel", "noopener noreferrer")
    expect(message.locator("pre")).to_have_text("npm test -- --grep '*fast*' <b>")
    expect(message).to_contain_text(HOSTILE)  # shown as the text it is


def test_mrkdwn_renders_and_an_agents_script_stays_text(agent, browser, gateway):
    """Without the CSP (bypassed), so escaping alone is what keeps the script from running."""
    before = Message.objects.create(thread=agent.session.thread, author=Message.Author.AGENT, text=TEXT)
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    open_thread(page, gateway, agent.session.thread_id)
    scripts = page.evaluate("document.scripts.length")

    assert_rendered(page.locator(f"#message-{before.id}"))
    # And an agent's send_message, pushed live and inserted by the page's script.
    sent = off_the_loop(agent.nanoclaw.call, "send_message", {"text": TEXT, "to": "thread"})
    assert not sent.is_error, text_of(sent)
    live = page.locator(f"#message-{sent.structured_content['messageId']}")
    assert_rendered(live)

    assert page.evaluate("document.scripts.length") == scripts
    assert page.evaluate("document.querySelectorAll('#messages script, #messages img').length") == 0
    assert page.evaluate("window.__pwned") is None
    context.close()


def points(*values) -> list[dict]:
    return [
        {"label": day, "value": value} for day, value in zip(("Mon", "Tue", "Wed", "Thu", "Fri"), values, strict=False)
    ]  # web has no Friday


CHART_CARD = {
    "root": "card",
    "elements": {
        "card": {"type": "Card", "props": {"title": "Build times"}, "children": ["trend", "suites"]},
        "trend": {
            "type": "Chart",
            "props": {
                "kind": "line",
                "title": "Minutes per day",
                "series": [
                    {"name": "api", "points": points(9, 11, 8, 14, 10)},
                    {"name": "web", "points": points(5, 6, 9, 7)},
                ],
            },
        },
        "suites": {
            "type": "Chart",
            "props": {
                "kind": "bar",
                "title": "Tests per suite",
                "series": [
                    {"name": "tests", "points": [{"label": "api", "value": 412}, {"label": "web", "value": 198}]}
                ],
            },
        },
    },
}


def test_a_chart_card_shows_axes_values_and_a_legend(agent, page, gateway):
    result = off_the_loop(agent.call, "post_card", {"spec": CHART_CARD})
    assert not result.is_error, text_of(result)
    message = wait_for(lambda: Message.objects.filter(tool_call_id=result.structured_content["tool_call_id"]).first())
    open_thread(page, gateway, agent.session.thread_id)

    card = page.locator(f"#message-{message.id} .card")
    line, bars = card.locator("figure.chart svg").nth(0), card.locator("figure.chart svg").nth(1)
    expect(card.locator("figcaption")).to_have_text(["Minutes per day", "Tests per suite"])
    for chart in (line, bars):
        expect(chart.locator("g.axes")).to_have_count(1)
        assert chart.locator("text.y-tick").count() >= 3
    expect(line.locator("text.x-tick")).to_have_text(["Mon", "Tue", "Wed", "Thu", "Fri"])
    expect(line.locator("g.legend-item")).to_have_text(["api", "web"])
    expect(line.locator("circle.point title").first).to_have_text("api · Mon · 9")
    expect(bars.locator("text.value")).to_have_text(["412", "198"])
    expect(bars.locator("text.axis-label")).to_have_text("tests")  # a single series names its axis
    # The SVG's own title is hidden: the figure's caption says it once.
    expect(line.locator("text.chart-title")).to_be_hidden()
    SHOTS.mkdir(parents=True, exist_ok=True)
    card.screenshot(path=str(SHOTS / "p5-card-charts.png"))


def test_a_chosen_send_card_button_is_marked_after_a_reload(agent, page, gateway):
    result = off_the_loop(agent.nanoclaw.call, "send_card", {"card": CHOICE_CARD})
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: Message.objects.filter(tool_call_id=call_id, delivered_at__isnull=False).exists())
    open_thread(page, gateway, agent.session.thread_id)

    card = page.locator(".msg[data-kind=card] .card", has_text="Release 7.1")
    card.locator("form.actions button", has_text="Deploy").click()
    expect(card.locator(".action-result")).to_have_text("Sent to the agent: you chose Deploy")
    # Live, before any reload: the card is shown again with the choice marked and who chose it,
    # and the answer and the spent buttons stay.
    expect(card.locator("p.note.choices")).to_have_text(re.compile(r"^Chosen: Deploy by \S+"))
    expect(card.locator("button", has_text="Deploy")).to_have_class(re.compile(r"\bpicked\b"))
    expect(card.locator(".action-result")).to_have_text("Sent to the agent: you chose Deploy")
    expect(card.locator("button", has_text="Hold")).to_be_disabled()

    page.reload()
    card = page.locator(".msg[data-kind=card] .card", has_text="Release 7.1")
    deploy, hold = card.locator("button", has_text="Deploy"), card.locator("button", has_text="Hold")
    expect(deploy).to_have_class(re.compile(r"\bchosen\b"))
    expect(deploy).to_have_attribute("aria-pressed", "true")
    expect(hold).not_to_have_class(re.compile(r"\bchosen\b"))
    expect(deploy).to_be_disabled()
    expect(hold).to_be_disabled()
    expect(card.locator("p.note.choices")).to_have_text("Chosen: Deploy by you.")
    SHOTS.mkdir(parents=True, exist_ok=True)
    card.screenshot(path=str(SHOTS / "p5-card-chosen.png"))


def test_times_show_in_the_readers_time_zone(agent, browser, gateway):
    earlier = Message.objects.create(thread=agent.session.thread, author=Message.Author.AGENT, text="earlier")
    Message.objects.filter(id=earlier.id).update(created_at=datetime(2026, 12, 2, 14, 2, 59, tzinfo=UTC))
    context = browser.new_context(timezone_id="Asia/Tokyo")
    page = context.new_page()
    page.set_default_timeout(15_000)
    open_thread(page, gateway, agent.session.thread_id)

    shown = page.locator(f"#message-{earlier.id} .meta time")
    expect(shown).to_have_text("2 Dec 2026, 23:02")  # 14:02 UTC is 23:02 in Tokyo
    expect(shown).to_have_attribute("datetime", "2026-12-02T14:02:59Z")
    expect(shown).to_have_attribute("title", re.compile(r"^Wed,? 2 Dec 2026,? 23:02:59 (GMT\+9|JST)$"))

    # A message that arrives live is rewritten too.
    sent = off_the_loop(agent.nanoclaw.call, "send_message", {"text": "now", "to": "thread"})
    assert not sent.is_error, text_of(sent)
    live = page.locator(f"#message-{sent.structured_content['messageId']} .meta time")
    expect(live).to_have_attribute("data-local", re.compile(r"Z$"))
    created = Message.objects.get(id=sent.structured_content["messageId"]).created_at
    tokyo = created.astimezone(ZoneInfo("Asia/Tokyo"))
    expect(live).to_have_text(f"{tokyo.day} {tokyo:%b %Y, %H:%M}")
    context.close()
