"""A queued turn wakes only the hosts that may take it, not every connected host
(sessions.scheduling.hosts_to_wake); what nobody was woken for, a heartbeat claims."""

from datetime import timedelta

import pytest
from django.utils import timezone

from calvin.workspaces.services import workspace_create
from sessions.hosts import host_create
from sessions.models import Host, Session
from sessions.scheduling import hosts_to_wake, turns_claim
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db(transaction=True)


def live_host(name: str, *, capacity: int = 2, workspace=None, heartbeat_ago: float = 0.0) -> Host:
    host, _ = host_create(name=name, workspace=workspace)
    Host.objects.filter(id=host.id).update(
        channel_name=f"{name}-channel",
        capacity=capacity,
        last_heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_ago),
    )
    return Host.objects.get(id=host.id)


def test_a_session_on_a_live_host_wakes_that_host_only(workspace):
    first, second = live_host("first"), live_host("second")
    session = new_session(workspace)
    say(session, "one")
    assert {m["session"] for m in turns_claim(host_id=first.id)} == {session.id}
    assert hosts_to_wake(session_id=session.id) == ["first-channel"]
    Host.objects.filter(id=first.id).update(channel_name="")  # disconnected, not lapsed: still its host
    assert hosts_to_wake(session_id=session.id) == []
    assert second.channel_name == "second-channel"


def test_a_session_whose_host_lapsed_wakes_the_others(workspace, settings):
    first, _ = live_host("first"), live_host("second")
    session = new_session(workspace)
    Session.objects.filter(id=session.id).update(host=first)
    lapsed = timezone.now() - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS + 1)
    Host.objects.filter(id=first.id).update(last_heartbeat_at=lapsed)
    assert hosts_to_wake(session_id=session.id) == ["second-channel"]


def test_a_new_session_wakes_the_least_loaded_hosts_with_room_that_serve_its_workspace(workspace):
    full = live_host("full", capacity=1)
    loaded = live_host("loaded", capacity=3)
    idle = live_host("idle", capacity=3)
    other = workspace_create(name="Globex", slug="globex")
    live_host("theirs", workspace=other)
    live_host("silent", heartbeat_ago=3600)
    Host.objects.filter(id=idle.id).update(channel_name="")  # not connected: nothing to wake
    live_host("spare", capacity=3)
    for host, count in ((full, 1), (loaded, 1)):
        for i in range(count):
            session = new_session(workspace)
            say(session, f"{host.name} {i}")
            assert turns_claim(host_id=host.id)
    waiting = new_session(workspace)
    assert hosts_to_wake(session_id=waiting.id) == ["spare-channel", "loaded-channel"]


def test_with_no_host_with_room_nobody_is_woken_and_a_heartbeat_claims_later(workspace):
    only = live_host("only", capacity=1)
    first = new_session(workspace)
    say(first, "one")
    assert turns_claim(host_id=only.id)
    second = new_session(workspace)
    say(second, "two")
    assert hosts_to_wake(session_id=second.id) == []
    assert turns_claim(host_id=only.id) == []  # full: the turn waits, queued, for room
    assert Session.objects.get(id=second.id).status == Session.Status.QUEUED


def test_a_message_in_a_thread_wakes_its_sessions_host_and_no_other(workspace, monkeypatch):
    from sessions import host_link

    first, second = live_host("first"), live_host("second")
    session = new_session(workspace)
    say(session, "one")
    assert turns_claim(host_id=first.id)  # the session is the first host's from here on
    sent = []
    monkeypatch.setattr(host_link, "host_channel_send", lambda channel, event: sent.append((channel, event)))
    say(session, "two")
    assert sent == [("first-channel", {"type": "host.wake"})]
    assert second.channel_name not in {channel for channel, _ in sent}
