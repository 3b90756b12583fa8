"""Slack events, signed as Slack signs them, over real HTTP to the gateway, applied by the real
Celery worker: mentions and DMs start sessions, replies reach their session's inbox in order,
each event counts once, bots start nothing, and each Slack team is its own tenant."""

import logging
import threading

import pytest
from django.db import connection

from calvin.chat.models import SlackEvent
from calvin.chat.slack.inbound import slack_event_handle, slack_event_record
from calvin.chat.slack.installations import installation_save
from calvin.workspaces.models import Member
from calvin.workspaces.services import agent_default_for, workspace_create
from sessions.models import Message, Session, Thread, Turn
from tests.conftest import wait_for
from tests.support.slack_requests import event_body, mention, message

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = "1700000100.000100"


def said(standin, *, channel: str, ts: str, user: str = "U1", text: str = "", thread_ts: str | None = None):
    """The person's message as Slack keeps it (the 👀 reaction lands on it)."""
    with standin._lock:
        standin.channels[channel].append(
            {"type": "message", "ts": ts, "user": user, "text": text, "thread_ts": thread_ts}
        )


def send(slack_sender, event: dict, *, team: str = "T0001", event_id: str | None = None, headers=None) -> str:
    """Deliver one event as Slack does; the listener must acknowledge it with a 200."""
    body = event_body(team_id=team, event=event, event_id=event_id)
    response = slack_sender.event(body, headers=headers)
    assert response.status_code == 200, response.text
    return body


def settled():
    """Every recorded event applied by the worker."""
    wait_for(lambda: not SlackEvent.objects.filter(status=SlackEvent.Status.RECEIVED).exists(), timeout=20)


def prompts(session: Session) -> list[str]:
    return list(session.turns.order_by("id").values_list("prompt__text", flat=True))


@pytest.fixture(autouse=True)
def reactions_sent(transactional_db, standin):
    """Let the worker finish this test's 👀 reactions before the stand-in and the tables go."""
    yield
    taken = SlackEvent.objects.filter(
        status=SlackEvent.Status.HANDLED, event_type__in=["app_mention", "message"]
    ).count()
    try:
        wait_for(lambda: len(standin.calls_of("reactions.add")) >= taken, timeout=15)
    except AssertionError:
        pass


def slack_session(channel: str = "C1", root: str = ROOT, team_workspace=None) -> Session:
    threads = Thread.objects.filter(channel_kind=Thread.ChannelKind.SLACK, channel_id=channel, thread_ts=root)
    if team_workspace is not None:
        threads = threads.filter(workspace=team_workspace)
    return Session.objects.select_related("owner", "thread").get(thread__in=threads)


def test_a_mention_starts_a_session_owned_by_its_author(slack_sender, slack_team, workspace, standin, celery_worker):
    said(standin, channel="C1", ts=ROOT, text="<@U0BOT> fix the flaky build")
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="fix the  flaky build"))
    settled()
    session = slack_session()
    assert session.workspace == workspace
    assert session.thread.channel_kind == "slack" and session.thread.thread_ts == ROOT
    # The author is a member of the team's workspace, made on first contact as a plain member.
    assert session.owner.slack_user_id == "U1" and session.owner.role == Member.Role.MEMBER
    assert session.owner.workspace == workspace
    # The prompt is the text without Calvin's mention; it keeps the Slack ts it came from.
    first = Message.objects.get(thread=session.thread)
    assert first.text == "fix the flaky build" and first.member == session.owner and first.platform_ts == ROOT
    assert prompts(session) == ["fix the flaky build"]
    assert SlackEvent.objects.get().status == SlackEvent.Status.HANDLED
    # 👀 on the sender's message, with the team's bot token.
    wait_for(lambda: standin.messages("C1")[0].get("reactions") == ["eyes"], timeout=10)
    call = standin.ok_calls_of("reactions.add")[0]
    assert call.params["channel"] == "C1" and call.params["timestamp"] == ROOT
    assert "xoxb-standin-team-0001" in str(call.headers)


def test_a_direct_message_starts_a_session_in_its_own_thread(slack_sender, slack_team, standin, celery_worker):
    send(slack_sender, message(user="U7", channel="D1", ts=ROOT, text="what broke last night?", channel_type="im"))
    settled()
    session = slack_session(channel="D1")
    assert session.owner.slack_user_id == "U7"
    assert prompts(session) == ["what broke last night?"]


def test_replies_in_a_bound_thread_go_to_its_session_in_order(slack_sender, slack_team, standin, celery_worker):
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="start"))
    settled()
    replies = [
        message(user="U2", channel="C1", ts="1700000100.000200", text="plain reply", thread_ts=ROOT),
        # A mention inside the bound thread continues it too (no second session).
        mention(user="U1", channel="C1", ts="1700000100.000300", text="and this", thread_ts=ROOT),
        message(user="U3", channel="D1", ts="1700000100.000400", text="dm reply", thread_ts=ROOT, channel_type="im"),
    ]
    for reply in replies:
        send(slack_sender, reply)
        settled()
    session = slack_session()
    assert prompts(session) == ["start", "plain reply", "and this"]
    assert Session.objects.count() == 2  # the DM in D1 is its own thread, not C1's
    assert Member.objects.get(slack_user_id="U2").messages.get().thread == session.thread


def test_five_messages_during_a_busy_turn_are_queued_in_order(slack_sender, slack_team, standin, celery_worker):
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="long job"))
    settled()
    session = slack_session()
    # The agent is busy with the first turn (no host claims the queued ones in this test).
    session.turns.update(status=Turn.Status.RUNNING)
    Session.objects.filter(id=session.id).update(status=Session.Status.RUNNING)
    for i in range(5):
        send(slack_sender, message(user="U1", channel="C1", ts=f"1700000101.00000{i}", text=f"m{i}", thread_ts=ROOT))
    settled()
    assert prompts(session) == ["long job", "m0", "m1", "m2", "m3", "m4"]
    assert list(session.turns.order_by("id").values_list("status", flat=True)) == ["running"] + ["queued"] * 5


def test_a_retried_and_a_duplicated_event_count_once(slack_sender, slack_team, standin, celery_worker):
    first = mention(user="U1", channel="C1", ts=ROOT, text="once")
    send(slack_sender, first, event_id="EvONCE")
    send(slack_sender, first, event_id="EvONCE", headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"})
    send(slack_sender, first, event_id="EvONCE")  # a duplicate delivery
    reply = message(user="U1", channel="C1", ts="1700000100.000900", text="twice?", thread_ts=ROOT)
    settled()
    send(slack_sender, reply, event_id="EvREPLY")
    send(slack_sender, reply, event_id="EvREPLY", headers={"X-Slack-Retry-Num": "2", "X-Slack-Retry-Reason": "timeout"})
    settled()
    assert SlackEvent.objects.count() == 2
    assert SlackEvent.objects.get(event_id="EvONCE").retry_num == 1
    assert SlackEvent.objects.get(event_id="EvREPLY").retry_num == 2
    session = slack_session()
    assert Session.objects.count() == 1
    assert prompts(session) == ["once", "twice?"]


def test_a_retry_whose_first_delivery_was_lost_is_taken(slack_sender, slack_team, standin, celery_worker):
    event = mention(user="U1", channel="C1", ts=ROOT, text="second try")
    send(slack_sender, event, event_id="EvLOST", headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"})
    settled()
    assert prompts(slack_session()) == ["second try"]


def test_the_same_event_at_once_records_one_row(slack_sender, slack_team, standin, celery_worker):
    event = mention(user="U1", channel="C1", ts=ROOT, text="at once")
    body = event_body(team_id="T0001", event=event, event_id="EvRACE")
    statuses = []

    def deliver():
        statuses.append(slack_sender.event(body).status_code)

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 6
    settled()
    assert SlackEvent.objects.count() == 1 and Session.objects.count() == 1


def in_threads(*calls):
    """Run each call in its own thread and database connection, released together."""
    barrier = threading.Barrier(len(calls))
    results, errors = [None] * len(calls), []

    def run(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_two_web_processes_recording_one_event_make_one_row(slack_team, celery_worker):
    for round_ in range(5):
        event = mention(user="U1", channel="C1", ts=f"1700000200.00000{round_}", text=f"race {round_}")
        ids = in_threads(
            *[
                lambda e=event, r=round_: slack_event_record(event_id=f"EvTWO{r}", team_id="T0001", event=e)
                for _ in range(4)
            ]
        )
        assert len([i for i in ids if i]) == 1
    settled()
    assert SlackEvent.objects.count() == 5 and Session.objects.count() == 5


def test_a_mention_and_its_message_event_make_one_calvin_message(slack_sender, slack_team, standin, celery_worker):
    # Top level: the app_mention starts the session; the message event of the same ts adds nothing.
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="hello"))
    send(slack_sender, message(user="U1", channel="C1", ts=ROOT, text="<@U0BOT> hello"))
    settled()
    # In the bound thread: both events of one mention, in either order.
    ts_a, ts_b = "1700000100.000500", "1700000100.000600"
    send(slack_sender, mention(user="U2", channel="C1", ts=ts_a, text="first", thread_ts=ROOT))
    send(slack_sender, message(user="U2", channel="C1", ts=ts_a, text="<@U0BOT> first", thread_ts=ROOT))
    send(slack_sender, message(user="U2", channel="C1", ts=ts_b, text="<@U0BOT> second", thread_ts=ROOT))
    send(slack_sender, mention(user="U2", channel="C1", ts=ts_b, text="second", thread_ts=ROOT))
    settled()
    session = slack_session()
    assert prompts(session) == ["hello", "first", "second"]
    assert SlackEvent.objects.count() == 6
    assert SlackEvent.objects.filter(status=SlackEvent.Status.IGNORED).count() == 3


def record_only(event: dict, event_id: str, team: str = "T0001") -> int:
    """A recorded event whose task a test runs itself (as a second worker would)."""
    return SlackEvent.objects.create(event_id=event_id, team_id=team, event_type=event["type"], payload=event).id


def test_two_workers_taking_a_mention_pair_at_once_make_one_message(slack_team, standin, celery_worker):
    send_root = record_only(mention(user="U1", channel="C1", ts=ROOT, text="root"), "EvROOT")
    slack_event_handle(slack_event_id=send_root)
    session = slack_session()
    for i in range(5):
        ts = f"1700000300.00000{i}"
        pair = [
            record_only(mention(user="U2", channel="C1", ts=ts, text=f"p{i}", thread_ts=ROOT), f"EvM{i}"),
            record_only(message(user="U2", channel="C1", ts=ts, text=f"<@U0BOT> p{i}", thread_ts=ROOT), f"EvN{i}"),
        ]
        statuses = in_threads(*[lambda e=e: slack_event_handle(slack_event_id=e) for e in pair])
        assert sorted(statuses) == ["handled", "ignored"]
    assert prompts(session) == ["root", "p0", "p1", "p2", "p3", "p4"]


def test_two_mentions_starting_one_thread_at_once_make_one_session(slack_team, standin, celery_worker):
    for i in range(4):
        root = f"1700000400.00000{i}"
        events = [
            record_only(mention(user="U1", channel="C2", ts=f"{root}1", text="a", thread_ts=root), f"EvA{i}"),
            record_only(mention(user="U2", channel="C2", ts=f"{root}2", text="b", thread_ts=root), f"EvB{i}"),
        ]
        assert in_threads(*[lambda e=e: slack_event_handle(slack_event_id=e) for e in events]) == ["handled"] * 2
        session = slack_session(channel="C2", root=root)
        assert sorted(prompts(session)) == ["a", "b"]
    assert Thread.objects.filter(channel_id="C2").count() == 4


@pytest.mark.parametrize(
    "event",
    [
        # Another bot's message, a bot_message without a user, and Calvin's own bot user.
        {"user": "U0OTHERBOT", "bot_id": "B0OTHER", "bot_profile": {"id": "B0OTHER"}},
        {"subtype": "bot_message", "bot_id": "B0WEBHOOK", "username": "ci"},
        {"user": "U0BOT"},
        {"user": "U1", "bot_id": "B0BOT"},
        # Not new messages from a person.
        {"user": "U1", "subtype": "channel_join"},
        {"subtype": "message_changed", "message": {"user": "U1", "text": "edited"}, "user": None},
        {"subtype": "message_deleted", "deleted_ts": ROOT, "user": None},
    ],
    ids=["other bot", "bot_message", "our bot user", "our bot id", "channel_join", "changed", "deleted"],
)
def test_messages_from_bots_and_edits_start_nothing(slack_sender, slack_team, standin, celery_worker, event):
    dm = {**message(user="U1", channel="D1", ts=ROOT, text="<@U0BOT> hi", channel_type="im"), **event}
    send(slack_sender, {k: v for k, v in dm.items() if v is not None})
    # The same shapes as mentions (some apps mention Calvin).
    send(
        slack_sender, {**mention(user="U1", channel="C1", ts=ROOT, text="hi"), **{k: v for k, v in event.items() if v}}
    )
    settled()
    assert not Session.objects.exists() and not Message.objects.exists()
    assert not Member.objects.filter(slack_user_id__in=["U0BOT", "U0OTHERBOT"]).exists()
    assert set(SlackEvent.objects.values_list("status", flat=True)) <= {SlackEvent.Status.IGNORED}
    assert not standin.calls_of("reactions.add")


def test_a_channel_message_outside_calvins_threads_is_ignored(slack_sender, slack_team, standin, celery_worker):
    send(slack_sender, message(user="U1", channel="C1", ts=ROOT, text="lunch?"))
    send(slack_sender, message(user="U1", channel="C1", ts="1700000100.000200", text="sure", thread_ts=ROOT))
    settled()
    assert not Session.objects.exists() and not Member.objects.filter(slack_user_id="U1").exists()
    assert list(SlackEvent.objects.values_list("status", flat=True)) == ["ignored", "ignored"]


def test_a_person_of_another_organisation_starts_and_joins_nothing(slack_sender, slack_team, standin, celery_worker):
    """Slack Connect: a channel shared with another organisation brings its people's messages."""
    session = slack_session_start_by_mention(slack_sender)
    outsider = {"user_team": "T0OTHER", "source_team": "T0OTHER"}
    own, dm, reply = "1700000100.000700", "1700000100.000800", "1700000100.000900"
    send(slack_sender, {**mention(user="U0OUT", channel="C1", ts=own, text="run this"), **outsider})
    send(slack_sender, {**message(user="U0OUT", channel="D1", ts=dm, text="hi", channel_type="im"), **outsider})
    send(slack_sender, {**message(user="U0OUT", channel="C1", ts=reply, text="me too", thread_ts=ROOT), **outsider})
    settled()
    assert not Member.objects.filter(slack_user_id="U0OUT").exists()
    assert Session.objects.get() == session and prompts(session) == ["go"]
    ignored = SlackEvent.objects.filter(payload__user="U0OUT")
    assert [e.status for e in ignored] == [SlackEvent.Status.IGNORED] * 3
    assert all("another Slack team (T0OTHER)" in e.note for e in ignored)


def slack_session_start_by_mention(slack_sender) -> Session:
    """A session started by a person of the installation's own team (their team named, as Slack does)."""
    send(slack_sender, {**mention(user="U1", channel="C1", ts=ROOT, text="go"), "user_team": "T0001"})
    settled()
    return slack_session()


def test_an_unknown_teams_event_changes_nothing(slack_sender, slack_team, standin, celery_worker):
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="hi"), team="T0404")
    settled()
    assert not SlackEvent.objects.exists() and not Session.objects.exists()
    # Had it been recorded (the team uninstalled in between), the worker ignores it.
    row = record_only(mention(user="U1", channel="C1", ts=ROOT, text="hi"), "EvUNKNOWN", team="T0404")
    assert slack_event_handle(slack_event_id=row) == SlackEvent.Status.IGNORED
    assert "not installed" in SlackEvent.objects.get(id=row).note
    assert not Session.objects.exists() and not Member.objects.filter(slack_user_id="U1").exists()


def test_two_slack_teams_are_two_tenants(slack_sender, slack_team, workspace, standin, celery_worker, vault):
    other = workspace_create(name="Globex", slug="globex")
    team2 = standin.add_team(team_id="T0002", bot_token="xoxb-standin-team-0002", bot_user_id="U0BOT2", bot_id="B0BOT2")
    installation_save(
        workspace=other, team_id="T0002", bot_token=team2.bot_token, bot_id="B0BOT2", bot_user_id="U0BOT2"
    )
    # The same channel, user and ts ids in both teams.
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="acme work"))
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="globex work", bot_user="U0BOT2"), team="T0002")
    settled()
    send(
        slack_sender,
        message(user="U1", channel="C1", ts="1700000100.000200", text="more", thread_ts=ROOT),
        team="T0002",
    )
    settled()
    mine, theirs = slack_session(team_workspace=workspace), slack_session(team_workspace=other)
    assert mine.thread_id != theirs.thread_id and mine.owner_id != theirs.owner_id
    assert mine.owner.workspace == workspace and theirs.owner.workspace == other
    assert prompts(mine) == ["acme work"]
    assert prompts(theirs) == ["globex work", "more"]


def test_a_failed_reaction_loses_no_message(slack_sender, slack_team, standin, celery_worker):
    said(standin, channel="C1", ts=ROOT)
    standin.fail("reactions.add", "500", count=1)  # temporary: tried again
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="one"))
    settled()
    wait_for(lambda: standin.messages("C1")[0].get("reactions") == ["eyes"], timeout=15)
    assert len(standin.calls_of("reactions.add")) == 2
    standin.fail("reactions.add", "ok_false", count=5, error="channel_not_found")  # permanent: dropped
    send(slack_sender, message(user="U1", channel="C1", ts="1700000100.000200", text="two", thread_ts=ROOT))
    settled()
    wait_for(lambda: len(standin.calls_of("reactions.add")) == 3, timeout=10)
    assert prompts(slack_session()) == ["one", "two"]


def test_an_already_reacted_message_counts_as_reacted(slack_sender, slack_team, standin, celery_worker):
    said(standin, channel="C1", ts=ROOT)
    standin.channels["C1"][0]["reactions"] = ["eyes"]
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="again"))
    settled()
    wait_for(lambda: standin.calls_of("reactions.add"), timeout=10)
    assert standin.calls_of("reactions.add")[0].answer["error"] == "already_reacted"
    assert len(standin.calls_of("reactions.add")) == 1  # success: not retried


def test_other_events_are_acknowledged_quietly(slack_sender, slack_team, standin, celery_worker, caplog):
    caplog.set_level(logging.DEBUG)
    reaction = {"type": "reaction_added", "user": "U1", "reaction": "tada-secret-marker", "item": {"ts": ROOT}}
    assert slack_sender.event(event_body(team_id="T0001", event=reaction)).status_code == 200
    rate_limited = '{"token": "x", "type": "app_rate_limited", "team_id": "T0001", "minute_rate_limited": 1}'
    assert slack_sender.event(rate_limited).status_code == 200
    assert not SlackEvent.objects.exists()
    assert "tada-secret-marker" not in caplog.text
    assert "nhandled" not in caplog.text


@pytest.fixture
def scripted_agent(workspace):
    from tests.sessions.host_processes import scripted

    return scripted(agent_default_for(workspace), [{"reply": "got: {prompt}"}])


def test_a_mention_is_answered_by_the_agent_in_its_slack_thread(
    slack_sender, slack_team, standin, celery_worker, hosts, scripted_agent
):
    from tests.sessions.host_processes import agent_texts, wait_connected

    wait_connected(hosts("h1"))
    said(standin, channel="C1", ts=ROOT, text="<@U0BOT> ping")
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="ping"))
    settled()
    session = slack_session()
    wait_for(lambda: agent_texts(session) == ["got: ping"], timeout=60)  # a real turn ran on the host

    def reply():
        return [m for m in standin.messages("C1") if m.get("bot_id") == "B0BOT" and m.get("thread_ts") == ROOT]

    replies = wait_for(reply, timeout=60)
    assert replies[0]["text"] == "got: ping"
    assert standin.messages("C1")[0].get("reactions") == ["eyes"]
    # The reply went in through Calvin's token, into the thread of the mention.
    call = next(c for c in standin.ok_calls_of("chat.postMessage") if c.params.get("thread_ts") == ROOT)
    assert call.params["channel"] == "C1"


def test_the_sweep_handles_an_event_whose_task_was_lost_and_forgets_old_settled_ones(
    slack_team, standin, celery_worker
):
    from datetime import timedelta

    from django.utils import timezone

    from calvin.chat.slack.inbound_tasks import sweep_slack_events

    # Recorded, but its task never ran (a publish lost after the commit).
    lost = SlackEvent.objects.create(
        event_id="EvLOST",
        team_id="T0001",
        event_type="app_mention",
        payload=mention(user="U1", channel="C9", ts="1700000300.000100", text="still there?"),
    )
    old = timezone.now() - timedelta(days=8)
    SlackEvent.objects.filter(id=lost.id).update(received_at=timezone.now() - timedelta(minutes=3))
    settled = SlackEvent.objects.create(
        event_id="EvOLD", team_id="T0001", event_type="message", payload={}, status=SlackEvent.Status.HANDLED
    )
    failed = SlackEvent.objects.create(
        event_id="EvFAILED", team_id="T0001", event_type="message", payload={}, status=SlackEvent.Status.FAILED
    )
    SlackEvent.objects.create(
        event_id="EvRECENT", team_id="T0001", event_type="message", payload={}, status=SlackEvent.Status.IGNORED
    )
    SlackEvent.objects.filter(id__in=[settled.id, failed.id]).update(received_at=old)
    assert sweep_slack_events.apply().get() == 1
    session = wait_for(lambda: Session.objects.filter(thread__channel_id="C9").first())
    assert session.thread.messages.get().text == "still there?"
    assert SlackEvent.objects.get(id=lost.id).status == SlackEvent.Status.HANDLED
    kept = set(SlackEvent.objects.values_list("event_id", flat=True))
    assert kept == {"EvLOST", "EvFAILED", "EvRECENT"}  # the old handled one is forgotten


def test_a_new_member_is_named_from_slack_and_an_unknown_one_keeps_the_user_id(
    slack_sender, slack_team, standin, celery_worker
):
    standin.add_user("U0ALICE", "alice")
    send(slack_sender, mention(user="U0ALICE", channel="C7", ts="1700000500.000100", text="hello"))
    send(slack_sender, mention(user="U0GHOST", channel="C7", ts="1700000500.000200", text="boo"))
    alice = wait_for(lambda: Member.objects.filter(slack_user_id="U0ALICE", display_name="alice").first())
    assert alice.role == Member.Role.MEMBER
    wait_for(lambda: len(standin.calls_of("users.info")) == 2)
    ghost = wait_for(lambda: Member.objects.filter(slack_user_id="U0GHOST").first())
    assert ghost.display_name == "" and str(ghost) == "U0GHOST"
    call = next(c for c in standin.calls_of("users.info") if c.params["user"] == "U0ALICE")
    assert call.headers.get("Authorization") == f"Bearer {slack_team.bot_token}"
