"""The live-event log: gapless seqs in commit order, catch-up by seq, lost pushes caught up, who may
watch a workspace, retention. Real PostgreSQL, Redis, uvicorn websockets and a real worker."""

import json
import random
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from websockets.exceptions import ConnectionClosed

from calvin.dashboard import live
from calvin.dashboard.models import LiveEvent
from calvin.dashboard.steps import step_words
from calvin.events import MessagePosted, SessionChanged, announce
from sessions.models import Message
from tests.conftest import wait_for
from tests.dashboard.conftest import (
    OWNER_PASSWORD,
    STRANGER_PASSWORD,
    announced_message,
    login_cookie,
    thread_seq,
    ws_connect,
)

pytestmark = pytest.mark.django_db(transaction=True)


def workspace_ws(base_url: str, workspace_id: int, *, sessionid: str | None = None):
    from websockets.sync.client import connect

    url = base_url.replace("http://", "ws://", 1) + f"/ws/workspaces/{workspace_id}/"
    headers = {"Cookie": f"sessionid={sessionid}"} if sessionid else {}
    return connect(url, origin=base_url, additional_headers=headers, open_timeout=10, close_timeout=2)


def frame(ws, timeout: float = 15.0) -> dict:
    return json.loads(ws.recv(timeout=timeout))


def assert_closed_with_4403(ws):
    with pytest.raises(ConnectionClosed) as closed:
        got = ws.recv(timeout=10)
        pytest.fail(f"got a frame instead of the close: {got[:200]}")
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403


def send_unless_closed(ws, content: dict) -> None:
    """A refused socket may be closed before the page's first frame goes out."""
    try:
        ws.send(json.dumps(content))
    except ConnectionClosed:
        pass


def seqs_of(stream: str) -> list[int]:
    numbered = LiveEvent.objects.filter(stream=stream, seq__isnull=False)
    return list(numbered.order_by("seq").values_list("seq", flat=True))


def session_changed(session, status="running"):
    announce(
        SessionChanged(
            workspace_id=session.workspace_id, thread_id=session.thread_id, session_id=session.id, status=status
        )
    )


def test_seqs_have_no_gaps_under_concurrent_announcements_some_rolled_back(make_agent):
    """8 threads, each its own PostgreSQL connection, announce into one thread and its workspace;
    some roll back after announcing. A reader watching all along never sees a seq committed
    before a smaller one (a hole), and at the end the seqs are exactly 1..committed, one per
    committed change on each stream."""
    session = make_agent().session
    stream = live.thread_stream(session.thread_id)
    start = thread_seq(session.thread_id)
    workspace_start = live.live_stream_seq(live.workspace_stream(session.workspace_id))
    committed, rolled_back, holes, done = [], [], [], threading.Event()

    class RolledBack(Exception):
        pass

    def writer(number: int):
        rng = random.Random(number)
        try:
            for i in range(25):
                try:
                    with transaction.atomic():
                        message = Message.objects.create(
                            thread_id=session.thread_id, author="agent", text=f"{number}.{i}"
                        )
                        announce(
                            MessagePosted(
                                workspace_id=session.workspace_id, thread_id=session.thread_id, message_id=message.id
                            )
                        )
                        session_changed(session)
                        time.sleep(rng.random() * 0.004)  # commits interleave with the others' numbering
                        if rng.random() < 0.2:
                            raise RolledBack
                    committed.append(message.id)
                except RolledBack:
                    rolled_back.append(number)
        finally:
            connection.close()

    def reader():
        try:
            while not done.is_set():
                seen = seqs_of(stream)
                if seen and seen != list(range(1, len(seen) + 1)):
                    holes.append(seen)
        finally:
            connection.close()

    watching = threading.Thread(target=reader)
    watching.start()
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    live.NUMBERER.drain()
    done.set()
    watching.join(timeout=30)

    assert rolled_back, "some transactions rolled back after announcing"
    assert not holes, f"a reader saw a seq committed before a smaller one: {holes[0]}"
    # Each committed change has exactly one event on each of its streams, numbered 1, 2, 3, ...
    assert seqs_of(stream) == list(range(1, start + 2 * len(committed) + 1))
    logged = LiveEvent.objects.filter(stream=stream, kind="message").values_list("payload__message_id", flat=True)
    assert sorted(logged) == sorted(committed)
    workspace_seqs = seqs_of(live.workspace_stream(session.workspace_id))
    assert workspace_seqs[-len(committed) :] == list(range(workspace_start + 1, workspace_start + len(committed) + 1))
    assert workspace_seqs == list(range(1, len(workspace_seqs) + 1))
    assert not LiveEvent.objects.filter(seq__isnull=True).exists()


def test_a_push_lost_while_the_layer_is_unreachable_is_caught_up_on_the_next_push(gateway, make_agent, monkeypatch):
    """Issue 22 item 2: a message committed while its push fails, then a later one pushed: the page
    sees the gap and asks for exactly the missing seq."""
    thread_id = make_agent().session.thread_id
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        rendered_at = thread_seq(thread_id)
        ws.send(json.dumps({"since": rendered_at - 1}))  # answered with the session's event: the socket is ready
        assert frame(ws)["seq"] == rendered_at
        real_send = live.group_send

        def unreachable(group, event):
            raise ConnectionError("Redis is restarting")

        monkeypatch.setattr(live, "group_send", unreachable)
        lost = announced_message(thread_id, "pushed into the void")
        live.NUMBERER.drain()  # numbered, and its push failed, off the announcer's path
        monkeypatch.setattr(live, "group_send", real_send)
        later = announced_message(thread_id, "pushed fine")

        pushed = frame(ws)
        assert pushed["seq"] == rendered_at + 2 and pushed["id"] == later.id
        ws.send(json.dumps({"since": rendered_at, "until": pushed["seq"] - 1}))  # what the page lacks
        caught = frame(ws)
        assert caught["seq"] == rendered_at + 1 and caught["id"] == lost.id and "pushed into the void" in caught["html"]
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1)  # exactly that, nothing more


def test_a_push_lost_with_no_later_event_is_sent_from_the_log_within_seconds(
    gateway, make_agent, monkeypatch, settings
):
    settings.CALVIN_LIVE_CHECK_SECONDS = 0.5
    thread_id = make_agent().session.thread_id
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        rendered_at = thread_seq(thread_id)
        ws.send(json.dumps({"since": rendered_at - 1}))
        assert frame(ws)["seq"] == rendered_at
        monkeypatch.setattr(live, "group_send", lambda group, event: (_ for _ in ()).throw(ConnectionError("down")))
        lost = announced_message(thread_id, "nobody pushed me")
        caught = frame(ws)  # no later event: the socket's own look at the log sends it
        assert caught["seq"] == rendered_at + 1 and caught["id"] == lost.id
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1.5)  # and only once


def test_a_member_follows_the_workspace_stream_by_seq(gateway, make_agent, workspace, plain_member):
    session = make_agent().session
    sessionid = login_cookie(gateway, "member", "pw-member-123")
    stream = live.workspace_stream(workspace.id)
    with workspace_ws(gateway, workspace.id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": None}))  # rendered without a seq: where is the stream?
        at = frame(ws)
        assert at == {"stream": stream, "at": live.live_stream_seq(stream)}
        with transaction.atomic():
            session_changed(session, "running")
        pushed = frame(ws)
        assert pushed == {
            "stream": stream,
            "seq": at["at"] + 1,
            "event": "session",
            "session_id": session.id,
            "status": "running",
        }
    # Reconnected later: the events after the last seq it had, from the log.
    with transaction.atomic():
        session_changed(session, "idle")
    live.NUMBERER.drain()  # numbered and pushed while no socket was open
    with workspace_ws(gateway, workspace.id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": at["at"]}))
        assert [(f["seq"], f["status"]) for f in (frame(ws), frame(ws))] == [
            (at["at"] + 1, "running"),
            (at["at"] + 2, "idle"),
        ]


def test_another_workspaces_member_cannot_open_or_catch_up_on_a_workspace_socket(
    gateway, make_agent, workspace, other_workspace
):
    session = make_agent().session
    with transaction.atomic():
        session_changed(session)
    stranger = login_cookie(gateway, "stranger", STRANGER_PASSWORD)
    with workspace_ws(gateway, other_workspace.id, sessionid=stranger) as own:  # their own: allowed
        own.send(json.dumps({"since": None}))
        assert frame(own)["stream"] == live.workspace_stream(other_workspace.id)
    with workspace_ws(gateway, workspace.id, sessionid=stranger) as ws:
        send_unless_closed(ws, {"since": 0})
        assert_closed_with_4403(ws)  # nothing of Acme's log first
    with workspace_ws(gateway, workspace.id) as anonymous:
        assert_closed_with_4403(anonymous)
    with ws_connect(gateway, session.thread_id, sessionid=stranger) as thread_ws:
        send_unless_closed(thread_ws, {"since": 0})
        assert_closed_with_4403(thread_ws)


def test_a_member_removed_from_the_workspace_is_closed_before_the_next_event(
    gateway, make_agent, workspace, plain_member
):
    session = make_agent().session
    sessionid = login_cookie(gateway, "member", "pw-member-123")
    with workspace_ws(gateway, workspace.id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": None}))
        frame(ws)
        plain_member.delete()  # pushes a re-check
        with transaction.atomic():
            session_changed(session)
        assert_closed_with_4403(ws)


def test_the_retention_sweep_forgets_old_events_and_a_page_that_needed_them_reloads(
    gateway, make_agent, celery_worker, settings
):
    from calvin.dashboard.tasks import forget_old_live_events

    settings.CALVIN_LIVE_KEEP_HOURS = 24
    thread_id = make_agent().session.thread_id
    start = thread_seq(thread_id)
    old = [announced_message(thread_id, f"old {i}") for i in range(3)]
    live.NUMBERER.drain()  # numbered after their commits, off this path
    stream = live.thread_stream(thread_id)
    LiveEvent.objects.filter(stream=stream, seq__lte=start + 2).update(created_at=timezone.now() - timedelta(hours=25))
    recent = announced_message(thread_id, "recent")

    forget_old_live_events.delay()  # through the real worker, as beat runs it (no result backend: wait for it)
    wait_for(lambda: not LiveEvent.objects.filter(stream=stream, seq__lte=start + 2).exists(), timeout=30)

    assert seqs_of(stream) == [start + 3, start + 4]
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": start}))  # needs seqs that are gone
        assert frame(ws) == {"reload": True}
        ws.send(json.dumps({"since": start + 2}))  # still in the log: caught up
        assert [frame(ws)["id"] for _ in range(2)] == [old[2].id, recent.id]
    assert announced_message(thread_id, "next") and thread_seq(thread_id) == start + 5  # the counter goes on


def test_an_event_holds_ids_and_statuses_never_text_or_html(make_agent):
    thread_id = make_agent().session.thread_id
    message = announced_message(thread_id, "a secret-looking <b>text</b>")
    event = LiveEvent.objects.get(stream=live.thread_stream(thread_id), payload__message_id=message.id)
    assert event.payload["message_id"] == message.id and event.payload["replace"] is False
    assert set(event.payload) <= {"message_id", "replace", "to_platform"}


@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("Bash", {"command": "npm test\necho done"}, "running `npm test`"),
        ("Edit", {"file_path": "/srv/app/app.py", "old_string": "a", "new_string": "b"}, "editing app.py"),
        ("Write", {"file_path": "notes/todo.md", "content": "x"}, "writing todo.md"),
        ("Read", {"file_path": "/work/README.md"}, "reading README.md"),
        ("Grep", {"pattern": "def main"}, "searching for def main"),
        ("WebSearch", {"query": "django 5.2 release"}, "searching the web for django 5.2 release"),
        ("mcp__calvin__send_file", {"path": "out.png"}, "using send_file"),
        ("Bash", {"command": "x" * 200}, "running `" + "x" * 79 + "…`"),
    ],
)
def test_the_agents_step_in_words(name, arguments, words):
    assert step_words("tool_use", name, json.dumps(arguments)) == words


def test_a_step_from_input_that_is_not_json_still_reads_as_words():
    assert step_words("tool_use", "Bash", "{not json") == "running a command"
    assert step_words("tool_result", "Bash", "ok") == "thinking"


def test_announcing_takes_no_lock_another_announcer_could_wait_on(make_agent):
    """A holds the session's row, then announces; B announces, then wants the session's row.
    Were announcing to take the stream's counter for the rest of the transaction, B would hold
    it while waiting for A, and A would wait for B: a deadlock (it was, in CI). Now both commit."""
    from sessions.models import Session

    session = make_agent().session
    a_locked, b_announced, errors = threading.Event(), threading.Event(), []

    def a():
        try:
            with transaction.atomic():
                Session.objects.select_for_update().get(id=session.id)
                a_locked.set()
                b_announced.wait(10)
                session_changed(session, "running")
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    def b():
        try:
            a_locked.wait(10)
            with transaction.atomic():
                session_changed(session, "idle")
                b_announced.set()
                Session.objects.select_for_update().get(id=session.id)  # waits for A's commit
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    live.NUMBERER.drain()
    kinds = LiveEvent.objects.filter(stream=live.workspace_stream(session.workspace_id), kind="session")
    assert {"idle", "running"} <= set(kinds.values_list("payload__status", flat=True))
    assert not LiveEvent.objects.filter(seq__isnull=True).exists()


def test_an_event_its_announcer_left_unnumbered_is_numbered_and_sent_by_the_sockets_look(
    gateway, make_agent, monkeypatch, settings
):
    """The announcer died between its commit and the numbering: the event is in the log,
    unnumbered; the socket's periodic look numbers it and sends it, once."""
    settings.CALVIN_LIVE_CHECK_SECONDS = 0.5
    thread_id = make_agent().session.thread_id
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, thread_id, sessionid=sessionid) as ws:
        rendered_at = thread_seq(thread_id)
        ws.send(json.dumps({"since": rendered_at - 1}))
        assert frame(ws)["seq"] == rendered_at
        monkeypatch.setattr(live, "_number_and_push_on_commit", lambda stream: None)
        orphan = announced_message(thread_id, "my announcer died")
        assert LiveEvent.objects.get(payload__message_id=orphan.id).seq is None
        caught = frame(ws)
        assert caught["seq"] == rendered_at + 1 and caught["id"] == orphan.id
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1.5)
    assert LiveEvent.objects.get(payload__message_id=orphan.id).seq == rendered_at + 1


def test_an_event_the_look_sends_while_its_push_checks_access_goes_out_once():
    """The push of seq n waits on its access check; meanwhile the socket's periodic look sends n
    from the log. The push, back from the check, must not send n again."""
    import asyncio

    from calvin.dashboard.consumers import ThreadConsumer

    consumer = ThreadConsumer()
    consumer.sent = 5
    sent = []

    async def send_json(frame):
        sent.append(frame["seq"])

    async def still_watching():
        await send_json({"seq": 6})  # the look's catch-up, while this check awaits the database
        consumer._sent(6)
        return True

    consumer.send_json, consumer._still_watching = send_json, still_watching
    asyncio.run(consumer.live_event({"frame": {"seq": 6}}))
    assert sent == [6]
