"""The thread page as a person reads it in Chromium: the header's facts and state in words, an
external agent's "waiting for your agent" with its .mcp.json, replies sent without a reload,
Stop's notice, and no junk list of the thread's messages above it."""

import json
import re
from pathlib import Path

import httpx2
import pytest
from django.utils import timezone
from playwright.sync_api import expect

from calvin.audit.models import AuditEvent
from calvin.chat.links import public_base
from calvin.workspaces.models import Agent
from calvin.workspaces.services import agent_create
from sessions.models import Host, Message, Runner, Session, Turn
from sessions.services import (
    agent_reply_post,
    inbox_post,
    message_post_by_person,
    runner_start,
    session_start,
    system_notice_post,
)
from tests.conftest import Agent as ExternalAgent
from tests.dashboard.conftest import (
    MEMBER_PASSWORD,
    OWNER_PASSWORD,
    STRANGER_PASSWORD,
    browser_login,
    csrf_token_in,
    logged_in,
    off_the_loop,
)

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _running(session, host_name="build-box-1"):
    """The session's turn as a host runs it (what the scheduler's claim writes)."""
    host = Host.objects.create(name=host_name, token_digest=f"digest-{host_name}", token_hint="hint")
    started = timezone.now().replace(microsecond=0)
    Turn.objects.filter(session=session, status=Turn.Status.QUEUED).update(
        status=Turn.Status.RUNNING, host=host, started_at=started
    )
    Session.objects.filter(id=session.id).update(status=Session.Status.RUNNING, host=host)
    return host, started


def test_the_header_says_agent_provider_mode_host_and_state_in_words(gateway, workspace, owner_member, page):
    agent = agent_create(workspace=workspace, name="builder", provider=Agent.Provider.SCRIPT)
    session = session_start(
        workspace=workspace, owner=owner_member, agent=agent, title="Nightly build", permission_mode="acceptEdits"
    )
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    facts = page.locator("#thread-facts")
    expect(facts.locator("dt")).to_have_text(["Agent", "Provider", "Permissions", "Host"])
    expect(facts.locator("dd")).to_have_text(
        ["builder", "Script", "edits files without asking (acceptEdits)", "not yet on a host"]
    )
    # Nothing to do yet: not "queued", which is the model's default.
    expect(page.locator("#state-words")).to_have_text("waiting for a message")

    message_post_by_person(thread=session.thread, member=owner_member, text="Run the build")
    page.reload()
    expect(page.locator("#state-words")).to_have_text("waiting for a host to start it")

    host, started = _running(session)
    page.reload()
    expect(page.locator("#state-words")).to_have_text("running")
    expect(page.locator("#fact-host")).to_have_text(host.name)
    # The ISO start the live script ticks into elapsed time.
    started_at = page.locator("#turn-started").get_attribute("data-started-at")
    assert started_at == started.isoformat()
    expect(page.locator("#thread-header")).not_to_contain_text("queued")


def test_an_external_agents_thread_waits_for_your_agent_with_its_mcp_json(gateway, workspace, owner_member, page):
    yours = agent_create(workspace=workspace, name="yours", provider=Agent.Provider.EXTERNAL)
    session = session_start(workspace=workspace, owner=owner_member, agent=yours, title="My own agent")
    message_post_by_person(thread=session.thread, member=owner_member, text="Are you there?")  # a queued turn
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    expect(page.locator("#state-words")).to_have_text("waiting for your agent")
    expect(page.locator("#thread-header")).not_to_contain_text("queued")
    expect(page.locator("#fact-provider")).to_have_text("external: you run it")
    expect(page.locator("#fact-host")).to_have_text("wherever you run it")
    expect(page.locator("#stop-agent")).to_have_count(0)  # nothing of it runs in Calvin
    connect = page.locator("#connect-agent")
    expect(connect).to_have_attribute("open", "")
    mcp_json = page.locator("#mcp-json").inner_text()
    base = public_base()
    assert f'"url": "{base}/mcp"' in mcp_json and f'"url": "{base}/mcp/nanoclaw"' in mcp_json
    # No token is shown: Calvin stores only digests; the page says how to make one.
    assert "Bearer <runner token>" in mcp_json and "cvn_" not in page.content()
    expect(connect).to_contain_text(f"python manage.py issue_token {session.id} --mcp-json")

    # A thread it spawned: its own state is the child's (waiting for your agent), linked both ways.
    child = session_start(workspace=workspace, owner=owner_member, agent=yours, title="Write the docs")
    Session.objects.filter(id=child.id).update(parent=session)
    inbox_post(session=child, author=Message.Author.AGENT, sender_agent=yours, text="Write the docs")
    page.goto(f"{gateway}/threads/{child.thread_id}/")
    expect(page.locator("#spawned-from")).to_contain_text("Spawned from My own agent")
    expect(page.locator("#state-words")).to_have_text("waiting for your agent")
    page.click("#spawned-from a")
    expect(page.locator("#spawned-threads")).to_contain_text("Write the docs")


def test_a_spawned_thread_of_a_hosted_agent_shows_its_own_state(gateway, workspace, owner_member, page):
    parent = session_start(workspace=workspace, owner=owner_member, title="Parent", prompt="Plan the release")
    _running(parent)
    child = session_start(workspace=workspace, owner=owner_member, agent=parent.agent, title="Changelog")
    Session.objects.filter(id=child.id).update(parent=parent)
    inbox_post(session=child, author=Message.Author.AGENT, sender_agent=parent.agent, text="Write the changelog")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{child.thread_id}/")
    # Its first turn waits for a host; the parent's running turn is not the child's.
    expect(page.locator("#state-words")).to_have_text("waiting for a host to start it")
    expect(page.locator("#turn-started")).to_have_count(0)
    page.goto(f"{gateway}/threads/{parent.thread_id}/")
    expect(page.locator("#state-words")).to_have_text("running")


def test_a_reply_is_sent_without_a_reload_and_shows_once(gateway, celery_worker, workspace, owner_member, page):
    session = session_start(workspace=workspace, owner=owner_member, title="Chat")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")
    page.evaluate("window.__notReloaded = true")
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and r.url.endswith("/reply/") else None)

    box = page.locator("#id_text")
    box.fill("First, with Enter")
    box.press("Enter")
    expect(page.locator("#messages .msg.person")).to_have_count(1)
    expect(page.locator("#messages .msg.person")).to_contain_text("First, with Enter")
    expect(box).to_have_value("")

    box.fill("Second, double-clicked")
    page.dblclick("#reply-send")
    expect(page.locator("#messages .msg.person")).to_have_count(2)
    expect(box).to_have_value("")
    expect(page.locator("#reply-send")).to_be_enabled()  # the first post has answered
    assert len(posts) == 2, posts
    texts = list(Message.objects.filter(thread=session.thread, author="person").values_list("text", flat=True))
    assert texts == ["First, with Enter", "Second, double-clicked"]
    assert page.evaluate("window.__notReloaded") is True


def test_a_reply_that_fails_keeps_its_text_and_says_why(gateway, workspace, owner_member, page):
    session = session_start(workspace=workspace, owner=owner_member, title="Chat")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    box = page.locator("#id_text")
    # Over-long (the browser's own maxlength bypassed, as a paste through a script could).
    box.evaluate("(el) => el.removeAttribute('maxlength')")
    long_text = "x" * 40_001
    box.fill(long_text)
    page.click("#reply-send")
    expect(page.locator("#reply-error")).to_contain_text("at most 40,000 characters (this one has 40,001)")
    expect(box).to_have_value(long_text)

    # Calvin out of reach: the text stays for another try.
    page.route("**/reply/", lambda route: route.abort())
    box.fill("Hello?")
    box.press("Enter")
    expect(page.locator("#reply-error")).to_contain_text("could not be reached")
    expect(box).to_have_value("Hello?")
    assert not Message.objects.filter(thread=session.thread, author="person").exists()


def test_stops_notice_appears_in_calvins_look(gateway, workspace, owner_member, page):
    session = session_start(workspace=workspace, owner=owner_member, title="Chat")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    # The header as the live push re-renders it: rendered without a request, so without a CSRF token.
    page.evaluate("document.querySelector('#thread-header form.stop input[name=csrfmiddlewaretoken]').remove()")
    page.click("#stop-agent")
    notice = page.locator("main ul.notices li.notice")
    expect(notice).to_have_count(1)
    expect(notice).to_have_text("Stop: the agent is not running.")
    # Styled as a notice (calvin.css), not a bare bullet.
    assert notice.evaluate("(el) => getComputedStyle(el.parentElement).listStyleType") == "none"
    assert notice.evaluate("(el) => getComputedStyle(el).backgroundColor") == "rgb(221, 244, 255)"
    page.reload()
    expect(page.locator("main ul.notices")).to_have_count(0)  # shown once


def test_a_member_who_may_not_stop_gets_calvins_403_page(gateway, workspace, owner_member, plain_member, page):
    session = session_start(workspace=workspace, owner=owner_member, title="Owner's chat")
    browser_login(page, gateway, "member", MEMBER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    page.click("#stop-agent")
    expect(page.locator("#error-page h1")).to_have_text("You may not do that here")
    expect(page.locator("#error-page")).to_contain_text("Only the person who started this session or a workspace admin")
    expect(page.locator("#go-home")).to_have_attribute("href", "/")


def test_a_thread_with_many_messages_shows_no_list_of_them_above_it(gateway, workspace, owner_member, page):
    """The flash-message bug: base.html's notices read `messages`; a view passing the thread's
    messages under that name printed "text #1, card #2 …" as bullets above the thread."""
    session = session_start(workspace=workspace, owner=owner_member, title="Busy thread")
    for n in range(30):
        message_post_by_person(thread=session.thread, member=owner_member, text=f"Question {n}")
        agent_reply_post(session=session, text=f"Answer {n}")
    system_notice_post(thread_id=session.thread_id, text="The build finished.")
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    expect(page.locator("#messages .msg")).to_have_count(50)
    shown = page.locator("main").inner_text()
    assert not re.search(r"\b(text|card|file|system) #\d+", shown), shown[:500]
    expect(page.locator("main ul.notices")).to_have_count(0)
    expect(page.locator("main > ul, main > .panel ul")).to_have_count(0)
    # What a person reads above the thread: its header, then the messages.
    above = page.locator("#thread-header").inner_text()
    assert "Question" not in above and "Answer" not in above


def test_screenshot_of_a_thread_page(gateway, workspace, owner_member, page):
    """docs/screenshots/thread.png for the README: a running turn, a conversation, a notice."""
    agent = agent_create(workspace=workspace, name="release-bot", provider=Agent.Provider.CLAUDE_CODE)
    session = session_start(
        workspace=workspace, owner=owner_member, agent=agent, title="Prepare release 7", permission_mode="acceptEdits"
    )
    message_post_by_person(thread=session.thread, member=owner_member, text="Bump the version; update the changelog.")
    agent_reply_post(session=session, text="Done: version 7.0.0, changelog has 14 entries. Tests pass.")
    message_post_by_person(thread=session.thread, member=owner_member, text="Now tag it and draft the release notes.")
    _running(session, host_name="gpu-box")
    page.set_viewport_size({"width": 1100, "height": 820})
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    page.wait_for_selector("#live-status[data-state=live]")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "thread.png"), full_page=True)
    assert (SCREENSHOTS / "thread.png").stat().st_size > 10_000


def test_an_external_agents_token_is_made_on_the_page_and_shown_once(gateway, workspace, owner_member, page):
    yours = agent_create(workspace=workspace, name="yours", provider=Agent.Provider.EXTERNAL)
    session = session_start(workspace=workspace, owner=owner_member, agent=yours, title="My own agent")
    earlier, earlier_token = runner_start(session=session)
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    with page.expect_response(lambda r: r.url.endswith("/connect/")) as answer:
        page.click("#make-token")
    assert answer.value.headers["cache-control"] == "no-store"
    issued = json.loads(page.locator("#mcp-json-issued").inner_text())
    tokens = {s["headers"]["Authorization"].removeprefix("Bearer ") for s in issued["mcpServers"].values()}
    assert len(tokens) == 1
    (token,) = tokens
    runner = Runner.objects.get(session=session, revoked_at__isnull=True)
    assert runner.generation == earlier.generation + 1 and token.startswith(runner.token_hint)
    # The new token reaches Calvin's MCP server; the earlier one no longer does.
    agent = ExternalAgent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    assert "read_thread" in {tool.name for tool in off_the_loop(agent.list_tools)}
    with httpx2.Client() as http:
        refused = http.post(f"{gateway}/mcp", headers={"Authorization": f"Bearer {earlier_token}"}, json={})
    assert refused.status_code == 401
    assert AuditEvent.objects.filter(verb="runner.token_issue", target_id=str(runner.id), actor_user=owner_member.user)
    # Back on the thread, the token is not shown again.
    page.click("#back-to-thread")
    assert token not in page.content()


def test_only_who_may_steer_makes_an_external_agents_token(
    gateway, workspace, owner_member, plain_member, stranger_member, page
):
    yours = agent_create(workspace=workspace, name="yours", provider=Agent.Provider.EXTERNAL)
    session = session_start(workspace=workspace, owner=owner_member, agent=yours, title="Owner's agent")
    hosted = session_start(workspace=workspace, owner=owner_member, title="Calvin runs this one")
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        token = csrf_token_in(http.get(f"/threads/{session.thread_id}/").text)
        refused = http.post(f"/threads/{session.thread_id}/connect/", data={"csrfmiddlewaretoken": token})
        assert refused.status_code == 403 and "workspace admin can make its token" in refused.text
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        token = csrf_token_in(http.get(f"/threads/{hosted.thread_id}/").text)
        refused = http.post(f"/threads/{hosted.thread_id}/connect/", data={"csrfmiddlewaretoken": token})
        assert refused.status_code == 403 and "Calvin runs this session&#x27;s agent itself" in refused.text
    with logged_in(gateway, "stranger", STRANGER_PASSWORD) as http:
        token = csrf_token_in(http.get("/", follow_redirects=True).text)
        refused = http.post(f"/threads/{session.thread_id}/connect/", data={"csrfmiddlewaretoken": token})
        assert refused.status_code == 404
    assert not Runner.objects.filter(session__in=[session, hosted]).exists()
