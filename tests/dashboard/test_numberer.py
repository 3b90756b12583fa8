"""The live console's numbering thread: a commit names its streams and does not wait; the thread
numbers each named stream once per pass, however often it was named, and one stream's failure
stops none of the others."""

import threading
import time

import pytest
from django.db import transaction

from calvin.dashboard import live
from calvin.dashboard.models import LiveEvent, LiveStream
from calvin.dashboard.numberer import StreamNumberer
from calvin.dashboard.numbering import live_streams_number
from calvin.events import SessionChanged, announce


class Recorder:
    def __init__(self, *, fail_on=()):
        self.passes: list[list[str]] = []
        self.release = threading.Event()
        self.fail_on = set(fail_on)

    def __call__(self, streams: list[str]) -> None:
        self.release.wait(10)
        self.passes.append(streams)
        if self.fail_on & set(streams):
            raise RuntimeError("the database went away")


def test_streams_named_during_a_pass_are_numbered_once_each_in_the_next():
    work = Recorder()
    numberer = StreamNumberer(work)
    numberer.request("workspace:1")
    time.sleep(0.1)  # the first pass has taken it and waits on the release
    for stream in ("thread:7", "workspace:1", "thread:7", "workspace:1"):
        numberer.request(stream)
    work.release.set()
    assert numberer.drain()
    assert work.passes == [["workspace:1"], ["thread:7", "workspace:1"]]
    numberer.stop()


def test_a_stream_that_fails_stops_none_of_the_others():
    work = Recorder(fail_on={"thread:1"})
    numberer = StreamNumberer(work)
    with numberer._changed:  # both named before the thread takes either
        for stream in ("thread:1", "thread:2"):
            numberer.request(stream)
    work.release.set()
    assert numberer.drain()
    numberer.request("thread:3")  # the thread lived on
    assert numberer.drain()
    # The pass failed as a whole, then each stream went on its own: thread:2 was numbered.
    assert work.passes == [["thread:1", "thread:2"], ["thread:1"], ["thread:2"], ["thread:3"]]
    numberer.stop()


def test_stop_ends_the_thread_and_a_later_request_starts_it_again():
    work = Recorder()
    work.release.set()
    numberer = StreamNumberer(work)
    numberer.request("thread:1")
    first = numberer._thread
    numberer.stop()
    assert not first.is_alive()
    numberer.request("thread:2")
    assert numberer.drain()
    assert work.passes == [["thread:1"], ["thread:2"]]
    numberer.stop()


@pytest.mark.django_db(transaction=True)
def test_a_commit_does_not_wait_for_its_events_to_be_numbered(make_agent, monkeypatch):
    session = make_agent().session
    stream = live.workspace_stream(session.workspace_id)
    live.NUMBERER.drain()
    held = threading.Event()
    real_work = live.NUMBERER._work

    def slow_work(name):
        held.wait(10)
        real_work(name)

    monkeypatch.setattr(live.NUMBERER, "_work", slow_work)
    started = time.monotonic()
    with transaction.atomic():
        announce(SessionChanged(workspace_id=session.workspace_id, thread_id=session.thread_id, session_id=session.id))
    assert time.monotonic() - started < 5  # not the 10 s the numbering is held for
    event = LiveEvent.objects.filter(stream=stream).latest("id")
    assert event.seq is None  # committed, not numbered yet
    held.set()
    assert live.NUMBERER.drain()
    event.refresh_from_db()
    assert event.seq == live.live_stream_seq(stream)


@pytest.mark.django_db(transaction=True)
def test_streams_numbered_together_each_go_on_from_their_own_counter():
    LiveStream.objects.create(name="thread:901", last_seq=41)
    for stream, kind in [("thread:901", "message"), ("workspace:902", "session"), ("thread:901", "turn")]:
        LiveEvent.objects.create(stream=stream, seq=None, kind=kind, payload={"n": 1})
    LiveEvent.objects.create(stream="thread:903", seq=None, kind="message", payload={})  # not asked for

    frames = live_streams_number(["workspace:902", "thread:901", "workspace:902"])

    assert [(f["stream"], f["seq"], f["kind"]) for f in frames] == [
        ("thread:901", 42, "message"),
        ("thread:901", 43, "turn"),
        ("workspace:902", 1, "session"),
    ]
    assert frames[0]["payload"] == {"n": 1}
    assert dict(LiveStream.objects.values_list("name", "last_seq")) == {"thread:901": 43, "workspace:902": 1}
    assert LiveEvent.objects.get(stream="thread:903").seq is None
    assert live_streams_number(["thread:901"]) == []  # nothing waits: nothing numbered again
