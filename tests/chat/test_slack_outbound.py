"""Outbound Slack: the Slack chat adapter and the ordered outbox, against the Web API stand-in
with the real worker, tools called over real MCP HTTP."""

import logging
import re
import threading
import time

import pytest
from django.db import close_old_connections, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone
from slack_sdk.errors import SlackApiError

import tools.services.messages as messages_module
from calvin.chat.base import ChatPermanentError
from calvin.chat.models import SlackLane, SlackPost
from calvin.chat.slack import lanes, outbox
from calvin.chat.slack.adapter import SlackChannel
from calvin.chat.slack.installations import installation_save
from calvin.chat.slack.outbox_tasks import drain_slack_lane, sweep_slack_lanes
from calvin.chat.slack.text import INERT_AT
from calvin.chat.slack.web_api import slack_client
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from secrets_vault.services import secret_set
from sessions.models import Message, Turn
from sessions.services import agent_reply_post, inbox_post, runner_start, session_start, system_notice_post
from tests.conftest import Agent, text_of, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CHANNEL = "C0001"
ROOT = "1700000000.000001"
TOKEN = "xoxb-standin-team-0001"
TOKEN_SHAPE = re.compile(r"xox[abpre]-[A-Za-z0-9-]{8,}")  # "xoxb-[redacted]" is what redaction leaves
CARD = {
    "root": "root",
    "elements": {
        "root": {"type": "Card", "props": {"title": "Nightly"}, "children": ["t"]},
        "t": {"type": "Text", "props": {"text": "All green"}},
    },
}


def slack_agent(gateway, workspace, channel=CHANNEL, root=ROOT) -> Agent:
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(
        workspace=workspace, owner=owner, title="slack", channel_kind="slack", channel_id=channel, thread_ts=root
    )
    runner, token = runner_start(session=session)
    return Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")


def lanes_idle() -> bool:
    return not SlackPost.objects.filter(status__in=outbox.WAITING).exists()


def settled() -> bool:
    """Every tool call's effect applied and every post it made sent (or failed)."""
    return not ToolCall.objects.filter(status__in=["pending", "applying"]).exists() and lanes_idle()


@pytest.fixture
def agent(gateway, workspace, slack_team, celery_worker):
    yield slack_agent(gateway, workspace)
    # Let the worker finish this test's effects and posts before the tables are truncated under it.
    wait_for(settled, timeout=30)


def ok(result) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def posted(standin, count: int = 1, channel: str = CHANNEL, timeout: float = 15) -> list[dict]:
    """The channel's messages once there are `count` of them (beside the ones asked for, none)."""
    return wait_for(lambda: len(m := standin.messages(channel)) >= count and m, timeout=timeout)


def texts(standin, channel: str = CHANNEL) -> list[str]:
    return [m["text"] for m in standin.messages(channel)]


def post_ids(message) -> list[int]:
    return list(SlackPost.objects.filter(message=message).order_by("id").values_list("id", flat=True))


# The adapter's effects reach Slack, in the thread


def test_send_message_reaches_slack_in_the_thread_and_records_the_ts(agent, standin):
    sent = ok(agent.nanoclaw.call("send_message", {"text": "Halfway there", "to": "thread"}))
    [message] = posted(standin)
    assert (message["text"], message["thread_ts"]) == ("Halfway there", ROOT)
    call = standin.ok_calls_of("chat.postMessage")[0]
    assert call.headers["Authorization"] == f"Bearer {TOKEN}"
    row = Message.objects.get(id=sent["messageId"])
    [post] = SlackPost.objects.filter(message=row)
    assert message["metadata"] == {"event_type": "calvin_post", "event_payload": {"post_id": post.id}}
    wait_for(lambda: Message.objects.get(id=row.id).platform_ts == message["ts"])
    tool_call = wait_for(lambda: (c := ToolCall.objects.get(id=row.tool_call_id)).platform_ids.get("slack_ts") and c)
    assert tool_call.platform_ids == {"message_id": row.id, "slack_ts": message["ts"]}
    assert tool_call.status == ToolCall.Status.APPLIED


def test_post_card_reaches_slack_as_its_block_kit(agent, standin):
    call_id = ok(agent.call("post_card", {"spec": CARD}))["tool_call_id"]
    [message] = posted(standin)
    payload = ToolCall.objects.get(id=call_id).payload
    assert message["blocks"] == payload["blocks"] and message["blocks"]
    assert (message["text"], message["thread_ts"]) == (payload["text"], ROOT)


def test_send_file_makes_the_three_calls_with_the_bytes_and_title(agent, standin):
    content = b"all green\n" * 1000
    (agent.directory / "report.txt").write_bytes(content)
    result = agent.call("send_file", {"path": "report.txt", "comment": "The report", "title": "Nightly"})
    assert not result.is_error, text_of(result)
    [message] = posted(standin)
    assert [c.method for c in standin.calls] == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
    get_url, _, complete = standin.calls
    assert (get_url.params["filename"], int(get_url.params["length"])) == ("report.txt", len(content))
    file_id = complete.params["files"][0]["id"]
    assert complete.params["files"] == [{"id": file_id, "title": "Nightly"}]
    assert (complete.params["channel_id"], complete.params["thread_ts"]) == (CHANNEL, ROOT)
    assert standin.uploads[file_id]["bytes"] == content
    assert (message["text"], message["files"][0]["id"], message["thread_ts"]) == ("The report", file_id, ROOT)
    wait_for(lambda: SlackPost.objects.get(kind="file").slack_file_id == file_id)


def test_edit_message_updates_the_slack_message_in_place(agent, standin):
    sent = ok(agent.nanoclaw.call("send_message", {"text": "Build running", "to": "thread"}))
    [first] = posted(standin)
    ok(agent.nanoclaw.call("edit_message", {"messageId": sent["messageId"], "text": "Build passed"}))
    wait_for(lambda: standin.ok_calls_of("chat.update"))
    [update] = standin.ok_calls_of("chat.update")
    assert (update.params["channel"], update.params["ts"], update.params["text"]) == (
        CHANNEL,
        first["ts"],
        "Build passed",
    )
    [message] = standin.messages(CHANNEL)
    assert message["text"] == "Build passed" and message["edited"]
    assert len(standin.calls_of("chat.postMessage")) == 1


def test_add_reaction_reacts_on_the_slack_message(agent, standin):
    sent = ok(agent.nanoclaw.call("send_message", {"text": "Deployed", "to": "thread"}))
    [first] = posted(standin)
    ok(agent.nanoclaw.call("add_reaction", {"messageId": sent["messageId"], "emoji": ":tada:"}))
    wait_for(lambda: standin.ok_calls_of("reactions.add"))
    [call] = standin.ok_calls_of("reactions.add")
    assert (call.params["channel"], call.params["timestamp"], call.params["name"]) == (CHANNEL, first["ts"], "tada")
    assert standin.messages(CHANNEL)[0]["reactions"] == ["tada"]


@pytest.mark.parametrize(
    ("written", "slack_name"), [("thumbs_up", "+1"), ("party_popper", "tada"), (":heart:", "heart")]
)
def test_a_reaction_reaches_slack_by_slacks_name_for_it(agent, standin, written, slack_name):
    # The seed's own example, thumbs_up, is no Slack name: sent unchanged, Slack answers invalid_name.
    sent = ok(agent.nanoclaw.call("send_message", {"text": "Deployed", "to": "thread"}))
    posted(standin)
    ok(agent.nanoclaw.call("add_reaction", {"messageId": sent["messageId"], "emoji": written}))
    wait_for(lambda: standin.calls_of("reactions.add"))
    [call] = standin.calls_of("reactions.add")
    assert (call.params["name"], call.answer) == (slack_name, {"ok": True})
    wait_for(lambda: ToolCall.objects.get(tool="add_reaction").status == ToolCall.Status.APPLIED)


def test_the_standin_refuses_an_emoji_name_slack_does_not_have(standin):
    # As Slack does: the CLDR name is not one of Slack's, its short name is.
    standin.add_team(team_id="T0001", bot_token=TOKEN, bot_user_id="U0BOT", bot_id="B0BOT")
    for name, error in [("thumbs_up", "invalid_name"), ("+1", "message_not_found"), ("thumbsup", "message_not_found")]:
        with pytest.raises(SlackApiError) as refused:
            slack_client(TOKEN).reactions_add(channel=CHANNEL, timestamp="1.2", name=name)
        assert refused.value.response["error"] == error, name


def test_a_reaction_already_there_counts_as_done(agent, standin):
    sent = ok(agent.nanoclaw.call("send_message", {"text": "Deployed", "to": "thread"}))
    [first] = posted(standin)
    slack_client(TOKEN).reactions_add(channel=CHANNEL, timestamp=first["ts"], name="tada")  # someone was quicker
    ok(agent.nanoclaw.call("add_reaction", {"messageId": sent["messageId"], "emoji": "tada"}))
    call_id = ToolCall.objects.get(tool="add_reaction").id
    post = wait_for(lambda: SlackPost.objects.filter(kind="reaction", status__in=["sent", "failed"]).first())
    assert post.status == "sent"
    assert ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED
    assert standin.calls_of("reactions.add")[-1].answer == {"ok": False, "error": "already_reacted"}


def test_the_agents_reply_notices_and_system_inbox_messages_reach_the_slack_thread(agent, standin, workspace):
    session = agent.session
    agent_reply_post(session=session, text="Done: 3 files changed")
    system_notice_post(thread_id=session.thread_id, text="The session was stopped")
    inbox_post(session=session, text="Your scheduled task is due")
    inbox_post(session=session, text="from a person", author=Message.Author.PERSON)  # came from Slack: not echoed
    posted(standin, 3)
    time.sleep(0.3)
    assert texts(standin) == ["Done: 3 files changed", "The session was stopped", "Your scheduled task is due"]
    assert {m["thread_ts"] for m in standin.messages(CHANNEL)} == {ROOT}
    # A web thread's messages are only rows.
    web = session_start(workspace=workspace, title="web")
    agent_reply_post(session=web, text="web only")
    system_notice_post(thread_id=web.thread_id, text="web notice")
    time.sleep(0.3)
    assert len(standin.calls_of("chat.postMessage")) == 3
    assert not SlackPost.objects.filter(message__thread_id=web.thread_id).exists()


# Limits: long text, large cards, the channel's pace


def test_a_100000_character_reply_is_split_and_delivered_in_order(agent, standin):
    text = "\n\n".join(f"Paragraph {i}: " + "the quick brown fox jumps over the lazy dog. " * 20 for i in range(110))
    assert len(text) >= 100_000
    agent_reply_post(session=agent.session, text=text)
    wait_for(settled, timeout=20)
    calls = standin.calls_of("chat.postMessage")
    assert all(c.answer.get("ok") for c in calls), [c.answer for c in calls if not c.answer.get("ok")]
    assert len(calls) == len(standin.messages(CHANNEL)) >= 3
    assert "".join(texts(standin)) == text  # every part, in order, nothing lost at the cuts


def test_a_card_of_more_than_50_blocks_leaves_as_several_messages_in_order(agent, standin):
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": f"row {i}"}} for i in range(120)]
    with transaction.atomic():
        SlackChannel().post_card(
            thread=agent.session.thread, items=[], blocks=blocks, fallback_text="Big card", tool_call_id=None
        )
    messages = posted(standin, 3)
    assert [len(m["blocks"]) for m in messages] == [50, 50, 20]
    assert [b for m in messages for b in m["blocks"]] == blocks
    assert all(c.answer.get("ok") for c in standin.calls_of("chat.postMessage"))
    assert messages[0]["text"] == "Big card" and "continued" in messages[1]["text"]


def test_the_lane_keeps_the_channels_pace_so_slack_never_has_to_refuse(agent, standin, settings):
    settings.CALVIN_SLACK_CHANNEL_PACE_SECONDS = 0.4
    standin.channel_pace = 0.4  # Slack answers 429 to a post sooner than this after the last
    for i in range(4):
        system_notice_post(thread_id=agent.session.thread_id, text=f"notice {i}")
    posted(standin, 4)
    assert [c.status for c in standin.calls_of("chat.postMessage")] == [200] * 4
    times = [c.at for c in standin.calls_of("chat.postMessage")]
    assert all(later - earlier >= 0.4 for earlier, later in zip(times, times[1:], strict=False))


# Failures: 429, 5xx, "ok": false, a dead worker


def test_a_429_storm_is_delivered_late_but_once_and_in_order(agent, standin):
    standin.fail("chat.postMessage", "429", count=5, retry_after=1)
    started = time.monotonic()
    for i in range(3):
        ok(agent.nanoclaw.call("send_message", {"text": f"step {i}", "to": "thread"}))
    posted(standin, 3, timeout=30)
    assert time.monotonic() - started >= 4.5  # five Retry-After: 1 waits
    time.sleep(0.5)
    assert texts(standin) == ["step 0", "step 1", "step 2"]
    assert [c.status for c in standin.calls_of("chat.postMessage")].count(429) == 5
    assert set(SlackPost.objects.values_list("status", flat=True)) == {"sent"}


def test_a_500_is_retried_after_asking_slack_and_delivered_once(agent, standin):
    standin.fail("chat.postMessage", "500", count=1)
    ok(agent.nanoclaw.call("send_message", {"text": "once", "to": "thread"}))
    posted(standin)
    wait_for(settled)
    assert texts(standin) == ["once"]
    assert [c.status for c in standin.calls_of("chat.postMessage")] == [500, 200]
    # The 500 may have hidden a post that arrived: the retry asked the thread first.
    methods = [c.method for c in standin.calls]
    assert methods == ["chat.postMessage", "conversations.replies", "chat.postMessage"]
    assert standin.calls_of("conversations.replies")[0].params["include_all_metadata"] in ("1", "true", True)
    assert SlackPost.objects.get().attempts == 2


def test_a_timeout_whose_post_arrived_is_not_posted_again(agent, standin, settings, monkeypatch):
    settings.CALVIN_SLACK_HTTP_TIMEOUT = 0.3
    standin.fail("chat.postMessage", "slow", count=1, delay=0.6)  # Slack takes it, the answer comes too late
    real_find = lanes._post_find

    def find_once_slack_has_it(*args):  # the retry's question, asked once the slow post landed
        wait_for(lambda: standin.messages(CHANNEL), timeout=5)
        return real_find(*args)

    monkeypatch.setattr(lanes, "_post_find", find_once_slack_has_it)
    ok(agent.nanoclaw.call("send_message", {"text": "just once", "to": "thread"}))
    wait_for(settled, timeout=20)
    assert texts(standin) == ["just once"]
    post = SlackPost.objects.get()
    assert (post.status, post.slack_ts, post.attempts) == ("sent", standin.messages(CHANNEL)[0]["ts"], 2)
    assert len(standin.calls_of("chat.postMessage")) == 1


def test_ok_false_fails_the_call_tells_the_agent_and_the_thread(agent, standin):
    standin.fail("chat.postMessage", "ok_false", count=1, error="channel_not_found")
    sent = ok(agent.nanoclaw.call("send_message", {"text": "into the void", "to": "thread"}))
    call_id = Message.objects.get(id=sent["messageId"]).tool_call_id
    call = wait_for(lambda: (c := ToolCall.objects.get(id=call_id)).status == ToolCall.Status.FAILED and c)
    assert "channel_not_found" in call.error
    told = f"send_message (call {call_id}) was not delivered to Slack: "
    inbox = Message.objects.get(thread=agent.session.thread, author="system", text__startswith=told)
    assert Turn.objects.filter(session=agent.session, prompt=inbox).exists()  # the agent hears of it
    [notice] = posted(standin)  # the post after the failed one still goes: the thread hears of it
    assert notice["text"].startswith(told) and "channel_not_found" in notice["text"]
    assert len(standin.calls_of("chat.postMessage")) == 2


def test_an_edit_slack_refuses_fails_the_edits_own_call(agent, standin):
    sent = ok(agent.nanoclaw.call("send_message", {"text": "Build running", "to": "thread"}))
    posted(standin)
    standin.fail("chat.update", "ok_false", count=1, error="cant_update_message")
    ok(agent.nanoclaw.call("edit_message", {"messageId": sent["messageId"], "text": "Build passed"}))
    edit = wait_for(lambda: ToolCall.objects.filter(tool="edit_message", status="failed").first())
    assert "cant_update_message" in edit.error
    assert ToolCall.objects.get(tool="send_message").status == ToolCall.Status.APPLIED  # the send itself arrived
    [_, notice] = posted(standin, 2)
    assert notice["text"].startswith(f"edit_message (call {edit.id}) was not delivered to Slack")


def test_a_long_message_whose_first_part_fails_sends_none_of_the_rest(agent, standin):
    standin.fail("chat.postMessage", "ok_false", count=1, error="channel_not_found")
    agent_reply_post(session=agent.session, text="\n\n".join("x" * 30_000 for _ in range(3)))
    notice = posted(standin)[0]  # the thread is told; no stray second or third part
    wait_for(settled)
    time.sleep(0.3)
    assert [m["text"] for m in standin.messages(CHANNEL)] == [notice["text"]]
    assert (
        notice["text"].startswith("The agent's reply could not be delivered to Slack")
        and "channel_not_found" in notice["text"]
    )
    assert list(SlackPost.objects.filter(message__author="agent").values_list("status", flat=True)) == ["failed"] * 3
    assert not Turn.objects.filter(session=agent.session).exists()  # a reply's failure is no turn for the agent


def test_5xx_until_the_attempts_run_out_fails_the_call(agent, standin, settings):
    settings.CALVIN_SLACK_POST_ATTEMPTS = 2
    standin.fail("chat.postMessage", "500", count=2)
    sent = ok(agent.nanoclaw.call("send_message", {"text": "unlucky", "to": "thread"}))
    call_id = Message.objects.get(id=sent["messageId"]).tool_call_id
    call = wait_for(lambda: (c := ToolCall.objects.get(id=call_id)).status == ToolCall.Status.FAILED and c)
    assert "gave up after 2 attempts" in call.error
    posted(standin)  # the notice about it
    assert "unlucky" not in texts(standin)


def test_a_post_left_sending_whose_message_is_in_slack_is_not_posted_again(agent, standin):
    # A worker died between Slack taking the post and the commit that recorded it.
    thread = agent.session.thread
    with transaction.atomic():
        message = Message.objects.create(thread=thread, kind="text", author="agent", text="survivor")
        post = outbox.slack_post_enqueue(
            team_id="T0001", channel_id=CHANNEL, kind="message", payload={"text": "survivor"}, thread_ts=ROOT
        )
        SlackPost.objects.filter(id=post.id).update(status="sending", attempts=1, message=message)
        # What the dead worker's call did at Slack:
        answer = slack_client(TOKEN).chat_postMessage(
            channel=CHANNEL,
            text="survivor",
            thread_ts=ROOT,
            metadata={"event_type": "calvin_post", "event_payload": {"post_id": post.id}},
        )
    wait_for(settled)
    post.refresh_from_db()
    assert (post.status, post.slack_ts) == ("sent", answer["ts"])
    assert len(standin.calls_of("chat.postMessage")) == 1
    # The message's copy of the ts is written just after the post's own commit.
    wait_for(lambda: Message.objects.get(id=message.id).platform_ts == answer["ts"])


def test_a_file_left_sending_whose_upload_completed_is_not_uploaded_again(agent, standin):
    (agent.directory / "a.txt").write_bytes(b"abc")
    result = agent.call("send_file", {"path": "a.txt"})
    assert not result.is_error, text_of(result)
    posted(standin)
    wait_for(settled)
    # As if the worker died after completeUploadExternal, before recording it.
    SlackPost.objects.filter(kind="file").update(status="sending")
    drain_slack_lane.delay(SlackPost.objects.get(kind="file").lane_id)
    wait_for(settled)
    time.sleep(0.3)
    assert len(standin.calls_of("files.completeUploadExternal")) == 1
    assert len(standin.messages(CHANNEL)) == 1


# Order and tenancy


def test_posts_to_one_channel_leave_in_the_order_they_were_made(agent, standin, settings):
    settings.CALVIN_SLACK_CHANNEL_PACE_SECONDS = 0.05
    results = agent.nanoclaw.call_many("send_message", [{"text": f"burst {i}", "to": "thread"} for i in range(8)])
    for result in results:
        ok(result)
    wait_for(lambda: ToolCall.objects.filter(tool="send_message", status="applied").count() == 8)
    with transaction.atomic():
        for i in range(5):
            system_notice_post(thread_id=agent.session.thread_id, text=f"notice {i}")
    posted(standin, 13, timeout=30)
    # An effect's place is its call's: the calls' workers may enqueue their posts in any order.
    made = [
        p.payload["text"] for p in SlackPost.objects.order_by(Coalesce("tool_call__created_at", "created_at"), "id")
    ]
    assert texts(standin) == made
    assert made[-5:] == [f"notice {i}" for i in range(5)]
    assert sorted(made[:8]) == sorted(f"burst {i}" for i in range(8))


def test_an_effect_made_before_the_reply_leaves_before_it_however_late_its_worker_runs(agent, standin, monkeypatch):
    real = messages_module.send_message_effect

    def late(call):
        time.sleep(1.0)  # a busy worker, or a second one that is slower
        return real(call)

    monkeypatch.setattr(messages_module, "send_message_effect", late)
    ok(agent.nanoclaw.call("send_message", {"text": "step 1", "to": "thread"}))
    agent_reply_post(session=agent.session, text="final reply")
    lanes.slack_lane_drain(lane_id=SlackLane.objects.get().id)  # a second worker, free while the first sleeps
    assert standin.messages(CHANNEL) == []
    posted(standin, 2, timeout=20)
    assert texts(standin) == ["step 1", "final reply"]


def test_a_call_waiting_for_a_person_does_not_hold_the_channel(agent, standin):
    ok(agent.nanoclaw.call("send_message", {"text": "step 1", "to": "thread"}))
    wait_for(settled)
    call = ToolCall.objects.get(tool="send_message")
    ToolCall.objects.filter(id=call.id).update(status=ToolCall.Status.AWAITING_APPROVAL)  # as an approval holds it
    agent_reply_post(session=agent.session, text="while someone decides")
    posted(standin, 2)
    assert texts(standin) == ["step 1", "while someone decides"]


def test_a_call_stuck_for_minutes_does_not_hold_the_channel(agent, standin):
    stuck = ToolCall.objects.create(session=agent.session, tool="send_message", status="pending", payload={})
    ToolCall.objects.filter(id=stuck.id).update(created_at=timezone.now() - timezone.timedelta(minutes=10))
    try:
        agent_reply_post(session=agent.session, text="not held")
        posted(standin)
    finally:
        ToolCall.objects.filter(id=stuck.id).update(status="failed")


def test_a_post_enqueued_while_the_drainer_releases_the_lane_is_still_sent(agent, standin, monkeypatch):
    thread = agent.session.thread
    monkeypatch.setattr(outbox, "queue_on_commit", lambda *args: None)  # no drain comes with a new post
    real_serve = lanes._lane_serve
    late, errors = [], []

    def serve_then_a_post_arrives(lane, lease):
        served = real_serve(lane, lease)
        if not late:

            def enqueue():  # another process, while this drainer still holds the lane
                try:
                    late.append(system_notice_post(thread_id=thread.id, text="late"))
                    lanes.slack_lane_drain(lane_id=lane.id)  # its drain finds the lane held and leaves
                except Exception as exc:
                    errors.append(exc)
                finally:
                    close_old_connections()

            worker = threading.Thread(target=enqueue)
            worker.start()
            worker.join()
            assert standin.messages(CHANNEL)[-1]["text"] == "first"  # "late" was not taken by that drain
        return served

    monkeypatch.setattr(lanes, "_lane_serve", serve_then_a_post_arrives)
    system_notice_post(thread_id=thread.id, text="first")
    drain_slack_lane.delay(SlackLane.objects.get().id)
    posted(standin, 2)
    assert texts(standin) == ["first", "late"]
    assert late and not errors


def test_the_sweep_drains_a_lane_whose_drain_was_lost(agent, standin, monkeypatch):
    monkeypatch.setattr(outbox, "queue_on_commit", lambda *args: None)
    system_notice_post(thread_id=agent.session.thread_id, text="lost and found")
    time.sleep(0.3)
    assert standin.messages(CHANNEL) == []
    assert sweep_slack_lanes() == 0  # too recent to be lost
    SlackPost.objects.update(created_at=timezone.now() - timezone.timedelta(minutes=5))
    assert sweep_slack_lanes() == 1
    posted(standin)
    assert texts(standin) == ["lost and found"]


def test_another_teams_thread_goes_with_that_teams_token(agent, standin, gateway, django_user_model, celery_worker):
    user = django_user_model.objects.create_user("other-owner", password="pw-other-123")
    other = workspace_create(name="Globex", slug="globex", owner_user=user)
    team = standin.add_team(team_id="T0002", bot_token="xoxb-standin-team-0002", bot_user_id="U0BOT2", bot_id="B0BOT2")
    installation_save(workspace=other, team_id="T0002", bot_token=team.bot_token, bot_id="B0BOT2")
    theirs = slack_agent(gateway, other, channel=CHANNEL, root="1700000000.000009")  # the same channel id
    ok(theirs.nanoclaw.call("send_message", {"text": "for Globex", "to": "thread"}))
    ok(agent.nanoclaw.call("send_message", {"text": "for Acme", "to": "thread"}))
    posted(standin, 2)
    wait_for(settled)
    by_text = {c.params["text"]: c.headers["Authorization"] for c in standin.ok_calls_of("chat.postMessage")}
    assert by_text == {"for Globex": "Bearer xoxb-standin-team-0002", "for Acme": f"Bearer {TOKEN}"}
    assert SlackLane.objects.count() == 2  # one lane per team and channel


def test_a_workspace_without_slack_fails_the_call_and_says_why(agent, standin):
    from calvin.chat.slack.installations import installation_remove

    installation_remove(team_id="T0001")
    sent = ok(agent.nanoclaw.call("send_message", {"text": "anyone?", "to": "thread"}))
    call_id = Message.objects.get(id=sent["messageId"]).tool_call_id
    call = wait_for(lambda: (c := ToolCall.objects.get(id=call_id)).status == ToolCall.Status.FAILED and c)
    assert "not installed" in call.error
    assert standin.calls == []


# What leaves: mentions, secrets, tokens


def test_channel_wide_mentions_are_neutralised_in_messages_and_cards(agent, standin):
    ok(
        agent.nanoclaw.call(
            "send_message", {"text": "<!channel> deploy done @here <!subteam^S1|@devs>", "to": "thread"}
        )
    )
    posted(standin)
    with transaction.atomic():
        SlackChannel().post_card(
            thread=agent.session.thread,
            items=[],
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "ping <!everyone>"}}],
            fallback_text="@channel card",
            tool_call_id=None,
        )
    first, card = posted(standin, 2)
    assert first["text"] == f"{INERT_AT}channel deploy done {INERT_AT}here {INERT_AT}devs"
    assert card["blocks"][0]["text"]["text"] == f"ping {INERT_AT}everyone"
    assert card["text"] == f"{INERT_AT}channel card"
    assert "<!" not in standin.everything_recorded().split("chat.postMessage", 1)[1]


def test_calvins_own_text_is_redacted_and_an_agents_post_holding_a_secret_refused(agent, standin):
    secret_set(session=agent.session, name="DEPLOY_KEY", value="s3cr3t-value-42")
    system_notice_post(thread_id=agent.session.thread_id, text="failed with s3cr3t-value-42 in the output")
    [notice] = posted(standin)
    assert notice["text"] == "failed with [redacted] in the output"
    call = ToolCall.objects.create(session=agent.session, tool="send_message", status="applying", payload={})
    message = Message.objects.create(thread=agent.session.thread, kind="text", author="agent", text="s3cr3t-value-42")
    with pytest.raises(ChatPermanentError, match="DEPLOY_KEY"), transaction.atomic():
        SlackChannel().post_message(thread=agent.session.thread, message=message, tool_call_id=call.id)
    assert not SlackPost.objects.filter(message=message).exists()
    assert "s3cr3t-value-42" not in standin.everything_recorded()
    ToolCall.objects.filter(id=call.id).update(status="failed")


def test_no_token_in_a_tool_calls_error_or_any_log_line(agent, standin, caplog):
    caplog.set_level(logging.DEBUG)
    # Slack's answer echoing the token back must not carry it into Calvin.
    standin.fail("chat.postMessage", "ok_false", count=1, error=f"token_revoked {TOKEN}")
    sent = ok(agent.nanoclaw.call("send_message", {"text": "hello", "to": "thread"}))
    call_id = Message.objects.get(id=sent["messageId"]).tool_call_id
    call = wait_for(lambda: (c := ToolCall.objects.get(id=call_id)).status == ToolCall.Status.FAILED and c)
    posted(standin)
    wait_for(settled)
    assert "token_revoked" in call.error and not TOKEN_SHAPE.search(call.error)
    assert not any(TOKEN_SHAPE.search(p.error) for p in SlackPost.objects.all())
    assert not TOKEN_SHAPE.search(Message.objects.get(thread=agent.session.thread, author="system").text)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "Slack post" in logged and "token_revoked" in logged  # the failure was logged
    assert not TOKEN_SHAPE.search(logged)


def test_drainers_racing_for_one_lane_send_each_post_once_in_order(agent, standin, monkeypatch):
    """Several workers (or web processes' drains) at one lane: the lease lets one in at a time."""
    monkeypatch.setattr(outbox, "queue_on_commit", lambda *args: None)  # only the racing drainers send
    for i in range(12):
        system_notice_post(thread_id=agent.session.thread_id, text=f"n{i}")
    lane_id = SlackLane.objects.get().id
    standin.fail("chat.postMessage", "slow", count=12, delay=0.05)  # a wide window inside each send
    barrier, errors = threading.Barrier(4), []

    def drain():
        try:
            barrier.wait()
            for _ in range(6):
                lanes.slack_lane_drain(lane_id=lane_id)
                time.sleep(0.02)
        except Exception as exc:
            errors.append(exc)
        finally:
            close_old_connections()

    racers = [threading.Thread(target=drain) for _ in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert not errors, errors
    wait_for(lanes_idle, timeout=20)
    assert texts(standin) == [f"n{i}" for i in range(12)]
    assert len(standin.calls_of("chat.postMessage")) == 12
