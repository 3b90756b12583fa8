"""The "See a preview" demo thread (sessions/demo.py, sessions/demo_preview_agent.py): a real host
daemon runs its agent in a bwrap sandbox; the agent's page is fetched through the gateway's
preview host over real HTTP after its turn ended."""

import re
import socket
from types import SimpleNamespace

import httpx2
import pytest

from calvin.workspaces.models import Member
from sessions.demo import demo_preview_ensure
from sessions.demo_preview_agent import PORT
from sessions.management.commands.up import Command
from sessions.models import Turn
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, wait_connected
from tests.sessions.test_host_sandbox import without_bwrap
from tests.sessions.test_hosts import say
from tests.sessions.test_up import Terminal, start_up, stop

pytestmark = pytest.mark.django_db(transaction=True)

URL = re.compile(r"http://([a-z0-9-]+)\.preview\.localhost:(\d+)/")


def demo_thread(workspace):
    return demo_preview_ensure(workspace=workspace, owner=Member.objects.filter(workspace=workspace).first())


def replied(session, count: int) -> str:
    """The agent's reply to the count-th message, once that turn is over."""
    wait_for(lambda: len(agent_texts(session)) >= count, timeout=60)
    wait_for(lambda: Turn.objects.filter(session=session, status="done").count() >= count, timeout=20)
    return agent_texts(session)[count - 1]


def fetch(gateway: str, url: str) -> httpx2.Response:
    """GET the preview URL through the test gateway (Python does not resolve *.localhost)."""
    host = url.split("/")[2]
    port = int(gateway.rsplit(":", 1)[1])
    return httpx2.get(f"http://127.0.0.1:{port}/", headers={"host": host}, timeout=30)


def test_a_message_gets_a_preview_url_whose_page_shows_it_escaped(hosts, workspace, gateway):
    session = demo_thread(workspace)
    assert demo_thread(workspace).id == session.id  # up run again: the same thread
    host = hosts("h1")
    wait_connected(host)

    say(session, "Hello <b>Calvin</b> & co")
    reply = replied(session, 1)
    url = URL.search(reply).group(0)
    assert "stays up until the preview is taken down" in reply, reply
    # The turn is over; the page is still served from the kept sandbox.
    page = fetch(gateway, url)
    assert page.status_code == 200, page.text
    assert "<title>Made in Calvin's sandbox</title>" in page.text
    assert "Hello &lt;b&gt;Calvin&lt;/b&gt; &amp; co" in page.text and "<b>Calvin" not in page.text
    # Its files are in the session directory (the page, beside it the server's log).
    directory = host.session_directory(session.id)
    assert (directory / "site" / "index.html").read_text() == page.text

    # The next message: the next turn's sandbox, a new server, the port's same name.
    say(session, "Second <i>try</i>")
    again = replied(session, 2)
    assert URL.search(again).group(0) == url, again
    page = fetch(gateway, url)
    assert page.status_code == 200 and "Second &lt;i&gt;try&lt;/i&gt;" in page.text, page.text
    # The runner's note that the previous turn's servers stopped is not the person's message.
    assert "[system]" not in page.text and "Hello" not in page.text


def test_without_a_sandbox_the_reply_says_why_nothing_was_published(hosts, workspace, gateway, tmp_path):
    session = demo_thread(workspace)
    host = hosts("bare", environment={**without_bwrap(tmp_path), "CALVIN_ALLOW_UNSANDBOXED": "1"})
    wait_connected(host)

    say(session, "hello")
    reply = replied(session, 1)
    assert reply.startswith("I could not publish the page: ") and "without a sandbox" in reply, reply
    assert not URL.search(reply)
    # The server it started on the host's own loopback is stopped again.
    wait_for(lambda: not listening_on_host(), timeout=10)


def replied_on(thread_page: str) -> bool:
    return bool(URL.search(thread_page)) or "I could not publish" in thread_page


def listening_on_host() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=1):
            return True
    except OSError:
        return False


def test_up_prints_the_thread_and_a_newcomer_sees_a_preview_working(tmp_path):
    """`manage.py up`, followed as its printout says: the thread's link, a message, and the page
    at the URL the agent answers with (served by up's own local host, through up's gateway)."""
    output = Terminal()
    process, base = start_up(tmp_path, {}, output)  # hosted, as by default (one-machine offers no preview)
    try:
        screen = output.text()
        line = re.search(r"See a preview: (\S+)  \((.+)\)", screen)
        assert line and line.group(1).startswith(f"{base}/threads/"), screen
        assert "send any message; the agent answers with a preview URL" in line.group(2)
        password = re.search(r"user: admin  password: (\S+)", screen).group(1)
        thread = line.group(1).removeprefix(base)
        with httpx2.Client(base_url=base, follow_redirects=True) as http:
            login = http.get("/accounts/login/")
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
            form = {"username": "admin", "password": password, "csrfmiddlewaretoken": csrf}
            assert "See a preview" in http.post("/accounts/login/", data=form).text
            page = http.get(thread).text
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
            http.post(f"{thread}reply/", data={"text": "Made by <b>me</b>", "csrfmiddlewaretoken": csrf})
            answered = wait_for(lambda: replied_on(text := http.get(thread).text) and text, timeout=60)
            assert URL.search(answered), re.findall(r"I could not publish[^<]*", answered)
            url = URL.search(answered).group(0)
        assert url.split("/")[2].endswith(f".preview.localhost:{base.rsplit(':', 1)[1]}")  # up's own port
        page = wait_for(lambda: (shown := fetch(base, url)).status_code == 200 and shown, timeout=20)
        assert "Made by &lt;b&gt;me&lt;/b&gt;" in page.text and "<title>Made in Calvin's sandbox</title>" in page.text
    finally:
        stop(process)


@pytest.mark.parametrize("mode", ["one-machine", "self-hosted", "hosted"])
def test_the_printout_says_when_the_mode_serves_no_preview(mode, settings, workspace):
    settings.CALVIN_MODE = mode
    owner = Member.objects.filter(workspace=workspace).first()
    demo = SimpleNamespace(
        admin_username="admin", admin_password="pw", admin_has_password=True, session=SimpleNamespace(thread_id=1)
    )
    block = Command()._block(
        demo=demo,
        base="http://b",
        snippet={},
        talk=SimpleNamespace(thread_id=2),
        preview=demo_preview_ensure(workspace=workspace, owner=owner),
        claude_code=False,
    )
    line = next(line for line in block.splitlines() if line.startswith("See a preview: "))
    assert ("serves none: start with CALVIN_MODE=hosted" in line) is (mode != "hosted"), line
