"""The nanoclaw server's messaging over real MCP HTTP: destinations, send_message, send_file,
edit_message and add_reaction, with the real worker on PostgreSQL and Redis."""

import asyncio
import time
from pathlib import Path

import httpx2
import pytest
from django.core.exceptions import ValidationError

from calvin.workspaces.models import Agent as AgentConfig
from calvin.workspaces.models import Destination, Member
from calvin.workspaces.services import agent_create, workspace_create
from sessions.models import Message, Reaction, Session, Turn
from sessions.services import message_post_by_person, session_start
from tests.conftest import text_of, wait_for
from tools.dispatcher import DISPATCHER
from tools.models import ToolCall
from tools.tasks import apply_tool_call

pytestmark = pytest.mark.django_db(transaction=True)


def ok(result) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def refused(result, *expected: str) -> str:
    text = text_of(result)
    assert result.is_error, text
    for part in expected:
        assert part in text, text
    return text


def applied(call_id: int) -> ToolCall:
    return wait_for(lambda: (c := ToolCall.objects.get(id=call_id)).status == ToolCall.Status.APPLIED and c)


def delivered(message_id: int) -> Message:
    return wait_for(lambda: (m := Message.objects.get(id=message_id)).delivered_at is not None and m)


@pytest.fixture
def nano(agent):
    return agent.nanoclaw


def add_thread_destination(agent, name: str, **session_kwargs) -> Session:
    other = session_start(workspace=agent.session.workspace, title=f"{name} thread", **session_kwargs)
    Destination.objects.create(agent=agent.session.agent, name=name, thread=other.thread)
    return other


# send_message


def test_send_message_to_the_own_thread_returns_the_id_at_once_and_the_worker_delivers_it(nano):
    sent = ok(nano.call("send_message", {"text": "Halfway there", "to": "thread"}))
    message = delivered(sent["messageId"])
    assert (message.thread_id, message.text, message.author) == (nano.session.thread_id, "Halfway there", "agent")
    call = message.tool_call
    assert (call.server, call.tool, call.arguments) == (
        "nanoclaw",
        "send_message",
        {"text": "Halfway there", "to": "thread"},
    )
    applied(call.id)


def test_an_unknown_destination_is_refused_with_the_valid_names_and_nothing_is_stored(nano):
    add_thread_destination(nano, "Family Chat")  # normalised on write
    text = refused(nano.call("send_message", {"text": "hi", "to": "friends"}), "unknown destination 'friends'")
    assert text.endswith("thread, family-chat")
    assert not ToolCall.objects.filter(session=nano.session).exists()
    assert not Message.objects.filter(author="agent").exists()


def test_a_destination_of_another_agent_is_not_in_this_agents_map(nano, workspace):
    other_agent = agent_create(workspace=workspace, name="other")
    thread = session_start(workspace=workspace, title="theirs").thread
    Destination.objects.create(agent=other_agent, name="theirs", thread=thread)
    refused(nano.call("send_message", {"text": "hi", "to": "theirs"}), "unknown destination 'theirs'")


def test_send_message_to_a_chat_destination_goes_to_that_thread(nano):
    family = add_thread_destination(nano, "family")
    sent = ok(nano.call("send_message", {"text": "Dinner at 7", "to": "family"}))
    message = delivered(sent["messageId"])
    assert message.thread_id == family.thread_id and sent["to"] == "family"


def test_send_message_to_an_agent_queues_a_turn_in_its_inbox_making_a_session_when_none_runs(nano, workspace):
    worker = agent_create(workspace=workspace, name="worker-1")
    Destination.objects.create(agent=nano.session.agent, name="worker-1", target_agent=worker)
    assert not Session.objects.filter(agent=worker).exists()
    first = ok(nano.call("send_message", {"text": "Please run the tests", "to": "worker-1"}))
    second = ok(nano.call("send_message", {"text": "And the linter", "to": "worker-1"}))
    inbox = Session.objects.get(agent=worker)  # one session takes both
    assert inbox.owner_id == nano.session.owner_id
    messages = list(Message.objects.filter(thread=inbox.thread).order_by("id"))
    assert [m.id for m in messages] == [first["messageId"], second["messageId"]]
    assert [m.text for m in messages] == ["Please run the tests", "And the linter"]
    assert all(m.sender_agent_id == nano.session.agent_id and m.delivered_at for m in messages)
    turns = Turn.objects.filter(session=inbox).order_by("id")
    assert [t.prompt_id for t in turns] == [m.id for m in messages] and all(t.status == "queued" for t in turns)


def test_messages_to_an_agent_with_a_live_session_go_to_that_session(nano, workspace):
    worker = agent_create(workspace=workspace, name="worker-2")
    Destination.objects.create(agent=nano.session.agent, name="worker-2", target_agent=worker)
    running = session_start(workspace=workspace, agent=worker, title="already running")
    sent = ok(nano.call("send_message", {"text": "ping", "to": "worker-2"}))
    assert Message.objects.get(id=sent["messageId"]).thread_id == running.thread_id


def test_a_message_with_a_secret_is_refused(nano, settings):
    from secrets_vault.crypto import new_key
    from secrets_vault.services import secret_set

    settings.SP_STORE_KEY = [new_key()]
    secret_set(session=nano.session, name="API_TOKEN", value="s3cr3t-value-42")
    refused(
        nano.call("send_message", {"text": "token is s3cr3t-value-42", "to": "thread"}),
        "contains the value of the secret API_TOKEN",
    )
    assert not ToolCall.objects.exists()


# send_file


def test_send_file_goes_to_the_destination_with_its_display_name_and_text(nano):
    family = add_thread_destination(nano, "family")
    (nano.directory / "plot.csv").write_text("a,b\n1,2\n")
    result = ok(
        nano.call("send_file", {"path": "plot.csv", "to": "family", "text": "The data", "filename": "data.csv"})
    )
    call = applied(result["tool_call_id"])
    message = Message.objects.get(tool_call=call)
    assert (message.thread_id, message.file_name, message.file_title, message.text) == (
        family.thread_id,
        "data.csv",
        "data.csv",
        "The data",
    )
    assert call.server == "nanoclaw" and call.arguments["to"] == "family"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "/etc/passwd", "to": "thread"}, "outside"),
        ({"path": "missing.txt", "to": "thread"}, "missing.txt"),
        ({"path": "ok.txt", "to": "nowhere"}, "unknown destination 'nowhere'"),
        ({"path": "ok.txt", "to": "thread", "filename": "../evil"}, "filename is a display name"),
        ({"path": "ok.txt", "to": "thread", "filename": ".."}, "filename is a display name"),
    ],
)
def test_send_file_refusals(nano, arguments, expected):
    (nano.directory / "ok.txt").write_text("fine")
    refused(nano.call("send_file", arguments), expected)
    assert not ToolCall.objects.exists()


def test_both_servers_send_files_against_one_per_runner_limit(agent):
    (agent.directory / "ok.txt").write_text("fine")
    agent.runner.counts.filter(tool="send_file").update(used=48)
    ok(agent.nanoclaw.call("send_file", {"path": "ok.txt", "to": "thread"}))
    ok(agent.call("send_file", {"path": "ok.txt"}))
    limit = "limit of 50 files per runner reached"
    refused(agent.nanoclaw.call("send_file", {"path": "ok.txt", "to": "thread"}), limit)
    refused(agent.call("send_file", {"path": "ok.txt"}), limit)
    assert agent.runner.counts.get(tool="send_file").used == 50


# edit_message


def test_edit_message_changes_the_delivered_text_and_marks_it_edited(nano):
    sent = ok(nano.call("send_message", {"text": "Build is running", "to": "thread"}))
    delivered(sent["messageId"])
    edit = ok(nano.call("edit_message", {"messageId": sent["messageId"], "text": "Build passed"}))
    assert edit["messageId"] == sent["messageId"]
    message = wait_for(lambda: (m := Message.objects.get(id=sent["messageId"])).edited_at and m)
    assert message.text == "Build passed"


def test_edit_message_refuses_messages_this_agent_did_not_send(nano, make_agent, workspace):
    person = message_post_by_person(thread=nano.session.thread, member=nano.session.owner, text="mine")
    others = make_agent()  # same workspace, same default agent name "main" but a different session...
    foreign_agent = agent_create(workspace=workspace, name="someone-else")
    Session.objects.filter(id=others.session.id).update(agent=foreign_agent)
    theirs = ok(others.nanoclaw.call("send_message", {"text": "not yours", "to": "thread"}))
    tenant = workspace_create(name="Globex", slug="globex")
    far = session_start(workspace=tenant, title="far away")
    far_message = Message.objects.create(thread=far.thread, kind="text", author="agent", text="far")
    for message_id in (person.id, theirs["messageId"], far_message.id, 10**12):
        refused(
            nano.call("edit_message", {"messageId": message_id, "text": "x"}),
            f"message {message_id} is not one you sent",
        )
    assert not ToolCall.objects.filter(session=nano.session).exists()


def test_an_edit_queued_behind_its_send_applies_after_it_never_before(nano):
    # The dispatcher applies in id order; two workers' tasks need not: the edit's task comes first here.
    with DISPATCHER.held():
        sent = ok(nano.call("send_message", {"text": "draft", "to": "thread"}))
        ok(nano.call("edit_message", {"messageId": sent["messageId"], "text": "final"}))
        send_id, edit_id = ToolCall.objects.filter(session=nano.session).order_by("id").values_list("id", flat=True)
        apply_tool_call.delay(edit_id)
        time.sleep(1.0)
        message = Message.objects.get(id=sent["messageId"])
        assert message.delivered_at is None and message.text == "draft" and message.edited_at is None
        assert ToolCall.objects.get(id=edit_id).status in ("pending", "applying")
        assert ToolCall.objects.get(id=edit_id).attempts <= 1  # waiting costs no attempt
        apply_tool_call.delay(send_id)
        applied(send_id)
        applied(edit_id)
    message.refresh_from_db()
    assert message.text == "final" and message.edited_at >= message.delivered_at


# add_reaction


def test_add_reaction_with_a_shortcode_on_a_persons_message_in_the_own_thread(nano):
    person = message_post_by_person(thread=nano.session.thread, member=nano.session.owner, text="Ship it?")
    result = ok(nano.call("add_reaction", {"messageId": person.id, "emoji": "thumbs_up"}))
    wait_for(lambda: Reaction.objects.filter(message=person, emoji="+1").exists())
    ok(nano.call("add_reaction", {"messageId": person.id, "emoji": ":heart:"}))
    wait_for(lambda: Reaction.objects.filter(message=person, emoji="heart").exists())
    assert result["messageId"] == person.id
    # thumbsup and +1 are thumbs_up's other names: the same reaction, not three.
    for other in ("thumbsup", ":+1:"):
        ok(nano.call("add_reaction", {"messageId": person.id, "emoji": other}))
    wait_for(lambda: ToolCall.objects.filter(tool="add_reaction", status=ToolCall.Status.APPLIED).count() == 4)
    assert sorted(Reaction.objects.filter(message=person).values_list("emoji", flat=True)) == ["+1", "heart"]


@pytest.mark.parametrize(
    ("emoji", "close"),
    [("thumb_up", "thumbs_up"), ("rockt", "rocket"), ("partyparrot", "parrot"), ("zzqqzz", None)],
)
def test_add_reaction_refuses_a_name_no_emoji_has_with_the_closest_names(nano, emoji, close):
    person = message_post_by_person(thread=nano.session.thread, member=nano.session.owner, text="hi")
    result = nano.call("add_reaction", {"messageId": person.id, "emoji": emoji})
    refused(result, f"no standard emoji is called '{emoji}'")
    assert (f"did you mean {close}" in text_of(result)) if close else "did you mean" not in text_of(result)
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize("emoji", ["👍", "❤️", "Thumbs Up", "thumbs up", "<b>x</b>", "a" * 65, "::", "thumbs_up\n"])
def test_add_reaction_refuses_anything_but_a_shortcode(nano, emoji):
    person = message_post_by_person(thread=nano.session.thread, member=nano.session.owner, text="hi")
    refused(nano.call("add_reaction", {"messageId": person.id, "emoji": emoji}), "shortcode")
    assert not ToolCall.objects.exists()


def test_add_reaction_refuses_messages_outside_the_agents_threads(nano, workspace):
    elsewhere = session_start(workspace=workspace, agent=agent_create(workspace=workspace, name="x"), title="x")
    theirs = message_post_by_person(thread=elsewhere.thread, member=None, text="not in your threads")
    tenant = workspace_create(name="Globex", slug="globex")
    far = message_post_by_person(thread=session_start(workspace=tenant, title="far").thread, member=None, text="far")
    for message_id in (theirs.id, far.id):
        refused(nano.call("add_reaction", {"messageId": message_id, "emoji": "eyes"}), "not in one of your threads")


# Destinations, tool sets, availability


def test_destination_names_are_normalised_unique_and_never_the_reserved_thread(workspace):
    agent = agent_create(workspace=workspace, name="planner")
    thread = session_start(workspace=workspace, title="t").thread
    row = Destination.objects.create(agent=agent, name="  Worker  One!! ", thread=thread)
    assert row.name == "worker-one"
    with pytest.raises(Exception):  # noqa: B017 - the database's unique constraint
        Destination.objects.create(agent=agent, name="WORKER one", thread=thread)
    reserved = Destination(agent=agent, name="Thread", thread=thread)
    with pytest.raises(ValidationError, match="reserved"):
        reserved.clean()


def test_a_destination_in_another_workspace_is_refused(workspace):
    agent = agent_create(workspace=workspace, name="planner")
    tenant = workspace_create(name="Globex", slug="globex")
    foreign = Destination(agent=agent, name="spy", thread=session_start(workspace=tenant, title="t").thread)
    with pytest.raises(ValidationError, match="own workspace"):
        foreign.clean()
    foreign_agent = Destination(agent=agent, name="spy", target_agent=agent_create(workspace=tenant, name="p"))
    with pytest.raises(ValidationError, match="own workspace"):
        foreign_agent.clean()


def test_an_agent_given_only_calvin_gets_403_from_nanoclaw(agent):
    AgentConfig.objects.filter(id=agent.session.agent_id).update(tool_sets=["calvin"])
    # The default agent runs Claude Code, so approval_prompt is listed too.
    calvin = {t.name for t in agent.list_tools()}
    assert {"send_file", "post_card", "request_secret", "approval_prompt"} <= calvin
    assert not calvin & {"send_message", "send_card", "create_agent"}
    response = httpx2.post(
        agent.nanoclaw.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"authorization": f"Bearer {agent.token}", "accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 403
    assert response.json()["detail"] == "this session's agent is not given the nanoclaw tool set"


def test_the_nanoclaw_server_lists_the_seeds_nine_tools_in_hosted_mode(nano):
    names = [t.name for t in nano.list_tools()]
    assert names == [
        "send_message",
        "send_file",
        "edit_message",
        "add_reaction",
        "ask_user_question",
        "send_card",
        "create_agent",
        "install_packages",
        "add_mcp_server",
    ]
    schemas = {t.name: t.input_schema for t in nano.list_tools()}
    assert set(schemas["send_message"]["properties"]) == {"text", "to"}
    assert set(schemas["send_file"]["properties"]) == {"path", "to", "text", "filename"}
    assert set(schemas["edit_message"]["properties"]) == {"messageId", "text"}
    assert set(schemas["add_reaction"]["properties"]) == {"messageId", "emoji"}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "one-machine",
            {"send_message", "send_file", "edit_message", "add_reaction", "ask_user_question", "send_card"},
        ),
        ("self-hosted", None),
        ("hosted", None),
    ],
)
def test_nanoclaw_availability_per_mode(mode, expected):
    from mcp.client import Client

    from tools.availability import OFFERED
    from tools.server import build_server

    async def names():
        async with Client(build_server(mode, "nanoclaw")) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert asyncio.run(names()) == (expected or set(OFFERED["nanoclaw"]))


def test_members_only_see_their_own_workspaces_destinations_in_refusals(nano, workspace):
    """The valid names listed come from the caller's agent's map only, never another tenant's."""
    tenant = workspace_create(name="Globex", slug="globex")
    their_agent = agent_create(workspace=tenant, name="main")
    Destination.objects.create(
        agent=their_agent, name="globex-secret-room", thread=session_start(workspace=tenant).thread
    )
    text = refused(nano.call("send_message", {"text": "hi", "to": "x"}), "unknown destination")
    assert "globex" not in text
    assert Member.objects.filter(workspace=workspace).exists()


def test_a_session_gets_its_agents_standing_instructions_and_destinations_in_claude_md(workspace):
    planner = agent_create(workspace=workspace, name="planner", instructions="You plan the release.")
    child = agent_create(workspace=workspace, name="builder", instructions="You build it.", created_by=planner)
    Destination.objects.create(agent=child, name="parent", target_agent=planner)
    session = session_start(workspace=workspace, agent=child, title="build")
    text = (Path(session.directory) / "CLAUDE.md").read_text()
    assert "You build it." in text and "You plan the release." not in text
    assert "- `thread`" in text and "- `parent`" in text


def test_an_edit_of_a_message_in_another_agents_inbox_applies_at_once(nano, workspace):
    worker = agent_create(workspace=workspace, name="worker-4")
    Destination.objects.create(agent=nano.session.agent, name="worker-4", target_agent=worker)
    sent = ok(nano.call("send_message", {"text": "run the tests", "to": "worker-4"}))
    edit = ok(nano.call("edit_message", {"messageId": sent["messageId"], "text": "run the linter"}))
    assert edit == {"messageId": sent["messageId"], "status": "edited"}
    message = Message.objects.get(id=sent["messageId"])
    assert message.text == "run the linter" and message.edited_at is not None
    edits = ToolCall.objects.filter(tool="edit_message")
    assert [(c.status, c.payload) for c in edits] == [("applied", {"message_id": message.id})]


def test_the_shortest_shortcode_between_colons_is_taken(nano):
    person = message_post_by_person(thread=nano.session.thread, member=nano.session.owner, text="no")
    ok(nano.call("add_reaction", {"messageId": person.id, "emoji": ":x:"}))
    wait_for(lambda: Reaction.objects.filter(message=person, emoji="x").exists())


@pytest.mark.parametrize("path", ["/workspace/agent/out/chart.csv", "out/chart.csv", "/workspace/agent//out/chart.csv"])
def test_nanoclaws_workspace_agent_directory_is_the_session_directory(nano, path):
    (nano.directory / "out").mkdir()
    (nano.directory / "out" / "chart.csv").write_text("x,y\n")
    result = ok(nano.call("send_file", {"path": path, "to": "thread"}))
    assert result["file_name"] == "chart.csv"
    applied(result["tool_call_id"])


@pytest.mark.parametrize("path", ["/workspace/agent/../../etc/passwd", "/workspace/agentx/f.txt", "/workspace/agent"])
def test_the_workspace_agent_prefix_gives_no_way_out(nano, path):
    refused(nano.call("send_file", {"path": path, "to": "thread"}))
    assert not ToolCall.objects.exists()


def test_an_edit_of_a_message_that_was_never_delivered_fails_and_the_agent_is_told(nano, workspace):
    """The send failed for good (no Slack in this workspace): its edit fails too, instead of waiting forever."""
    from sessions.models import Thread

    room = Thread.objects.create(workspace=workspace, channel_kind="slack", channel_id="C123", thread_ts="")
    Destination.objects.create(agent=nano.session.agent, name="slack-room", thread=room)
    sent = ok(nano.call("send_message", {"text": "hello Slack", "to": "slack-room"}))
    send = Message.objects.get(id=sent["messageId"]).tool_call
    wait_for(lambda: ToolCall.objects.get(id=send.id).status == "failed")
    ok(nano.call("edit_message", {"messageId": sent["messageId"], "text": "hello again"}))
    call = wait_for(lambda: (c := ToolCall.objects.get(tool="edit_message")).status == "failed" and c)
    assert call.error.startswith(f"message {sent['messageId']} was never delivered (Calvin is not installed in this")
    notices = Message.objects.filter(thread=nano.session.thread, kind="system").values_list("text", flat=True)
    assert any("edit_message" in text and "never delivered" in text for text in notices), list(notices)
    assert Message.objects.get(id=sent["messageId"]).text == "hello Slack"


def test_a_long_unknown_destination_is_cut_in_the_refusal(nano):
    exactly = "d" * 64
    refused(nano.call("send_message", {"text": "hi", "to": exactly}), f"unknown destination '{exactly}':")
    text = refused(nano.call("send_message", {"text": "hi", "to": "e" * 65}), f"unknown destination '{'e' * 64}…'")
    assert "e" * 65 not in text


def test_a_call_that_meets_the_database_down_is_told_so_not_a_generic_error(agent, monkeypatch):
    # A COMMIT whose answer the restarting server never sent: the call may have been saved.
    from django.db import OperationalError

    from tools.nanoclaw_mcp import messaging

    def commit_answer_lost(**kwargs):
        raise OperationalError("consuming input failed: server closed the connection unexpectedly")

    monkeypatch.setattr(messaging, "message_send", commit_answer_lost)
    text = refused(agent.nanoclaw.call("send_message", {"text": "hello", "to": "thread"}), "database did not answer")
    assert "may still take effect" in text and "unexpected" not in text
