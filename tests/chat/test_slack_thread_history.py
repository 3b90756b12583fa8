"""read_thread within Slack's limit for apps outside its Marketplace (about 1 conversations.replies
call a minute per team, 15 messages a call), over real MCP with the real worker and the Slack Web
API stand-in, which keeps that limit as Slack does.

A thread Calvin takes part in is read from the history it keeps (the events it received, the
posts it made) without asking Slack; one it lacks is asked for once, within the limit, and the
answer says what is missing, why and when Slack may be asked again."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from slack_sdk.errors import SlackApiError

from calvin.chat.models import SlackEvent, SlackHistoryMessage, SlackPost, SlackThreadHistory
from calvin.chat.slack.history import slack_history_start, slack_history_take_event
from calvin.chat.slack.inbound import slack_team_uninstall
from calvin.chat.slack.read_limits import slack_read_claim
from calvin.chat.slack.web_api import slack_client
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from sessions.models import Session
from sessions.services import agent_reply_post
from tests.chat.conftest import read_claims_forgotten
from tests.chat.test_slack_threads import ALICE, BOB, thread_in
from tests.conftest import text_of, wait_for
from tests.support.slack_requests import event_body, mention, message
from tests.tools.test_read_thread import bodies
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CHANNEL = "C0TEAM"
TEAM = "T0001"
TOKEN = "xoxb-standin-team-0001"


@pytest.fixture(autouse=True)
def named(standin, slack_team, workspace):
    """Alice is a member of the workspace with her Slack id; Bob is known to Slack only."""
    Member.objects.create(workspace=workspace, slack_user_id="U0ALICE", display_name="Alice")
    standin.add_user("U0BOB", "bob")


def send(slack_sender, event: dict) -> None:
    response = slack_sender.event(event_body(team_id=TEAM, event=event))
    assert response.status_code == 200, response.text


def said(standin, channel: str, event: dict) -> dict:
    """The message as Slack keeps it too (the 👀 reaction lands on it)."""
    kept = {k: v for k, v in event.items() if k in ("ts", "user", "text", "thread_ts", "bot_id", "username")}
    with standin._lock:
        standin.channels[channel].append({"type": "message", **kept})
    return event


def next_ts(standin) -> str:
    """The next ts on Slack's clock (the stand-in's), as Slack gives one to each new message."""
    with standin._lock:
        return standin._next_ts()


def events_applied():
    wait_for(lambda: not SlackEvent.objects.filter(status=SlackEvent.Status.RECEIVED).exists(), timeout=20)


def read(agent, **arguments) -> str:
    result = agent.call("read_thread", arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


def replies_calls(standin) -> list:
    return standin.calls_of("conversations.replies")


def a_minute_passes(standin) -> None:
    """Slack's minute, for Calvin and for the stand-in, without waiting it out."""
    read_claims_forgotten()
    with standin._lock:
        standin._last_read.clear()


def foreign_thread(standin, replies: int, channel: str = "C0OTHER") -> str:
    """A thread Calvin never took part in; returns its root's ts."""
    return thread_in(standin, channel, ("What broke?", ALICE), [(f"reply {i}", BOB) for i in range(1, replies + 1)])


# ---------------------------------------------------------------- threads Calvin takes part in


def test_a_thread_calvin_took_part_in_is_read_whole_from_what_it_kept(agent, slack_sender, standin):
    root, on_it, ci, typo, edit, deletion = (next_ts(standin) for _ in range(6))
    # Its session starts with a top-level mention: Calvin records the thread from its root on.
    send(slack_sender, said(standin, CHANNEL, mention(user="U0ALICE", channel=CHANNEL, ts=root, text="deploy please")))
    events_applied()
    session = Session.objects.get(thread__channel_id=CHANNEL, thread__thread_ts=root)
    # Not addressed to Calvin, another app's, then an edit and a deletion.
    for event in [
        message(user="U0BOB", channel=CHANNEL, ts=on_it, text="on it?", thread_ts=root),
        {
            **message(user="", channel=CHANNEL, ts=ci, text="CI is green", thread_ts=root),
            "subtype": "bot_message",
            "bot_id": "B0CI",
            "username": "ci",
        },
        message(user="U0BOB", channel=CHANNEL, ts=typo, text="typo", thread_ts=root),
    ]:
        send(slack_sender, said(standin, CHANNEL, {k: v for k, v in event.items() if v != ""}))
        events_applied()
    changed = {"user": "U0BOB", "text": "on it? (edited)", "ts": on_it, "thread_ts": root}
    send(
        slack_sender,
        {"type": "message", "subtype": "message_changed", "channel": CHANNEL, "ts": edit, "message": changed},
    )
    deleted = {"user": "U0BOB", "text": "typo", "ts": typo, "thread_ts": root}
    send(
        slack_sender,
        {
            "type": "message",
            "subtype": "message_deleted",
            "channel": CHANNEL,
            "ts": deletion,
            "deleted_ts": typo,
            "previous_message": deleted,
        },
    )
    events_applied()
    # The agent's reply, posted by the outbox: kept with the ts Slack gave it.
    agent_reply_post(session=session, text="Deployed v42.")
    post = wait_for(lambda: SlackPost.objects.filter(status="sent", slack_ts__gt="").first(), timeout=20)

    text = read(agent, channel=CHANNEL, ts=root)
    assert bodies(text) == ["<@U0BOT> deploy please", "on it? (edited)", "CI is green", "Deployed v42."]
    assert "the first message and the latest 3 of its 3 replies; 0 older replies were left out" in text
    assert "Partial:" not in text
    assert f"┌─ message {root} · first message · by Alice (person) ·" in text
    assert "· reply 2 of 3 · by ci (app) ·" in text
    assert f"┌─ message {post.slack_ts} · reply 3 of 3 · by Calvin's app (agent) ·" in text
    # A reply's ts finds its thread in what Calvin kept too.
    assert bodies(read(agent, channel=CHANNEL, ts=ci)) == bodies(text)
    assert replies_calls(standin) == []
    call = ToolCall.objects.filter(session=agent.session, tool="read_thread").first()
    assert call.result["partial"] is False and "note" not in call.result


def test_a_thread_calvin_joined_late_is_asked_only_for_what_came_before(agent, slack_sender, standin):
    root = foreign_thread(standin, 3, channel=CHANNEL)
    joined = "1799999999.000100"  # after the stand-in's replies
    send(
        slack_sender,
        said(standin, CHANNEL, mention(user="U0ALICE", channel=CHANNEL, ts=joined, text="summarise", thread_ts=root)),
    )
    events_applied()
    later = message(user="U0BOB", channel=CHANNEL, ts="1799999999.000200", text="thanks", thread_ts=root)
    send(slack_sender, said(standin, CHANNEL, later))
    events_applied()

    text = read(agent, channel=CHANNEL, ts=root)
    assert bodies(text) == ["What broke?", "reply 1", "reply 2", "reply 3", "<@U0BOT> summarise", "thanks"]
    assert "Partial:" not in text
    (asked,) = replies_calls(standin)
    assert (asked.params["ts"], asked.params["latest"], asked.params["limit"]) == (root, joined, "15")
    # Now whole: read again (a minute later, when Slack would answer), Slack is not asked.
    a_minute_passes(standin)
    again = read(agent, channel=CHANNEL, ts=joined)
    assert bodies(again) == bodies(text) and "Partial:" not in again
    assert len(replies_calls(standin)) == 1


# ---------------------------------------------------------------- threads Calvin lacks


def test_a_foreign_thread_is_read_with_one_call_and_marked_partial(agent, standin):
    root = foreign_thread(standin, 30)
    text = read(agent, channel="C0OTHER", ts=root)
    (asked,) = replies_calls(standin)
    assert asked.status == 200 and asked.params["limit"] == "15"
    assert bodies(text) == ["What broke?"] + [f"reply {i}" for i in range(1, 15)]
    assert (
        "Partial: Slack allows this app 1 conversations.replies call a minute and 15 messages per call: Calvin holds"
        " the first message and 14 of the thread's 30 replies (15 messages fetched from Slack just now); replies 15"
        " to 30 are not held, so not shown. The next call to Slack is allowed in 60 s: read_thread then fetches the"
        " next 15." in text
    )
    assert (
        "Shown: the first message and 14 of its 30 replies, the latest Calvin holds; 16 are not shown: not held" in text
    )
    assert "· reply 14 of 30 ·" in text
    assert (
        text.splitlines()[-3]
        == "··· replies 15 to 30 are not shown here: Calvin does not hold them (see Partial above) ···"
    )
    call = ToolCall.objects.get(session=agent.session, tool="read_thread")
    assert call.result["partial"] is True and "replies 15 to 30 are not held" in call.result["note"]
    assert (call.result["replies_total"], call.result["replies_shown"]) == (30, 14)


def test_a_second_read_within_the_minute_asks_slack_nothing_and_says_when_it_may(agent, standin):
    root = foreign_thread(standin, 30)
    read(agent, channel="C0OTHER", ts=root)
    time.sleep(1.1)
    again = read(agent, channel="C0OTHER", ts=root)
    assert len(replies_calls(standin)) == 1  # and none refused by Slack
    assert bodies(again) == ["What broke?"] + [f"reply {i}" for i in range(1, 15)]
    assert "(15 messages fetched" not in again
    wait = int(again.split("The next call to Slack is allowed in ")[1].split(" s")[0])
    assert 0 < wait < 60
    # A minute later the next read asks only for what Calvin lacks: from the last reply it holds.
    a_minute_passes(standin)
    third = read(agent, channel="C0OTHER", ts=root)
    first_call, second_call = replies_calls(standin)
    assert second_call.params["oldest"] == standin.messages("C0OTHER")[14]["ts"]  # reply 14's
    assert bodies(third) == ["What broke?"] + [f"reply {i}" for i in range(1, 29)]
    assert "replies 29 to 30 are not held" in third


def test_a_foreign_thread_of_15_messages_is_whole_after_one_call(agent, standin):
    root = foreign_thread(standin, 14)
    assert "Partial:" not in read(agent, channel="C0OTHER", ts=root)
    a_minute_passes(standin)  # Slack would answer: what Calvin holds is whole, so it is not asked
    text = read(agent, channel="C0OTHER", ts=root)
    assert "Partial:" not in text and len(bodies(text)) == 15
    assert len(replies_calls(standin)) == 1


def test_two_reads_at_once_make_one_call(make_agent, celery_worker, standin):
    root = foreign_thread(standin, 30)
    standin.fail("conversations.replies", "slow", delay=1.0)  # the first call is still out when the second read comes
    agents = [make_agent() for _ in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda a: a.call("read_thread", {"channel": "C0OTHER", "ts": root}), agents))
    assert len(replies_calls(standin)) == 1
    texts = [text_of(r) for r in results]
    for result, text in zip(results, texts, strict=True):
        # Each either has what the one call gave, or is told when Slack may be asked.
        assert (not result.is_error and bodies(text)[:2] == ["What broke?", "reply 1"]) or (
            result.is_error and "the next call is allowed in" in text
        ), text
    assert any(not r.is_error for r in results)


def test_one_claim_per_team_and_method_across_processes(standin):
    """The claim lives in the shared cache: four processes asking at the same moment, one gets it."""
    start = time.time() + 6
    code = (
        "import time, django; django.setup()\n"
        "from calvin.chat.slack.read_limits import slack_read_claim\n"
        f"time.sleep(max(0, {start} - time.time()))\n"
        "print(slack_read_claim(team_id='T0PROC', method='conversations.replies'))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "calvin.settings"}
    processes = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    waits = sorted(float(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in processes)
    assert waits[0] == 0.0 and all(0 < w <= 60 for w in waits[1:]), waits
    assert slack_read_claim(team_id="T0PROC", method="conversations.history") == 0.0  # another method, its own


def test_another_workspaces_kept_history_never_appears(agent, standin, workspace):
    root = foreign_thread(standin, 2)
    # Globex held this Slack team before: what it kept stays its own.
    globex = workspace_create(name="Globex", slug="globex")
    kept = slack_history_start(workspace_id=globex.id, team_id=TEAM, channel_id="C0OTHER", thread_ts=root, since=root)
    for ts, text in [(root, "Globex's plans"), (standin.messages("C0OTHER")[1]["ts"], "Globex's secret reply")]:
        SlackHistoryMessage.objects.create(history=kept, ts=ts, user_id="U0GLOBEX", text=text, source="event")
    text = read(agent, channel="C0OTHER", ts=standin.messages("C0OTHER")[1]["ts"])
    assert "Globex" not in text
    assert bodies(text) == ["What broke?", "reply 1", "reply 2"]
    assert len(replies_calls(standin)) == 1  # acme held nothing: Slack was asked
    slack_history_take_event(
        workspace_id=globex.id,
        team_id=TEAM,
        event={"channel": "C0OTHER", "ts": "1799999999.000900", "thread_ts": root, "text": "more Globex"},
    )
    assert "Globex" not in read(agent, channel="C0OTHER", ts=root)


def test_an_uninstall_forgets_the_kept_history(agent, standin, workspace):
    """No events come while the app is out: after a reinstall, a kept history could not be whole."""
    root = foreign_thread(standin, 2)
    read(agent, channel="C0OTHER", ts=root)
    assert SlackThreadHistory.objects.filter(workspace=workspace).exists()
    slack_team_uninstall(team_id=TEAM)
    assert not SlackThreadHistory.objects.filter(workspace=workspace).exists()
    assert not SlackHistoryMessage.objects.exists()


# ---------------------------------------------------------------- the stand-in keeps Slack's limit


def test_the_standin_answers_429_to_a_second_read_within_the_minute_and_15_messages_a_call(standin):
    root = foreign_thread(standin, 30)
    standin.add_team(team_id="T0OTHER", bot_token="xoxb-standin-other", bot_user_id="U0B2", bot_id="B0B2")
    client = slack_client(TOKEN)
    first = client.conversations_replies(channel="C0OTHER", ts=root, limit=200)
    assert len(first["messages"]) == 15 and first["has_more"] is True
    assert first["messages"][0]["ts"] == root and first["messages"][0]["reply_count"] == 30
    cursor = first["response_metadata"]["next_cursor"]
    with pytest.raises(SlackApiError) as refused:
        client.conversations_replies(channel="C0OTHER", ts=root, cursor=cursor)
    assert refused.value.response.status_code == 429
    headers = {k.lower(): v for k, v in refused.value.response.headers.items()}
    assert 58 <= int(headers["retry-after"]) <= 60
    # Per team and per method.
    assert client.conversations_history(channel="C0OTHER", limit=100)["ok"]
    with pytest.raises(SlackApiError):
        client.conversations_history(channel="C0OTHER")
    assert slack_client("xoxb-standin-other").conversations_replies(channel="C0OTHER", ts=root)["ok"]
    # A minute later: the next page, the root at its top, 14 more replies.
    with standin._lock:
        standin._last_read.clear()
    second = client.conversations_replies(channel="C0OTHER", ts=root, cursor=cursor)
    assert [m["text"] for m in second["messages"]] == ["What broke?"] + [f"reply {i}" for i in range(15, 29)]
    assert second["has_more"] is True
