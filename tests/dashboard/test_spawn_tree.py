"""A thread page's "Spawned threads" panel: the tree its thread belongs to, from the root, nested,
with links, each status in words and this thread marked; none for a thread alone in its tree,
and never another workspace's sessions. Over HTTP, then once in Chromium."""

import re
from html.parser import HTMLParser

import pytest
from playwright.sync_api import expect

from sessions.models import Session
from sessions.services import session_start
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login


@pytest.fixture
def tree(workspace, owner_member, foreign_session):
    """Plan the release (idle) → Write the API client (running) → Write its tests (waiting to
    start), and → Update the docs (finished); a Globex session's parent link forged to the root."""

    def spawned(title, parent, status, prompt=""):
        session = session_start(workspace=workspace, owner=owner_member, title=title, prompt=prompt)
        Session.objects.filter(id=session.id).update(parent=parent, status=status)
        return Session.objects.select_related("thread").get(id=session.id)

    root = spawned("Plan the release", None, Session.Status.IDLE)
    client = spawned("Write the API client", root, Session.Status.RUNNING)
    tests = spawned("Write its tests", client, Session.Status.QUEUED, prompt="Test the client")  # its turn waits
    docs = spawned("Update the docs", root, Session.Status.FINISHED)
    Session.objects.filter(id=foreign_session.id).update(parent=root)
    return {"root": root, "client": client, "tests": tests, "docs": docs}


class Tree(HTMLParser):
    """The panel's list as (nesting level, the row's text, its link or None) per thread."""

    def __init__(self):
        super().__init__()
        self.rows, self.level, self.inside = [], 0, False

    def handle_starttag(self, tag, attrs):
        if tag == "ul":
            self.level += 1
        elif tag == "li":
            self.rows.append([self.level, "", None])
        elif tag == "a" and self.rows and not self.rows[-1][1].strip():
            self.rows[-1][2] = dict(attrs)["href"]

    def handle_endtag(self, tag):
        if tag == "ul":
            self.level -= 1

    def handle_data(self, data):
        if self.rows and self.level:
            self.rows[-1][1] += data


def panel_rows(html: str) -> list[tuple[int, str, str | None]]:
    section = re.search(r'<section class="panel spawn-tree".*?</section>', html, re.S)
    assert section, "no Spawned threads panel"
    parser = Tree()
    parser.feed(section.group(0))
    return [(level, " ".join(text.split()), link) for level, text, link in parser.rows]


@pytest.mark.django_db
def test_the_panel_shows_the_whole_tree_from_the_root_with_this_thread_marked(client, owner_member, tree):
    client.force_login(owner_member.user)
    page = client.get(f"/threads/{tree['tests'].thread_id}/").content.decode()
    assert '<h3 id="spawned-threads-title">Spawned threads</h3>' in page
    assert panel_rows(page) == [
        (1, "Plan the release waiting for a message", f"/threads/{tree['root'].thread_id}/"),
        (2, "Write the API client running", f"/threads/{tree['client'].thread_id}/"),
        (3, "Write its tests this thread waiting to start", None),
        (2, "Update the docs finished", f"/threads/{tree['docs'].thread_id}/"),
    ]
    assert "Globex" not in page  # its forged link to Acme's root shows nothing of it
    # From the root's page: the same tree, the root marked.
    rows = panel_rows(client.get(f"/threads/{tree['root'].thread_id}/").content.decode())
    assert rows[0] == (1, "Plan the release this thread waiting for a message", None)
    assert [text for _, text, _ in rows[1:]] == [
        "Write the API client running",
        "Write its tests waiting to start",
        "Update the docs finished",
    ]


@pytest.mark.django_db
def test_a_thread_alone_in_its_tree_has_no_panel(client, owner_member, workspace, foreign_session, tree):
    alone = session_start(workspace=workspace, owner=owner_member, title="Just a chat")
    client.force_login(owner_member.user)
    page = client.get(f"/threads/{alone.thread_id}/").content.decode()
    assert "Just a chat" in page and 'id="spawned-threads"' not in page
    # Globex's own page: its session's parent link leads into Acme, whose sessions it never shows.
    client.force_login(foreign_session.owner.user)
    page = client.get(f"/threads/{foreign_session.thread_id}/").content.decode()
    assert 'id="spawned-threads"' not in page and "Plan the release" not in page


@pytest.mark.django_db(transaction=True)
def test_the_panel_in_chromium_leads_through_the_tree(gateway, page, tree):
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(f"{gateway}/threads/{tree['tests'].thread_id}/")
    panel = page.locator("#spawned-threads")
    expect(panel.locator("h3")).to_have_text("Spawned threads")
    expect(panel.locator("li.current > .spawn-row")).to_contain_text("Write its tests")
    expect(panel.locator("li.current strong[aria-current=page]")).to_have_text("Write its tests")
    expect(panel.locator(".spawn-status")).to_have_text(
        ["waiting for a message", "running", "waiting to start", "finished"]
    )
    page.screenshot(path="/tmp/spawn-tree.png", full_page=True)
    panel.get_by_role("link", name="Plan the release").click()
    expect(page).to_have_url(f"{gateway}/threads/{tree['root'].thread_id}/")
    expect(page.locator("#spawned-threads li.current strong")).to_have_text("Plan the release")
    expect(page.locator("#spawned-threads a")).to_have_text(
        ["Write the API client", "Write its tests", "Update the docs"]
    )
