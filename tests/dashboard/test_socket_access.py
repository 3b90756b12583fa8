"""A thread socket lives only as long as the access it was opened with: login, active user, membership.

Real websockets through uvicorn, real logins and logouts through the forms, a real worker.
"""

import json
import time

import pytest
from django.contrib.sessions.models import Session as LoginSession
from websockets.exceptions import ConnectionClosed

from calvin.dashboard import signals as dashboard_signals
from calvin.dashboard.events import group_send, thread_group
from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import (
    CARD,
    OWNER_PASSWORD,
    announced_message,
    log_out,
    logged_in,
    login_cookie,
    thread_seq,
    ws_connect,
)
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def assert_closed_with_4403(ws):
    """The next frame is the close: nothing (no live or caught-up message) reaches the socket first."""
    with pytest.raises(ConnectionClosed) as closed:
        frame = ws.recv(timeout=10)
        pytest.fail(f"got a frame instead of the close: {frame[:200]}")
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403


def assert_still_open(ws):
    with pytest.raises(TimeoutError):
        ws.recv(timeout=0.5)


def post_card_and_wait(agent) -> None:
    result = agent.call("post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED)


def agent_message(thread_id: int, text: str = "hello") -> Message:
    return announced_message(thread_id, text)


def test_logging_out_closes_the_socket_and_no_message_follows(gateway, agent):
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        with ws_connect(gateway, agent.session.thread_id, sessionid=http.cookies["sessionid"]) as ws:
            assert_still_open(ws)
            log_out(http)
            post_card_and_wait(agent)
            assert_closed_with_4403(ws)


def test_another_login_of_the_same_person_keeps_its_socket(gateway, agent):
    thread_id = agent.session.thread_id
    with logged_in(gateway, "owner", OWNER_PASSWORD) as laptop, logged_in(gateway, "owner", OWNER_PASSWORD) as phone:
        assert laptop.cookies["sessionid"] != phone.cookies["sessionid"]
        with (
            ws_connect(gateway, thread_id, sessionid=laptop.cookies["sessionid"]) as on_laptop,
            ws_connect(gateway, thread_id, sessionid=phone.cookies["sessionid"]) as on_phone,
        ):
            log_out(laptop)
            assert_closed_with_4403(on_laptop)
            post_card_and_wait(agent)
            event = json.loads(on_phone.recv(timeout=15))
            assert event["kind"] == "card" and "Nightly build report" in event["html"]


def test_deleting_the_membership_closes_the_socket(gateway, agent, owner_member):
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        assert_still_open(ws)
        owner_member.delete()
        post_card_and_wait(agent)
        assert_closed_with_4403(ws)


def test_deactivating_the_user_closes_the_socket_but_other_changes_do_not(gateway, agent, owner_member):
    user = owner_member.user
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        user.email = "owner@acme.example"
        user.save()  # pushes a re-check, which passes
        post_card_and_wait(agent)
        assert json.loads(ws.recv(timeout=15))["kind"] == "card"

        user.is_active = False
        user.save()
        assert_closed_with_4403(ws)


def test_a_catch_up_after_the_login_ended_silently_sends_nothing(gateway, agent):
    """No push here (the session row just went, as on expiry): the catch-up's own check refuses."""
    message = agent_message(agent.session.thread_id, "history the person may no longer read")
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        assert_still_open(ws)
        LoginSession.objects.filter(session_key=sessionid).delete()
        ws.send(json.dumps({"since": 0}))
        assert_closed_with_4403(ws)
    assert Message.objects.filter(id=message.id).exists()


def test_a_catch_up_after_the_membership_went_sends_nothing(gateway, agent, owner_member, monkeypatch):
    agent_message(agent.session.thread_id)
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        # The push is lost (Redis hiccup): only the catch-up's own re-check stands.
        monkeypatch.setattr(dashboard_signals, "access_recheck_on_commit", lambda user_id: None)
        owner_member.delete()
        ws.send(json.dumps({"since": 0}))
        assert_closed_with_4403(ws)


def test_a_membership_removed_without_a_push_closes_the_socket_within_the_recheck_interval(
    gateway, agent, owner_member, monkeypatch, settings
):
    """Removed where no push is made (a shell, another deployment's process): no event, no
    catch-up; the socket's own periodic re-check closes it."""
    settings.CALVIN_SOCKET_RECHECK_SECONDS = 0.5
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        assert_still_open(ws)  # re-checked at least once already, and allowed
        monkeypatch.setattr(dashboard_signals, "access_recheck_on_commit", lambda user_id: None)
        owner_member.delete()
        assert_closed_with_4403(ws)


def activity(thread_id: int) -> None:
    """What a host's turn report pushes: the agent is doing something."""
    group_send(thread_group(thread_id), {"type": "thread.activity", "kind": "tool", "text": "running tests"})


@pytest.mark.parametrize("event", ["message", "activity"])
def test_a_membership_removed_without_a_push_closes_the_socket_on_the_next_event(
    gateway, agent, owner_member, monkeypatch, settings, event
):
    settings.CALVIN_SOCKET_RECHECK_SECONDS = 600  # the interval does not come into it
    send = (lambda: post_card_and_wait(agent)) if event == "message" else (lambda: activity(agent.session.thread_id))
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        send()
        assert json.loads(ws.recv(timeout=15))  # allowed: events flow
        monkeypatch.setattr(dashboard_signals, "access_recheck_on_commit", lambda user_id: None)
        owner_member.delete()
        send()
        assert_closed_with_4403(ws)  # the event is not sent first


def test_catch_up_requests_are_rate_limited_per_socket(gateway, agent):
    before = thread_seq(agent.session.thread_id)
    message = agent_message(agent.session.thread_id)
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        for _ in range(8):
            ws.send(json.dumps({"since": before}))
        frames = [json.loads(ws.recv(timeout=10)) for _ in range(8)]
        assert [f.get("id") for f in frames[:5]] == [message.id] * 5
        assert all("too many catch-up requests" in f["error"] and "id" not in f for f in frames[5:])
        assert_still_open(ws)  # nothing else was sent for the refused ones

        time.sleep(2.1)  # one more every 2 s
        ws.send(json.dumps({"since": before}))
        assert json.loads(ws.recv(timeout=10))["id"] == message.id
        ws.send(json.dumps({"since": before}))
        assert "error" in json.loads(ws.recv(timeout=10))


def test_a_catch_up_answers_a_bounded_batch_or_tells_the_page_to_reload(gateway, make_agent):
    thread_id = make_agent().session.thread_id
    start = thread_seq(thread_id)
    for i in range(100):
        agent_message(thread_id, f"m{i}")
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": start}))  # exactly 100 missed: all sent
        frames = [json.loads(ws.recv(timeout=10)) for _ in range(100)]
        all_ids = list(Message.objects.filter(thread_id=thread_id).values_list("id", flat=True))
        assert [f["id"] for f in frames] == all_ids
        assert [f["seq"] for f in frames] == list(range(start + 1, start + 101))
        assert_still_open(ws)

    # Each made while no socket watches (a watching one would get them pushed).
    agent_message(thread_id, "one more")  # 101 missed since the start: reload instead
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": start}))
        assert json.loads(ws.recv(timeout=10)) == {"reload": True}
        assert_still_open(ws)

    # Few messages but too many bytes: 3 x 200 KB is more than one answer's 512 KiB.
    before_big = thread_seq(thread_id)
    big = [agent_message(thread_id, "x" * 200_000) for _ in range(3)]
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": before_big}))
        assert json.loads(ws.recv(timeout=10)) == {"reload": True}
        assert_still_open(ws)
        ws.send(json.dumps({"since": before_big + 1}))  # two of them fit
        assert [json.loads(ws.recv(timeout=10))["id"] for _ in range(2)] == [big[1].id, big[2].id]


def test_garbage_frames_are_ignored_and_the_socket_keeps_working(gateway, agent):
    before = thread_seq(agent.session.thread_id)
    message = agent_message(agent.session.thread_id)
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        garbage = ["{not json", b"\x00\xff", "[]", '{"since": "0"}', '{"since": true}', "null", '{"since": -1}']
        garbage += ['{"since": null}', '{"since": 0, "until": "x"}', f'{{"since": {before + 1}, "until": {before}}}']
        for frame in garbage:
            ws.send(frame)
        assert_still_open(ws)
        ws.send(json.dumps({"since": before}))
        assert json.loads(ws.recv(timeout=10))["id"] == message.id


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_a_recheck_interval_that_is_not_a_positive_number_is_a_clear_error(value):
    from tests.dashboard.test_https_settings import manage

    done = manage("check", CALVIN_SOCKET_RECHECK_SECONDS=value)
    assert done.returncode != 0
    expected = f"CALVIN_SOCKET_RECHECK_SECONDS must be a positive number of seconds, not {value!r}"
    assert expected in done.stderr, done.stderr[-2000:]
