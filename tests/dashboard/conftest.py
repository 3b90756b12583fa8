"""People in two workspaces, logged in through the real login form, and a card with every part."""

import re
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx2
import pytest
from playwright.sync_api import sync_playwright
from websockets.sync.client import connect

from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from sessions.services import session_start

OWNER_PASSWORD = "pw-owner-123"  # the `workspace` fixture's owner (tests/conftest.py)
STRANGER_PASSWORD = "pw-stranger-123"
MEMBER_PASSWORD = "pw-member-123"

# A valid 1x1 PNG (one opaque red pixel).
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)

CARD = {
    "root": "card",
    "elements": {
        "card": {
            "type": "Card",
            "props": {"title": "Nightly build report"},
            "children": ["intro", "branch", "duration", "table", "chart", "trend", "logs"],
        },
        "intro": {"type": "Text", "props": {"text": "All green except one flaky test."}},
        "branch": {"type": "Field", "props": {"label": "Branch", "value": "release-7"}},
        "duration": {"type": "Field", "props": {"label": "Duration", "value": "14m 02s"}},
        "table": {
            "type": "Table",
            "props": {"columns": ["Suite", "Passed", "Failed"], "rows": [["api", 412, 0], ["web", 198, 1]]},
        },
        "chart": {
            "type": "Chart",
            "props": {
                "kind": "bar",
                "title": "Minutes per suite",
                "series": [{"name": "minutes", "points": [{"label": "api", "value": 9}, {"label": "web", "value": 5}]}],
            },
        },
        "trend": {
            "type": "Chart",
            "props": {
                "kind": "line",
                "title": "Build minutes this week",
                "series": [{"name": "total", "points": [{"label": "Mon", "value": 15}, {"label": "Tue", "value": 14}]}],
            },
        },
        "logs": {"type": "Button", "props": {"label": "Open the logs", "url": "https://ci.example.com/runs/4711"}},
    },
}


@pytest.fixture
def owner_member(workspace):
    return Member.objects.select_related("user").get(workspace=workspace, user__username="owner")


@pytest.fixture
def plain_member(workspace, django_user_model):
    """ "member": in Acme, neither its owner nor an admin, and not the one who starts sessions there."""
    user = django_user_model.objects.create_user("member", password=MEMBER_PASSWORD)
    return Member.objects.create(workspace=workspace, user=user, role=Member.Role.MEMBER)


@pytest.fixture
def other_workspace(django_user_model):
    """Another tenant: "stranger" is its owner and no member of the `workspace` fixture's Acme."""
    user = django_user_model.objects.create_user("stranger", password=STRANGER_PASSWORD)
    return workspace_create(name="Globex", slug="globex", owner_user=user)


@pytest.fixture
def stranger_member(other_workspace):
    return Member.objects.select_related("user").get(workspace=other_workspace, user__username="stranger")


@pytest.fixture
def foreign_session(other_workspace, stranger_member):
    return session_start(workspace=other_workspace, owner=stranger_member, prompt="Globex secret plan")


def csrf_token_in(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def post_login_form(http, username: str, password: str, path: str = "/accounts/login/"):
    """One attempt through a real login form (the dashboard's or the admin's); returns the response."""
    token = csrf_token_in(http.get(path).text)
    return http.post(path, data={"username": username, "password": password, "csrfmiddlewaretoken": token})


@contextmanager
def logged_in(base_url: str, username: str, password: str):
    """An HTTP client logged in through the real login form; it keeps its cookies (log out with `log_out`)."""
    with httpx2.Client(base_url=base_url, timeout=10) as http:
        response = post_login_form(http, username, password)
        assert response.status_code == 302, response.text
        assert response.headers["location"] == "/"
        yield http


def log_out(http) -> None:
    """Press the header's "Log out" button: a POST with the page's CSRF token."""
    token = csrf_token_in(http.get("/", follow_redirects=True).text)  # `/` leads to the person's workspace
    response = http.post("/accounts/logout/", data={"csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.text


def login_cookie(base_url: str, username: str, password: str) -> str:
    """Log in through the real login form over HTTP; returns the `sessionid` cookie's value."""
    with logged_in(base_url, username, password) as http:
        return http.cookies["sessionid"]


def ws_connect(base_url: str, thread_id: int, *, sessionid: str | None = None, origin: str | None = None):
    """A real websocket client for a thread page's live feed."""
    url = base_url.replace("http://", "ws://", 1) + f"/ws/threads/{thread_id}/"
    headers = {"Cookie": f"sessionid={sessionid}"} if sessionid else {}
    return connect(url, origin=origin or base_url, additional_headers=headers, open_timeout=10, close_timeout=2)


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser(monkeypatch):
    """Debian's Chromium, driven by Playwright's sync API."""
    # The sync API keeps an event loop running in this thread; the test's ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser):
    page = browser.new_page()
    page.set_default_timeout(15_000)
    return page


def browser_login(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button:text-is('Log in')")
    # `/` takes the person on to their workspace's home (or to creating one).
    page.wait_for_url(re.compile(rf"^{re.escape(base_url)}/(w/[a-z0-9-]+/|workspaces/new/)$"))


def off_the_loop(fn, *args, **kwargs):
    """Run fn in another thread: Playwright's loop in this one refuses `asyncio.run` (the MCP client)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=60)


def thread_seq(thread_id: int) -> int:
    """The thread's live seq once what has committed is numbered (calvin/dashboard/live.py): a
    worker's change is numbered just after its commit, so a test that waited for the change alone
    could read the seq before it and then see that event as new."""
    from calvin.dashboard.live import live_stream_settle, thread_stream

    return live_stream_settle(thread_stream(thread_id))


def announced_message(thread_id: int, text: str = "hello", **fields):
    """An agent's message stored and announced as the services do (so it is in the live log)."""
    from django.db import transaction

    from calvin.events import MessagePosted, announce
    from sessions.models import Message, Thread

    with transaction.atomic():
        message = Message.objects.create(thread_id=thread_id, author=Message.Author.AGENT, text=text, **fields)
        workspace_id = Thread.objects.values_list("workspace_id", flat=True).get(id=thread_id)
        announce(MessagePosted(workspace_id=workspace_id, thread_id=thread_id, message_id=message.id))
    return message
