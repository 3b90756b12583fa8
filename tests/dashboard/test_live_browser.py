"""The live console as a person sees it in Chromium, with real host daemons running script agents:
the thread header following a real turn, a page catching up once after its socket was down, the
workspace home's counts and rows moving, a decision from the home, and the charts' period picker.

Every live page is loaded once: `window.__notReloaded`, set after the load, must still be there at
the end (a reload would pass most assertions by rendering the new state from scratch). The charts'
period picker is links: a click loads the charts with that period (the URL keeps the choice).
"""

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import expect

from approvals.models import PendingApproval
from calvin.workspaces.models import Agent, Member
from sessions.models import Message, Session
from sessions.services import message_post_by_person, session_start
from tests.conftest import wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, announced_message, browser_login, thread_seq
from tests.sessions.host_processes import agent_texts, scripted, wait_connected
from tools.models import Question, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path("/tmp/helpera-shots")

# Records every text #agent-activity and #state-words showed, however briefly: a step the agent
# passes through in a few milliseconds (a tool answering at once) is still read by the page.
RECORD_HEADER = """() => {
  window.__activity = []; window.__states = [];
  const note = (list, id) => {
    const el = document.getElementById(id);
    const text = el ? el.textContent.trim() : null;
    if (list[list.length - 1] !== text) list.push(text);
  };
  new MutationObserver(() => { note(window.__activity, "agent-activity"); note(window.__states, "state-words"); })
    .observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


# Records every row the page marked as just changed (its key, and a session row's state then).
RECORD_MARKS = """() => {
  window.__marked = [];
  const note = () => {
    for (const row of document.querySelectorAll(".live-changed[data-row-key]")) {
      const mark = `${row.dataset.rowKey} ${row.dataset.state || ""}`.trim();
      if (!window.__marked.includes(mark)) window.__marked.push(mark);
    }
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def new_session(workspace, title: str, agent=None) -> Session:
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    return session_start(workspace=workspace, owner=owner, title=title, agent=agent)


def say(session: Session, text: str) -> Message:
    """The session's owner writes in its thread: a turn for the agent."""
    return message_post_by_person(thread=session.thread, member=session.owner, text=text)


def loaded_once(page) -> None:
    page.evaluate("window.__notReloaded = 1")


def assert_not_reloaded(page) -> None:
    assert page.evaluate("window.__notReloaded") == 1, "the page reloaded"


def open_thread(page, gateway: str, session: Session) -> None:
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    loaded_once(page)


def open_home(page, gateway: str) -> None:
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    expect(page).to_have_url(f"{gateway}/w/acme/")
    expect(page.locator("[data-live-mark]")).to_have_attribute("data-state", "live")
    loaded_once(page)


def message_ids(page) -> list[int]:
    return page.evaluate("() => [...document.querySelectorAll('#messages [id^=message-]')].map((m) => +m.id.slice(8))")


def test_the_thread_header_follows_a_real_turn_step_by_step_without_a_reload(gateway, hosts, workspace, page):
    session = new_session(workspace, "Nightly tests")
    # A tool_use of Claude Code's Bash, as the script emits it (the call itself fails at once: the
    # calvin server has no Bash), then time to read the header, then the reply.
    scripted(
        session.agent,
        [
            {"sleep": 1},
            {"tool": "Bash", "arguments": {"command": "npm test\nnpm run lint"}},
            {"sleep": 3},
            {"reply": "All 12 tests pass"},
        ],
    )
    host = hosts("builder")
    wait_connected(host)
    open_thread(page, gateway, session)
    header = page.locator("#thread-header")
    expect(page.locator("#state-words")).to_have_text("waiting for a message")
    page.evaluate(RECORD_HEADER)

    say(session, "run the tests")

    expect(page.locator("#state-words")).to_have_text("running", timeout=20_000)
    expect(header).to_have_attribute("data-state", "running")
    expect(page.locator("#turn-started")).to_be_visible()
    expect(page.locator("#turn-elapsed")).to_have_text(re.compile(r"^ · \d+m \d\ds$"))
    expect(page.locator("#fact-host")).to_have_text("builder")
    # After the command's answer, during the sleep: the agent reads it.
    expect(page.locator("#agent-activity")).to_have_text("· thinking", timeout=10_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "thread-running.png"))

    reply = page.locator("#messages .msg.agent")
    expect(reply).to_have_text(re.compile("All 12 tests pass"), timeout=20_000)
    expect(page.locator("#state-words")).to_have_text("idle: the agent answered")
    expect(header).to_have_attribute("data-state", "idle")
    expect(page.locator("#agent-activity")).to_have_text("")
    expect(page.locator("#turn-started")).to_have_count(0)
    expect(page.locator("#turn-elapsed")).to_have_count(0)

    activity = [text for text in page.evaluate("window.__activity") if text]
    assert "· running `npm test`" in activity, activity  # the command's first line, in words
    assert activity.index("· running `npm test`") < activity.index("· thinking"), activity
    states = page.evaluate("window.__states")
    assert states.index("running") < states.index("idle: the agent answered"), states
    assert agent_texts(session) == ["All 12 tests pass"]
    expect(reply).to_have_count(1)
    assert_not_reloaded(page)


def until(page, predicate, what: str, timeout: float = 10) -> None:
    """wait_for for what Playwright's handlers record: they run only while this thread is in a Playwright call."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not in {timeout} s"
        page.wait_for_timeout(50)


class ThreadSockets:
    """The page's thread sockets through Playwright: `down()` breaks the one open (both ends)
    and refuses new ones, as a dropped network would; `up()` lets the page's next retry through.
    (Chromium's offline emulation leaves an open websocket to localhost alone.)"""

    def __init__(self, page):
        self.is_up, self.open, self.refused = True, [], 0
        self.to_page, self.to_server = [], []  # every frame each way, decoded
        page.route_web_socket(re.compile(r"/ws/threads/\d+/$"), self._route)

    def _route(self, socket) -> None:
        if not self.is_up:
            self.refused += 1
            socket.close()
            return
        server = socket.connect_to_server()

        def to_page(frame) -> None:
            self.to_page.append(json.loads(frame))
            socket.send(frame)

        def to_server(frame) -> None:
            self.to_server.append(json.loads(frame))
            server.send(frame)

        server.on_message(to_page)
        socket.on_message(to_server)
        self.open.append((socket, server))

    def down(self) -> None:
        self.is_up = False
        while self.open:
            socket, server = self.open.pop()
            server.close()
            socket.close()

    def up(self) -> None:
        self.is_up = True


def test_a_page_whose_socket_was_down_catches_up_each_message_once_in_order(gateway, workspace, page):
    session = new_session(workspace, "Flaky network")
    first = announced_message(session.thread_id, "before the outage")
    sockets = ThreadSockets(page)
    open_thread(page, gateway, session)
    expect(page.locator(f"#message-{first.id}")).to_have_count(1)
    rendered_at = page.evaluate("window.calvinLive.seq()")
    until(page, lambda: sockets.to_server, "the page asks what it missed on connect")
    assert sockets.to_server == [{"since": rendered_at}]

    sockets.down()
    expect(page.locator("#live-status")).to_have_text("reconnecting…")
    until(page, lambda: sockets.refused, "the page tries to reconnect")  # and cannot get through
    missed = [announced_message(session.thread_id, f"while you were away #{n}") for n in (1, 2, 3)]
    # Nothing reached the page while it was offline.
    expect(page.locator("#messages").get_by_text("while you were away")).to_have_count(0)
    assert page.evaluate("window.calvinLive.seq()") == rendered_at

    sockets.up()
    asked_before = len(sockets.to_server)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live", timeout=20_000)
    for message in missed:
        expect(page.locator(f"#message-{message.id}")).to_have_count(1)
    expect(page.locator("#messages .msg.agent").last).to_contain_text("while you were away #3")
    page.wait_for_function("(seq) => window.calvinLive.seq() === seq", arg=thread_seq(session.thread_id))

    # It asked once for what came after the seq it had applied, and got each missed seq once.
    assert sockets.to_server[asked_before:] == [{"since": rendered_at}]
    caught = [f["seq"] for f in sockets.to_page if "seq" in f]
    assert caught == list(range(rendered_at + 1, rendered_at + 4)), sockets.to_page
    assert [f.get("id") for f in sockets.to_page] == [m.id for m in missed]

    # One more push after the catch-up: shown once too, and nothing came twice.
    after = announced_message(session.thread_id, "back online")
    expect(page.locator(f"#message-{after.id}")).to_have_count(1)
    seqs = [f["seq"] for f in sockets.to_page if "seq" in f]
    assert seqs == list(range(rendered_at + 1, rendered_at + 5)), seqs  # no seq came twice
    ids = message_ids(page)
    shown = [m.id for m in (first, *missed, after)]
    assert [i for i in ids if i in shown] == shown, ids
    assert len(ids) == len(set(ids)), ids
    texts = page.locator("#messages .msg.agent").all_inner_texts()
    assert [t for t in texts if "while you were away" in t] == [
        t for n in (1, 2, 3) for t in texts if f"while you were away #{n}" in t
    ]
    assert_not_reloaded(page)


def test_the_home_shows_a_turn_start_and_end_live(gateway, hosts, workspace, page):
    untouched = new_session(workspace, "Old docs")
    session = new_session(workspace, "Release notes")
    scripted(session.agent, [{"sleep": 4}, {"reply": "Notes written"}])
    host = hosts("writer")
    wait_connected(host)
    open_home(page, gateway)
    row = page.locator(f"tr[data-row-key='session:{session.id}']")
    running = page.locator("#count-running")
    expect(running).to_have_text("0")
    expect(row).not_to_have_attribute("data-state", "running")
    host_row = page.locator(f"tr[data-row-key='host:{host.host.id}']")
    expect(host_row).to_contain_text("online")
    expect(host_row).to_contain_text("0 / 4")
    page.evaluate(RECORD_MARKS)

    say(session, "write the release notes")

    # Read in one look: under load the turn's 4 s can end between separate expects, and the
    # refetch after its end replaces every panel.
    seen_running = page.wait_for_function(
        """([sessionKey, hostKey]) => {
          const row = document.querySelector(`tr[data-row-key='${sessionKey}']`);
          const host = document.querySelector(`tr[data-row-key='${hostKey}']`);
          if (document.querySelector("#count-running").textContent.trim() !== "1" || !row || !host) return null;
          if (row.dataset.state !== "running") return null;
          const state = row.querySelector(".state").textContent.trim();
          return {state, changed: row.classList.contains("live-changed"), row: row.textContent, host: host.textContent};
        }""",
        arg=[f"session:{session.id}", f"host:{host.host.id}"],
        timeout=20_000,
    ).json_value()
    assert seen_running["state"] == "running"  # its mark, which fades, is checked in window.__marked below
    assert "writer" in seen_running["row"]
    assert "1 / 4" in seen_running["host"], seen_running["host"]

    expect(row).not_to_have_attribute("data-state", "running", timeout=20_000)
    expect(running).to_have_text("0")
    expect(row.locator(".state")).not_to_have_text("running")
    expect(row).to_have_class(re.compile(r"\blive-changed\b"))
    expect(host_row).to_contain_text("0 / 4")
    assert agent_texts(session) == ["Notes written"]
    expect(page.locator("[data-live-mark]")).to_have_attribute("data-state", "live")
    # Marked: the row whose state changed, running and then not; never a row that did not change.
    marked = page.evaluate("window.__marked")
    assert f"session:{session.id} running" in marked, marked
    assert f"session:{session.id} {row.get_attribute('data-state')}" in marked, marked
    assert not [m for m in marked if m.startswith(f"session:{untouched.id} ")], marked
    assert_not_reloaded(page)


def test_an_approval_decided_from_the_home_shows_decided_and_its_tool_call_runs(
    gateway, hosts, workspace, celery_worker, page
):
    session = new_session(workspace, "Add jq to the image")
    # The agent asks for a package (an approval), then keeps working while a person decides.
    scripted(
        session.agent,
        [
            {"server": "nanoclaw", "tool": "install_packages", "arguments": {"apt": ["jq"]}},
            {"sleep": 15},
            {"reply": "jq asked for"},
        ],
    )
    # Another agent's session just runs, for the screenshot of a busy home.
    reviewer = scripted(Agent.objects.create(workspace=workspace, name="reviewer"), [{"sleep": 15}, {"reply": "ok"}])
    busy = new_session(workspace, "Review the release branch", agent=reviewer)
    host = hosts("packager")
    wait_connected(host)
    open_home(page, gateway)
    say(session, "install jq")
    say(busy, "review it")

    approval = wait_for(lambda: PendingApproval.objects.filter(session=session).first(), timeout=20)
    item = page.locator(f"[data-row-key='approval:{approval.id}']")
    expect(item).to_contain_text("Approval", timeout=15_000)
    expect(item).to_contain_text("install apt: jq")
    expect(page.locator("#waiting-count")).to_have_text("1")
    call_row = page.locator(f"tr[data-row-key='tool_call:{approval.tool_call_id}']")
    expect(call_row).to_contain_text("install_packages")
    expect(call_row).to_contain_text("waiting for approval")
    expect(page.locator(f"tr[data-row-key='session:{session.id}'] .state")).to_have_text("waiting for a person")
    expect(page.locator(f"tr[data-row-key='session:{busy.id}'] .state")).to_have_text("running")
    expect(page.locator(f"tr[data-row-key='host:{host.host.id}']")).to_contain_text("online")

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(page.locator(".live-changed")).to_have_count(0)  # the marks of the last changes faded
    page.screenshot(path=str(SHOTS / "dashboard.png"), full_page=True)

    # The decision's own live event reaches the page before the press is answered (held here):
    # the item stays until its answer was shown, not taken away with the answer lost (CI's race).
    def answer_late(route):
        response = route.fetch()
        time.sleep(2)  # the event's refetch (300 ms after it) has come and gone by now
        route.fulfill(response=response)

    page.route(f"**/actions/approval/{approval.id}/", answer_late)
    item.locator("button:text-is('Approve')").click()
    expect(item.locator(".action-result")).to_have_text(re.compile(r"^Approved"))
    expect(item).to_have_count(0)  # the panel refetched: nothing waits any more
    expect(page.locator("#waiting-count")).to_have_text("0")
    expect(page.locator("#waiting")).to_contain_text("Nothing waits for a decision.")
    expect(call_row).to_contain_text("done", timeout=20_000)
    wait_for(lambda: ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.APPLIED, timeout=5)
    approval.refresh_from_db()
    assert approval.status == PendingApproval.Status.APPLIED and approval.decided_by.user.username == "owner"
    assert_not_reloaded(page)


def test_a_question_answered_from_the_home_lets_the_waiting_turn_go_on(gateway, hosts, workspace, page):
    session = new_session(workspace, "Deploy")
    question = {"title": "Which branch?", "question": "Deploy which one?", "options": ["main", "dev"], "timeout": 60}
    scripted(
        session.agent,
        [{"server": "nanoclaw", "tool": "ask_user_question", "arguments": question}, {"reply": "Deploying"}],
    )
    host = hosts("deployer")
    wait_connected(host)
    open_home(page, gateway)
    say(session, "deploy")

    asked = wait_for(lambda: Question.objects.filter(tool_call__session=session).first(), timeout=20)
    item = page.locator(f"[data-row-key='question:{asked.tool_call_id}']")
    expect(item).to_contain_text("Which branch? Deploy which one?", timeout=15_000)
    expect(item.locator("button")).to_have_text(["main", "dev"])
    row = page.locator(f"tr[data-row-key='session:{session.id}']")
    expect(row.locator(".state")).to_have_text("waiting for a person")

    item.locator("button:text-is('dev')").click()
    expect(item.locator(".action-result")).not_to_be_empty()
    expect(item).to_have_count(0)
    expect(page.locator("#waiting-count")).to_have_text("0")
    # The call returned the answer to the agent, whose turn went on to its reply and ended.
    wait_for(lambda: agent_texts(session) == ["Deploying"], timeout=20)
    expect(row.locator(".state")).not_to_have_text(re.compile("running|waiting"), timeout=15_000)
    asked.refresh_from_db()
    assert (asked.status, asked.answer_index, asked.answered_by.user.username) == ("answered", 1, "owner")
    assert_not_reloaded(page)


def calls_at(session, tool: str, at: datetime, n: int) -> None:
    made = ToolCall.objects.bulk_create([ToolCall(session=session, tool=tool) for _ in range(n)])
    ToolCall.objects.filter(id__in=[c.id for c in made]).update(created_at=at)


def test_the_charts_period_picker_redraws_a_chart_and_points_have_hover_titles(gateway, workspace, page):
    session = new_session(workspace, "Busy week")
    now = datetime.now(UTC)
    calls_at(session, "send_file", now - timedelta(hours=1), 3)
    calls_at(session, "post_card", now - timedelta(days=3), 5)  # outside 24 h, inside 7 d
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/w/acme/charts/")
    chart = page.locator("#chart-calls")
    picker = chart.locator(".period-picker")
    expect(picker.locator("a")).to_have_text(["24 h", "7 d", "30 d"])
    expect(picker.locator("[aria-current=page]")).to_have_text("24 h")
    expect(chart.locator("svg")).to_contain_text("Tool calls per hour, last 24 h")
    titles = chart.locator("svg title")
    expect(titles.first).to_be_attached()
    hover = " | ".join(titles.all_text_contents())
    assert "send_file" in hover and "post_card" not in hover, hover
    spend_before = page.locator("#chart-spend svg").inner_html()

    picker.locator("a:text-is('7 d')").click()
    expect(page).to_have_url(re.compile(r"[?&]calls=7d"))
    expect(picker.locator("[aria-current=page]")).to_have_text("7 d")
    expect(chart.locator("svg")).to_contain_text("Tool calls per day, last 7 d")
    hover = " | ".join(chart.locator("svg title").all_text_contents())
    assert "send_file" in hover and "post_card" in hover, hover
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "charts-7d.png"), full_page=True)
    assert page.locator("#chart-spend svg").inner_html() == spend_before  # the other charts keep their period

    picker.locator("a:text-is('30 d')").click()
    expect(picker.locator("[aria-current=page]")).to_have_text("30 d")
    expect(chart.locator("svg")).to_contain_text("Tool calls per day, last 30 d")
    expect(page.locator("[data-live-mark]")).to_have_attribute("data-state", "live")
