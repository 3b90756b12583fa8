"""The dashboard and web-channel views through Django's test client: login, tenancy, starting, replying, files."""

import asyncio
import re
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

import calvin.asgi  # noqa: F401  (its request_finished receiver, connected as under uvicorn, whatever ran before)
from sessions.models import Message, Session, Thread, Turn
from sessions.services import session_start
from tests.dashboard.conftest import PNG_1X1
from tools.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


@pytest.fixture
def own_session(workspace, owner_member):
    return session_start(workspace=workspace, owner=owner_member, prompt="Acme nightly build")


@pytest.fixture
def stored_files():
    names = []

    def store(thread, name: str, content: bytes, content_type: str) -> Message:
        stored = default_storage.save(f"tool-files/test/{name}", ContentFile(content))
        names.append(stored)
        return Message.objects.create(
            thread=thread,
            kind=Message.Kind.FILE,
            author=Message.Author.AGENT,
            file=stored,
            file_name=name,
            file_title=name,
            content_type=content_type,
        )

    yield store
    for name in names:
        default_storage.delete(name)


def body_of(response) -> bytes:
    # The view streams an async body (uvicorn sends it chunk by chunk); read it to the end.
    async def collect():
        return b"".join([chunk async for chunk in response.streaming_content])

    return asyncio.run(collect())


def test_every_page_needs_a_login(client, own_session, stored_files):
    thread_id = own_session.thread_id
    image = stored_files(own_session.thread, "chart.png", PNG_1X1, "image/png")
    for url in ("/", "/w/acme/", f"/threads/{thread_id}/", f"/threads/{thread_id}/files/{image.id}/"):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"] == f"/accounts/login/?next={url}"
    for url, data in (
        ("/w/acme/threads/start/", {"prompt": "sneak in"}),
        (f"/threads/{thread_id}/reply/", {"text": "sneak in"}),
    ):
        response = client.post(url, data)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert not Message.objects.filter(text="sneak in").exists()
    assert Session.objects.count() == 1


def test_a_member_sees_only_their_workspaces_threads(owner_client, own_session, foreign_session):
    home = owner_client.get("/w/acme/")
    assert home.status_code == 200
    page = home.content.decode()
    assert "Acme nightly build" in page and f'href="/threads/{own_session.thread_id}/"' in page
    assert "Globex secret plan" not in page and f'href="/threads/{foreign_session.thread_id}/"' not in page

    own = owner_client.get(f"/threads/{own_session.thread_id}/")
    assert own.status_code == 200
    assert "Acme nightly build" in own.content.decode()
    assert f"/ws/threads/{own_session.thread_id}/" in own.content.decode()

    foreign = owner_client.get(f"/threads/{foreign_session.thread_id}/")
    assert foreign.status_code == 404
    assert b"Globex secret plan" not in foreign.content


def test_the_start_form_starts_in_the_pages_workspace_and_names_no_other(owner_client, workspace, other_workspace):
    page = owner_client.get("/w/acme/").content.decode()
    start_form = page[page.index('action="/w/acme/threads/start/"') :].split("</form>")[0]
    assert "<select" not in start_form and 'name="workspace"' not in page  # the home's filters have selects
    assert "Globex" not in page and "/w/globex/" not in page


def test_starting_a_session_creates_thread_session_message_and_turn(owner_client, workspace, owner_member):
    response = owner_client.post("/w/acme/threads/start/", {"prompt": "Fix the flaky test"})

    thread = Thread.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/threads/{thread.id}/"
    assert thread.workspace == workspace and thread.channel_kind == Thread.ChannelKind.WEB
    assert thread.started_by == owner_member and thread.title == "Fix the flaky test"
    session = Session.objects.get(thread=thread)
    assert session.workspace == workspace and session.owner == owner_member
    assert session.status == Session.Status.QUEUED and Path(session.directory).is_dir()
    message = Message.objects.get(thread=thread)
    assert (message.author, message.kind, message.member, message.text) == (
        Message.Author.PERSON,
        Message.Kind.TEXT,
        owner_member,
        "Fix the flaky test",
    )
    turn = Turn.objects.get(session=session)
    assert turn.prompt == message and turn.status == Turn.Status.QUEUED


@pytest.mark.parametrize(
    "case",
    ["another-workspace", "no-such-workspace", "no-prompt"],
)
def test_starting_a_session_is_refused_without_one_of_ones_workspaces_and_a_prompt(
    owner_client, workspace, other_workspace, case
):
    data = {
        "another-workspace": ("/w/globex/threads/start/", {"prompt": "Do it for Globex"}, 404),
        "no-such-workspace": ("/w/no-such/threads/start/", {"prompt": "Do it"}, 404),
        "no-prompt": ("/w/acme/threads/start/", {"prompt": ""}, 400),
    }[case]
    url, data, status = data
    response = owner_client.post(url, data)
    assert response.status_code == status
    if status == 400:
        assert b"Write what the agent should do" in response.content
    for model in (Thread, Session, Message, Turn):
        assert not model.objects.exists(), model.__name__


def test_a_reply_posts_a_person_message_and_queues_a_turn(owner_client, own_session, owner_member):
    thread_id = own_session.thread_id
    response = owner_client.post(f"/threads/{thread_id}/reply/", {"text": "Also check the CI cache"})
    assert response.status_code == 302 and response["Location"] == f"/threads/{thread_id}/"

    reply = Message.objects.filter(thread_id=thread_id).latest("id")
    assert (reply.author, reply.member, reply.text) == (Message.Author.PERSON, owner_member, "Also check the CI cache")
    turns = list(Turn.objects.filter(session=own_session).order_by("id"))
    assert len(turns) == 2  # the prompt's turn stays queued: a reply never replaces it
    assert turns[-1].prompt == reply and all(t.status == Turn.Status.QUEUED for t in turns)
    assert "Also check the CI cache" in owner_client.get(f"/threads/{thread_id}/").content.decode()


def test_a_reply_to_another_workspaces_thread_is_404(owner_client, foreign_session):
    response = owner_client.post(f"/threads/{foreign_session.thread_id}/reply/", {"text": "Hello Globex"})
    assert response.status_code == 404
    assert not Message.objects.filter(text="Hello Globex").exists()
    assert Turn.objects.filter(session=foreign_session).count() == 1


def test_an_image_is_served_inline_with_its_type_and_nosniff(owner_client, own_session, stored_files):
    image = stored_files(own_session.thread, "chart.png", PNG_1X1, "image/png")
    response = owner_client.get(f"/threads/{own_session.thread_id}/files/{image.id}/")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response["Content-Disposition"] == 'inline; filename="chart.png"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert body_of(response) == PNG_1X1

    page = owner_client.get(f"/threads/{own_session.thread_id}/").content.decode()
    assert f'<img class="inline" src="/threads/{own_session.thread_id}/files/{image.id}/"' in page


def test_a_non_image_is_served_as_an_attachment(owner_client, own_session, stored_files):
    html = b"<script>alert(document.cookie)</script>"
    document = stored_files(own_session.thread, "report.html", html, "text/html")
    response = owner_client.get(f"/threads/{own_session.thread_id}/files/{document.id}/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="report.html"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]
    assert body_of(response) == html

    page = owner_client.get(f"/threads/{own_session.thread_id}/").content.decode()
    assert f'<a href="/threads/{own_session.thread_id}/files/{document.id}/">report.html</a>' in page
    assert "<img" not in page


def test_another_workspaces_file_is_404(owner_client, own_session, foreign_session, stored_files):
    foreign = stored_files(foreign_session.thread, "globex.png", PNG_1X1, "image/png")
    # Neither through the other workspace's thread, nor by pairing its message id with one's own thread.
    for url in (
        f"/threads/{foreign_session.thread_id}/files/{foreign.id}/",
        f"/threads/{own_session.thread_id}/files/{foreign.id}/",
    ):
        response = owner_client.get(url)
        assert response.status_code == 404, url
        assert PNG_1X1 not in response.content


def test_a_message_that_is_not_a_file_has_no_file_url(owner_client, own_session):
    prompt = Message.objects.get(thread=own_session.thread)
    assert owner_client.get(f"/threads/{own_session.thread_id}/files/{prompt.id}/").status_code == 404


def shown_message_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'id="message-(\d+)"', page)]


def test_a_long_thread_shows_its_latest_page_with_a_link_to_earlier_ones(owner_client, own_session):
    thread = own_session.thread
    Message.objects.bulk_create(
        [Message(thread=thread, author=Message.Author.AGENT, text=f"line {i}") for i in range(119)]
    )
    ids = list(Message.objects.filter(thread=thread).values_list("id", flat=True))
    assert len(ids) == 120

    latest = owner_client.get(f"/threads/{thread.id}/").content.decode()
    assert shown_message_ids(latest) == ids[-50:]
    assert f'href="?before={ids[-50]}"' in latest and f'data-live="/ws/threads/{thread.id}/"' in latest

    earlier = owner_client.get(f"/threads/{thread.id}/", {"before": ids[-50]}).content.decode()
    assert shown_message_ids(earlier) == ids[-100:-50]
    assert f'href="?before={ids[-100]}"' in earlier
    assert "data-live" not in earlier and f'href="/threads/{thread.id}/">latest messages</a>' in earlier

    first = owner_client.get(f"/threads/{thread.id}/", {"before": ids[-100]}).content.decode()
    assert shown_message_ids(first) == ids[:20]
    assert "?before=" not in first and "Acme nightly build" in first  # the prompt, on the first page


def test_a_thread_page_is_bounded_however_large_its_messages(owner_client, own_session):
    thread = own_session.thread
    Message.objects.bulk_create(
        [Message(thread=thread, author=Message.Author.AGENT, text="x" * 40_000) for _ in range(200)]
    )
    response = owner_client.get(f"/threads/{thread.id}/")
    assert response.status_code == 200
    assert len(shown_message_ids(response.content.decode())) == 50
    assert len(response.content) < 50 * 41_000 + 20_000  # not the 8 MB of the whole thread


@pytest.mark.parametrize("before", ["abc", "-1", "1e3", "99999999999999999999999"])
def test_a_page_before_something_that_is_not_a_message_id_is_refused(owner_client, own_session, before):
    response = owner_client.get(f"/threads/{own_session.thread_id}/", {"before": before})
    assert response.status_code == 400


def test_recent_tool_calls_on_the_home_page_are_only_the_persons_workspaces(owner_client, own_session, foreign_session):
    own = ToolCall.objects.create(session=own_session, tool="post_card", status=ToolCall.Status.APPLIED)
    foreign = ToolCall.objects.create(session=foreign_session, tool="send_file", status=ToolCall.Status.FAILED)
    page = owner_client.get("/w/acme/").content.decode()
    assert f"<td>{own.id}</td><td>post_card</td>" in page
    assert f"<td>{foreign.id}</td>" not in page and "send_file" not in page
    assert f'href="/threads/{foreign_session.thread_id}/"' not in page and "Globex secret plan" not in page


@pytest.mark.parametrize(("messages", "has_earlier"), [(50, False), (51, True)])
def test_the_earlier_link_appears_exactly_when_there_are_earlier_messages(
    owner_client, own_session, messages, has_earlier
):
    thread = own_session.thread  # the prompt is its first message
    Message.objects.bulk_create(
        [Message(thread=thread, author=Message.Author.AGENT, text=f"line {i}") for i in range(messages - 1)]
    )
    page = owner_client.get(f"/threads/{thread.id}/").content.decode()
    assert len(shown_message_ids(page)) == 50
    assert ('id="earlier-messages"' in page) is has_earlier


def test_the_home_page_lists_the_latest_twenty_tool_calls(owner_client, own_session):
    calls = ToolCall.objects.bulk_create(
        [ToolCall(session=own_session, tool="post_card", status=ToolCall.Status.APPLIED) for _ in range(21)]
    )
    page = owner_client.get("/w/acme/").content.decode()
    shown = [int(i) for i in re.findall(r"<td>(\d+)</td><td>post_card</td>", page)]
    assert shown == sorted((c.id for c in calls), reverse=True)[:20]
