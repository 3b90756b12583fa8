"""In real Chromium through uvicorn: the admin's change lists of sessions, turns, tool calls,
approvals and hosts update themselves while a real host daemon runs a script agent's turn
(static/dashboard/live.js over /ws/workspaces/<id>/): rows appear, change in place and are marked,
the page never reloads, and a tenant's list follows its own workspace only."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from approvals.models import PendingApproval
from approvals.services import approval_decide
from calvin.workspaces.models import Member
from sessions.models import Host, Session, Turn
from tests.conftest import wait_for
from tests.dashboard.conftest import (  # noqa: F401 (fixtures)
    STRANGER_PASSWORD,
    browser,
    off_the_loop,
    other_workspace,
    page,
)
from tests.sessions import test_hosts
from tests.sessions.host_processes import agent_texts, scripted, wait_connected
from tests.test_admin_browser import admin_login
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("CALVIN_VAR_DIR", "var")) / "screenshots"
ADMIN_PASSWORD = "pw-acme-admin-123"

SESSIONS = "/admin/agent_sessions/session/"
TURNS = "/admin/agent_sessions/turn/"
HOSTS = "/admin/agent_sessions/host/"
TOOL_CALLS = "/admin/tools/toolcall/"
APPROVALS = "/admin/approvals/pendingapproval/"


@pytest.fixture
def acme_admin(workspace, django_user_model) -> Member:
    """An admin of Acme (not its owner, neither staff nor a superuser)."""
    user = django_user_model.objects.create_user("acme-admin", password=ADMIN_PASSWORD)
    return Member.objects.create(workspace=workspace, user=user, role=Member.Role.ADMIN)


def open_live(tab, base: str, path: str, username: str = "acme-admin", password: str = ADMIN_PASSWORD) -> None:
    """Log in to the admin, open a change list and wait until its socket is live; from then on
    `window.__notReloaded` says the page was never loaded again."""
    admin_login(tab, base, username, password)
    tab.wait_for_url(f"{base}/admin/")
    tab.goto(f"{base}{path}")
    expect(tab.locator("[data-live-mark]")).to_have_text("live")
    tab.evaluate("window.__notReloaded = 1")


def new_session(workspace, title: str) -> Session:
    # Off Playwright's event loop: the services' pushes (async_to_sync) refuse to run on it.
    return off_the_loop(test_hosts.new_session, workspace, title)


def say(session: Session, text: str) -> None:
    off_the_loop(test_hosts.say, session, text)


def row(tab, key: str):
    return tab.locator(f"#result_list tr[data-row-key='{key}']")


def keep(tab, key: str) -> None:
    """Tag the row's element: a row changed in place is still this element afterwards."""
    tab.locator(f"#result_list tr[data-row-key='{key}']").evaluate("tr => { tr.__kept = 1; }")


def kept(tab, key: str) -> bool:
    return tab.locator(f"#result_list tr[data-row-key='{key}']").evaluate("tr => tr.__kept === 1")


def not_reloaded(tab) -> bool:
    return tab.evaluate("window.__notReloaded") == 1


def row_keys(tab) -> set[str]:
    return set(tab.locator("#result_list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.rowKey || '')"))


def shot(tab, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"admin-live-{name}.png"
    tab.evaluate("window.scrollTo(0, 0)")
    tab.screenshot(path=str(path))
    return path


def test_the_sessions_list_shows_a_turn_running_then_idle_in_place_and_a_new_session_appears(
    gateway,
    hosts,
    workspace,
    acme_admin,
    page,  # noqa: F811
):
    session = new_session(workspace, "Fix the flaky test")
    scripted(session.agent, [{"sleep": 3}, {"reply": "fixed: {prompt}"}])
    host = hosts("h1")
    wait_connected(host)
    open_live(page, gateway, SESSIONS)
    page.click("#toggle-nav-sidebar")  # the whole row fits 1280 px (the screenshot's width)
    key = f"session:{session.id}"
    expect(row(page, key).locator("td.field-status")).to_have_text("Queued")  # keyed by the first refetch
    keep(page, key)

    say(session, "the login test")
    expect(row(page, key).locator("td.field-status")).to_have_text("Running")
    expect(row(page, key)).to_have_class(re.compile(r"\blive-changed\b"))
    expect(page.locator("[data-live-mark]")).to_have_text("live")
    shot(page, "sessions-running")

    wait_for(lambda: agent_texts(session) == ["fixed: the login test"], timeout=30)
    expect(row(page, key).locator("td.field-status")).to_have_text("Idle")
    assert kept(page, key), "the session's row was replaced, not changed in place"
    assert "Fix the flaky test" in row(page, key).inner_text()

    later = new_session(workspace, "Write the release notes")
    expect(row(page, f"session:{later.id}")).to_contain_text("Write the release notes")
    expect(row(page, f"session:{later.id}")).to_have_class(re.compile(r"\blive-changed\b"))
    assert row_keys(page) == {key, f"session:{later.id}"}
    expect(page.locator("#changelist .paginator")).to_contain_text("2 sessions")
    # The admin's selection counter counts the new row too, and selecting all selects both.
    expect(page.locator(".action-counter")).to_have_text("0 of 2 selected")
    page.check("#action-toggle")
    expect(page.locator(".action-counter")).to_have_text("2 of 2 selected")
    assert not_reloaded(page)


def test_the_turns_list_shows_the_new_turn_and_its_status_changing_to_done(
    gateway,
    hosts,
    workspace,
    acme_admin,
    page,  # noqa: F811
):
    session = new_session(workspace, "Bump the dependencies")
    scripted(session.agent, [{"sleep": 3}, {"reply": "bumped"}])
    host = hosts("h1")
    wait_connected(host)
    open_live(page, gateway, TURNS)
    expect(page.locator("#result_list")).to_have_count(0)  # no turn yet

    say(session, "go")
    turn = wait_for(lambda: Turn.objects.filter(session=session).first(), timeout=10)
    key = f"turn:{turn.id}"
    expect(row(page, key).locator("td.field-status")).to_have_text(re.compile(r"^(Queued|Running)$"))
    keep(page, key)
    expect(row(page, key).locator("td.field-session_shown")).to_contain_text(f"Session {session.id}")

    expect(row(page, key).locator("td.field-status")).to_have_text("Done", timeout=30_000)
    expect(row(page, key)).to_have_class(re.compile(r"\blive-changed\b"))
    assert kept(page, key), "the turn's row was replaced, not changed in place"
    shot(page, "turns-done")
    assert row(page, key).locator("td.field-finished_at").inner_text().strip() not in ("", "-")
    assert not_reloaded(page)


def test_a_gated_tool_call_and_its_approval_appear_and_change_in_place_when_approved(
    gateway,
    hosts,
    workspace,
    acme_admin,
    browser,  # noqa: F811
):
    session = new_session(workspace, "Needs jq")
    install = {"server": "nanoclaw", "tool": "install_packages", "arguments": {"apt": ["jq"]}}
    scripted(session.agent, [install, {"reply": "asked for jq"}])
    host = hosts("h1")
    wait_connected(host)
    calls, approvals = browser.new_page(), browser.new_page()
    for tab, path in ((calls, TOOL_CALLS), (approvals, APPROVALS)):
        tab.set_default_timeout(15_000)
        open_live(tab, gateway, path)

    say(session, "install jq")
    call = wait_for(lambda: ToolCall.objects.filter(session=session, tool="install_packages").first(), timeout=30)
    approval = wait_for(lambda: PendingApproval.objects.filter(tool_call=call).first(), timeout=10)
    call_key, approval_key = f"tool_call:{call.id}", f"approval:{approval.id}"
    expect(row(calls, call_key).locator("td.field-status")).to_have_text("Awaiting Approval")
    expect(row(calls, call_key).locator("td.field-tool")).to_have_text("install_packages")
    expect(row(approvals, approval_key).locator("td.field-status")).to_have_text("Pending")
    expect(row(approvals, approval_key).locator("td.field-summary")).to_contain_text("jq")
    keep(calls, call_key)
    keep(approvals, approval_key)

    off_the_loop(approval_decide, approval_id=approval.id, member=acme_admin, approve=True, via="web")
    # Approved, and applied at once when a worker of an earlier test in this process is running.
    expect(row(approvals, approval_key).locator("td.field-status")).to_have_text(re.compile(r"^(Approved|Applied)$"))
    expect(row(approvals, approval_key).locator("td.field-decided_by")).to_contain_text("acme-admin")
    expect(row(approvals, approval_key)).to_have_class(re.compile(r"\blive-changed\b"))
    # Approved: the call leaves "awaiting approval" for the worker's queue (or its effect, with a worker).
    expect(row(calls, call_key).locator("td.field-status")).not_to_have_text("Awaiting Approval")
    expect(row(calls, call_key)).to_have_class(re.compile(r"\blive-changed\b"))
    shot(calls, "tool-calls-approved")
    shot(approvals, "approvals-approved")
    for tab, key in ((calls, call_key), (approvals, approval_key)):
        assert kept(tab, key), f"{key}'s row was replaced, not changed in place"
        assert not_reloaded(tab)


def test_the_hosts_list_shows_a_host_connecting_and_going_when_killed(
    gateway,
    hosts,
    workspace,
    acme_admin,
    page,  # noqa: F811
):
    open_live(page, gateway, HOSTS)
    expect(page.locator("#result_list")).to_have_count(0)  # no host yet

    host = off_the_loop(hosts, "builder-1", workspace=workspace)
    wait_connected(host)
    key = f"host:{host.host.id}"
    connected = row(page, key).locator("td.field-live img")
    expect(row(page, key).locator("th.field-name, td.field-name")).to_have_text("builder-1")
    expect(connected).to_have_attribute("alt", "True")
    expect(page.locator("#changelist .paginator")).to_contain_text("1 host")
    expect(row(page, key).locator("td.field-sandbox_shown")).not_to_have_text("-")  # registered
    keep(page, key)
    shot(page, "hosts-connected")
    # The flash lasts a moment: on a loaded machine it can be over before a check after the
    # change looks, so the page itself notes every row that flashed.
    page.evaluate(
        """() => { window.flashed = [];
        new MutationObserver(changes => changes.forEach(c => {
            if (c.target.classList.contains("live-changed")) window.flashed.push(c.target.dataset.rowKey);
        })).observe(document.querySelector("#result_list"),
                    {attributes: true, attributeFilter: ["class"], subtree: true});
        }"""
    )

    host.kill()  # SIGKILL: the gateway sees the socket close
    wait_for(lambda: not Host.objects.get(id=host.host.id).channel_name, timeout=15)
    expect(connected).to_have_attribute("alt", "False")
    page.wait_for_function("key => window.flashed.includes(key)", arg=key, timeout=5000)
    assert kept(page, key), "the host's row was replaced, not changed in place"
    shot(page, "hosts-gone")
    assert not_reloaded(page)


def test_a_globex_admin_list_follows_globex_only_and_its_socket_may_not_watch_acme(
    gateway,
    hosts,
    workspace,
    other_workspace,  # noqa: F811
    page,  # noqa: F811
):
    globex_session = new_session(other_workspace, "Globex roadmap")
    acme_session = new_session(workspace, "Acme secret merger")
    scripted(acme_session.agent, [{"reply": "done"}])
    host = hosts("h1")
    wait_connected(host)
    open_live(page, gateway, SESSIONS, "stranger", STRANGER_PASSWORD)
    streams = page.locator("[data-live-stream]").evaluate_all("els => els.map(e => e.dataset.liveStream)")
    assert streams == [f"/ws/workspaces/{other_workspace.id}/"]
    globex_key = f"session:{globex_session.id}"
    expect(row(page, globex_key)).to_contain_text("Globex roadmap")

    # Acme's changes: a turn that runs and replies, a new session.
    say(acme_session, "merge")
    wait_for(lambda: agent_texts(acme_session) == ["done"], timeout=30)
    acme_later = new_session(workspace, "Acme layoffs")
    # Then Globex's: once its new row shows, anything Acme's pushed before would have shown too.
    globex_later = new_session(other_workspace, "Globex hiring")
    expect(row(page, f"session:{globex_later.id}")).to_contain_text("Globex hiring")
    assert row_keys(page) == {globex_key, f"session:{globex_later.id}"}
    text = page.inner_text("#result_list")
    assert "Acme" not in text and str(acme_later.id) not in row_keys(page)
    assert Session.objects.filter(workspace=workspace).count() == 2  # Acme's rows exist; they are not shown

    # The page's own socket is refused Acme's stream (4403), while its Globex one stays live.
    acme_url = gateway.replace("http://", "ws://", 1) + f"/ws/workspaces/{workspace.id}/"
    code = page.evaluate(
        "url => new Promise(done => { const ws = new WebSocket(url); ws.onclose = e => done(e.code); })", acme_url
    )
    assert code == 4403
    expect(page.locator("[data-live-mark]")).to_have_text("live")
    assert not_reloaded(page)
