"""post_thread over real MCP with the real worker: a reply in another web thread, mentions made
plain, the owner named, approved by a person outside bypassPermissions, posted exactly once."""

import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta

import pytest

from approvals.models import PendingApproval
from approvals.services import CHANGED, approval_decide
from calvin.chat.links import thread_url
from calvin.workspaces.models import Member
from secrets_vault.services import secret_set
from sessions.models import Message, RunnerCount, Turn
from sessions.services import session_start
from tests.approvals.support import (  # noqa: F401  (_worker_idle_afterwards: a fixture, autouse)
    OWNER_PASSWORD,
    _worker_idle_afterwards,
    card_note,
    card_of,
    card_text,
    pressing,
)
from tests.conftest import text_of, wait_for
from tools.effects import post_thread_effect, tool_call_apply
from tools.models import ToolCall
from tools.tasks import apply_tool_call

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
ZWSP = "\u200b"


@pytest.fixture
def target(workspace):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    return session_start(workspace=workspace, owner=owner, title="Release room").thread


def mode(agent, permission_mode: str):
    agent.session.permission_mode = permission_mode
    agent.session.save(update_fields=["permission_mode"])
    return agent


@pytest.fixture
def bypass(agent):
    return mode(agent, "bypassPermissions")


def owner(agent) -> Member:
    return Member.objects.get(id=agent.session.owner_id)


def attribution(agent) -> str:
    return f"Posted for {owner(agent)} · {thread_url(agent.session.thread_id)}"


def posted(agent, target, text: str) -> dict:
    result = agent.call("post_thread", {"url": thread_url(target.id), "text": text})
    assert not result.is_error, text_of(result)
    return result.structured_content


def in_target(target) -> list[Message]:
    return list(Message.objects.filter(thread=target))


def refused(agent, arguments: dict, *expected: str) -> str:
    result = agent.call("post_thread", arguments)
    text = text_of(result)
    assert result.is_error, text
    for part in expected:
        assert part in text, text
    assert not ToolCall.objects.filter(session=agent.session).exists()
    assert not PendingApproval.objects.exists()
    return text


def in_background(agent, arguments: dict) -> Future:
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(agent.call, "post_thread", arguments)
    pool.shutdown(wait=False)
    return future


def asked(agent) -> PendingApproval:
    return wait_for(lambda: PendingApproval.objects.filter(session=agent.session).first(), timeout=20)


def answer_of(future: Future) -> dict:
    result = future.result(timeout=60)
    assert not result.is_error, text_of(result)
    return result.structured_content


# ---------------------------------------------------------------- bypassPermissions: posted at once


def test_in_bypass_permissions_it_posts_without_a_card_and_says_where(bypass, target):
    answer = posted(bypass, target, "The release is *green*.")
    (message,) = in_target(target)
    assert message.text == f"The release is *green*.\n\n{attribution(bypass)}"
    assert (message.author, message.kind, message.sender_agent_id) == ("agent", "text", bypass.session.agent_id)
    assert answer["status"] == "posted" and answer["message_id"] == str(message.id)
    assert answer["url"] == f"{thread_url(target.id)}#message-{message.id}"
    assert answer["message"].startswith(f"Posted into web thread {target.id} (Release room) as message {message.id}")
    assert not PendingApproval.objects.exists()
    call = ToolCall.objects.get(session=bypass.session, tool="post_thread")
    assert call.status == "applied" and call.platform_ids["message_id"] == message.id
    assert not Message.objects.filter(thread_id=bypass.session.thread_id, kind="card").exists()  # no card


def test_the_posted_for_line_names_the_owner_and_links_the_sessions_thread(bypass, target):
    Member.objects.filter(id=bypass.session.owner_id).update(display_name="Ada Lovelace")
    posted(bypass, target, "hello")
    (message,) = in_target(target)
    assert (
        message.text.splitlines()[-1]
        == f"Posted for Ada Lovelace · http://localhost:8000/threads/{bypass.session.thread_id}/"
    )


def test_a_slack_sessions_posted_for_line_links_its_slack_thread(bypass, target):
    # Seed 000: the line links the session's thread on the session's own platform.
    from sessions.models import Thread

    Thread.objects.filter(id=bypass.session.thread_id).update(
        channel_kind="slack", channel_id="C0RELEASE", thread_ts="1733500000.000100"
    )
    posted(bypass, target, "hello")
    (message,) = in_target(target)
    assert message.text.splitlines()[-1] == (
        f"Posted for {owner(bypass)} · https://slack.com/archives/C0RELEASE/p1733500000000100"
    )


def test_channel_wide_mentions_and_user_groups_become_plain_text(bypass, target):
    text = (
        "@channel @here @everyone @HERE <!channel> <!here> <!everyone> <!here|here> <!channel|@channel>"
        " <!subteam^S0123|@oncall> <!subteam^S0456> mail ops@here.example"
    )
    posted(bypass, target, text)
    (message,) = in_target(target)
    body = message.text.split("\n\n")[0]
    assert body == (
        f"@{ZWSP}channel @{ZWSP}here @{ZWSP}everyone @{ZWSP}HERE @{ZWSP}channel @{ZWSP}here @{ZWSP}everyone"
        f" @{ZWSP}here @{ZWSP}channel @{ZWSP}oncall @{ZWSP}user group mail ops@here.example"
    )
    for raw in ("<!", "@channel", "@here", "@everyone", "subteam"):
        assert raw not in body.replace("ops@here", ""), raw


def test_the_text_is_1_to_4000_characters(bypass, target):
    refused(bypass, {"url": thread_url(target.id), "text": ""}, "text: 1 to 4,000 characters (got 0)")
    refused(bypass, {"url": thread_url(target.id), "text": "x" * 4001}, "text: 1 to 4,000 characters (got 4,001)")
    refused(bypass, {"url": thread_url(target.id), "text": " \n "}, "text: must not be blank")
    posted(bypass, target, "x" * 4000)
    assert in_target(target)[0].text == "x" * 4000 + "\n\n" + attribution(bypass)


def test_every_problem_is_named_at_once(bypass):
    refused(bypass, {"url": "nope", "text": ""}, "url: expected a thread's link", "text: 1 to 4,000 characters")


def test_a_text_holding_a_session_secret_is_refused(bypass, target, vault):
    secret_set(session=bypass.session, name="API_TOKEN", value="tok-0123456789abcdef")
    text = refused(bypass, {"url": thread_url(target.id), "text": "use tok-0123456789abcdef"}, "secret API_TOKEN")
    assert "tok-0123456789abcdef" not in text
    assert not in_target(target)


# ---------------------------------------------------------------- where it may post


def test_the_sessions_own_thread_is_refused_pointing_to_a_normal_reply(bypass):
    refused(bypass, {"url": thread_url(bypass.session.thread_id), "text": "hi"}, "this session's own thread")


def test_a_thread_of_another_workspace_is_not_found_and_gets_nothing(bypass, other_workspace):
    stranger = Member.objects.get(workspace=other_workspace)
    foreign = session_start(workspace=other_workspace, owner=stranger, prompt="Globex plans").thread
    text = refused(bypass, {"url": thread_url(foreign.id), "text": "hi"}, f"there is no web thread {foreign.id}")
    assert "Globex" not in text
    assert list(Message.objects.filter(thread=foreign).values_list("text", flat=True)) == ["Globex plans"]


def test_a_slack_thread_is_refused_while_the_workspace_is_not_connected_to_slack(bypass):
    arguments = {"channel": "C0123ABCD", "ts": "1700000000.000100", "text": "hi"}
    refused(bypass, arguments, "not connected to Slack")


# ---------------------------------------------------------------- approval outside bypassPermissions


def test_outside_bypass_a_card_shows_the_target_and_the_exact_text_and_an_approval_posts_it(agent, target, gateway):
    future = in_background(agent, {"url": thread_url(target.id), "text": "Ship it @here"})
    approval = asked(agent)
    card = card_of(approval)
    assert card.thread_id == agent.session.thread_id  # the session's own thread
    shown = card_text(card)
    assert "Approval needed: post into another thread" in shown
    assert f"web thread {target.id} (Release room)\n{thread_url(target.id)}" in shown
    assert f"Ship it @\\u200bhere\n\n{attribution(agent)}" in shown  # the exact text, its invisible mark shown
    assert not in_target(target) and not future.done()
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as person:
        assert person.press(approval.id, "approve").status_code == 200
    answer = answer_of(future)
    (message,) = in_target(target)
    assert message.text == f"Ship it @{ZWSP}here\n\n{attribution(agent)}"
    assert answer["status"] == "posted" and answer["message_id"] == str(message.id)
    assert answer["approval_id"] == approval.id and answer["message"].endswith("Approved by owner.")
    assert card_note(approval, "Approved by owner · applied")  # "applying" shows first, until the effect is applied
    # The agent heard the outcome in the call: no inbox message queues a turn to say it again.
    assert not Turn.objects.filter(session=agent.session).exists()


@pytest.mark.parametrize("permission_mode", ["default", "acceptEdits", "plan"])
def test_a_denial_says_who_denied_it_and_posts_nothing(agent, target, permission_mode):
    mode(agent, permission_mode)
    future = in_background(agent, {"url": thread_url(target.id), "text": "hello"})
    approval = asked(agent)
    approval_decide(approval_id=approval.id, member=owner(agent), approve=False, via="web")
    answer = answer_of(future)
    assert answer["status"] == "denied" and answer["decided_by"] == "owner"
    assert answer["message"].startswith(f"Denied by owner (approval {approval.id}): nothing was posted")
    assert "expired" not in answer["message"].lower()
    assert not in_target(target)
    assert ToolCall.objects.get(id=approval.tool_call_id).status == "denied"
    assert not Turn.objects.filter(session=agent.session).exists()


def test_an_undecided_request_expires_at_the_bound_and_says_expired(agent, target, settings):
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 1.5
    started = time.monotonic()
    result = agent.call("post_thread", {"url": thread_url(target.id), "text": "hello"})
    waited = time.monotonic() - started
    answer = result.structured_content
    assert not result.is_error and answer["status"] == "expired", answer
    assert answer["message"].startswith("Expired (approval") and "nobody decided within 2 s" in answer["message"]
    assert "denied" not in answer["message"].lower()
    assert 1.5 <= waited < 15, waited
    approval = PendingApproval.objects.get(session=agent.session)
    assert approval.status == S.EXPIRED
    assert approval.expires_at - approval.requested_at == timedelta(seconds=1.5)  # the workspace's 24 h, shortened
    assert not in_target(target)


# ---------------------------------------------------------------- counts and exactly once


def test_20_per_runner_exact_under_20_parallel_calls(bypass, target):
    posted(bypass, target, "first")  # makes the counter row
    RunnerCount.objects.filter(runner=bypass.runner, tool="post_thread").update(used=10)
    results = bypass.call_many("post_thread", [{"url": thread_url(target.id), "text": f"n{i}"} for i in range(20)])
    errors = [text_of(r) for r in results if r.is_error]
    assert len(errors) == 10, errors
    assert all("limit of 20 calls per runner reached" in e for e in errors)
    assert all(r.structured_content["status"] == "posted" for r in results if not r.is_error)
    assert RunnerCount.objects.get(runner=bypass.runner, tool="post_thread").used == 20
    assert len(in_target(target)) == 11


def test_the_effect_posts_once_however_often_it_runs(bypass, target):
    answer = posted(bypass, target, "once")
    call = ToolCall.objects.select_related("session").get(id=answer["tool_call_id"])
    apply_tool_call(call.id)  # a duplicated task: the claim lets nobody in
    call.attempts = 2  # a retry after a worker died: the adapter finds its post
    assert post_thread_effect(call)["message_id"] == int(answer["message_id"])
    assert len(in_target(target)) == 1


def test_a_post_changed_after_its_approval_is_not_posted(agent, target):
    """What is approved is what runs: the worker posts the text the card showed or nothing."""
    future = in_background(agent, {"url": thread_url(target.id), "text": "hello"})
    approval = asked(agent)
    assert PendingApproval.transition(approval.id, source="pending", target="approved", decided_via="web")
    call = ToolCall.objects.get(id=approval.tool_call_id)
    changed = {**call.arguments, "post": "something nobody approved"}
    ToolCall.objects.filter(id=call.id).update(status=ToolCall.Status.APPLYING, arguments=changed)
    tool_call_apply(tool_call_id=call.id)
    call.refresh_from_db()
    assert call.status == ToolCall.Status.FAILED and call.error == CHANGED
    assert not in_target(target)
    assert answer_of(future)["status"] == "failed"
