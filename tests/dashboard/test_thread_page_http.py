"""The thread page's reply and header over plain HTTP: JSON when asked, a redirect otherwise, clear
refusals, another workspace's thread out of reach; the header's state for each kind of session."""

import json

import pytest
from django.utils import timezone

from calvin.dashboard.selectors import thread_header_context
from calvin.workspaces.models import Agent
from calvin.workspaces.services import agent_create
from sessions.models import Message
from sessions.services import message_post_by_person, session_start

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def thread(workspace, owner_member):
    return session_start(workspace=workspace, owner=owner_member, title="Chat").thread


def test_a_reply_asked_as_json_answers_json(client, owner_member, thread):
    client.force_login(owner_member.user)
    response = client.post(f"/threads/{thread.id}/reply/", {"text": "Hello"}, **JSON)
    assert response.status_code == 201
    message = Message.objects.get(thread=thread, author="person")
    assert response.json() == {"ok": True, "message_id": message.id}
    assert message.text == "Hello" and message.member == owner_member


def test_a_plain_form_reply_is_redirected_to_the_thread(client, owner_member, thread):
    client.force_login(owner_member.user)
    response = client.post(f"/threads/{thread.id}/reply/", {"text": "Hello"})
    assert response.status_code == 302 and response["Location"] == f"/threads/{thread.id}/"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("x" * 40_001, "Not sent: a reply is at most 40,000 characters (this one has 40,001); your text is kept."),
        ("   ", "Not sent: write something first."),
    ],
)
def test_a_refused_reply_says_why_and_posts_nothing(client, owner_member, thread, text, error):
    client.force_login(owner_member.user)
    response = client.post(f"/threads/{thread.id}/reply/", {"text": text}, **JSON)
    assert response.status_code == 400
    assert response.json() == {"ok": False, "error": error}
    plain = client.post(f"/threads/{thread.id}/reply/", {"text": text})
    assert plain.status_code == 400 and plain.content.decode() == error
    assert not Message.objects.filter(thread=thread, author="person").exists()


def test_another_workspaces_person_cannot_reply(client, stranger_member, thread):
    client.force_login(stranger_member.user)
    response = client.post(f"/threads/{thread.id}/reply/", {"text": "I am not in Acme"}, **JSON)
    assert response.status_code == 404
    assert not Message.objects.filter(thread=thread).exists()


def test_the_header_state_for_each_kind_of_session(workspace, owner_member):
    plain = session_start(workspace=workspace, owner=owner_member, title="New")
    assert thread_header_context(plain.thread)["state_words"] == "waiting for a message"
    message_post_by_person(thread=plain.thread, member=owner_member, text="go")
    assert thread_header_context(plain.thread)["state_words"] == "waiting for a host to start it"

    plain.agent.paused_at = timezone.now()
    plain.agent.save(update_fields=["paused_at"])
    assert thread_header_context(plain.thread)["state"] == "paused"

    yours = agent_create(workspace=workspace, name="yours", provider=Agent.Provider.EXTERNAL)
    external = session_start(workspace=workspace, owner=owner_member, agent=yours, prompt="Are you there?")
    context = thread_header_context(external.thread)
    assert context["state_words"] == "waiting for your agent" and context["external"]
    servers = json.loads(context["mcp_json"])["mcpServers"]
    assert set(servers) == set(yours.tool_sets)
    assert {s["headers"]["Authorization"] for s in servers.values()} == {"Bearer <runner token>"}


def test_the_thread_page_names_the_thread_messages_apart_from_notices(client, owner_member, thread):
    """The root of the flash-message bug: the page's transcript is `thread_messages`; `messages`
    stays Django's notices."""
    message_post_by_person(thread=thread, member=owner_member, text="Hello")
    client.force_login(owner_member.user)
    response = client.get(f"/threads/{thread.id}/")
    assert [m.text for m in response.context["thread_messages"]] == ["Hello"]
    assert list(response.context["messages"]) == []
