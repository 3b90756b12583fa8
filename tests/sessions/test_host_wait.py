"""A turn that waits for a host says so in its thread, once, and again when a host takes it:
none connected (after a grace period), only another workspace's hosts, or its host lapsed."""

import pytest
from django.utils import timezone

from calvin.workspaces.services import workspace_create
from sessions.hosts import host_create, hosts_sweep
from sessions.models import Host, Turn
from sessions.scheduling import HOST_TOOK, NO_HOST, host_wait_text, turns_claim
from tests.sessions.host_processes import system_texts
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_grace(settings):
    settings.CALVIN_HOST_WAIT_NOTICE_SECONDS = 0


def live_host(name: str, workspace=None) -> Host:
    host, _ = host_create(name=name, workspace=workspace)
    Host.objects.filter(id=host.id).update(channel_name=f"{name}-ch", capacity=2, last_heartbeat_at=timezone.now())
    return Host.objects.get(id=host.id)


def test_a_turn_no_host_can_take_is_said_once_and_again_when_a_host_takes_it(workspace):
    session = new_session(workspace)
    say(session, "work")
    hosts_sweep()
    hosts_sweep()  # beat sweeps every few seconds: one notice, not one per sweep
    assert system_texts(session) == [NO_HOST]

    host = live_host("late")
    assert [t["session"] for t in turns_claim(host_id=host.id)] == [session.id]
    assert system_texts(session) == [NO_HOST, HOST_TOOK]
    assert Turn.objects.get(session=session).error == ""


def test_within_the_grace_period_nothing_is_said(workspace, settings):
    settings.CALVIN_HOST_WAIT_NOTICE_SECONDS = 60
    session = new_session(workspace)
    say(session, "work")
    hosts_sweep()
    assert system_texts(session) == []


def test_a_connected_host_that_serves_every_workspace_means_no_notice(workspace):
    live_host("shared")
    session = new_session(workspace)
    say(session, "work")
    hosts_sweep()
    assert system_texts(session) == []
    assert turns_claim(host_id=Host.objects.get(name="shared").id)
    assert system_texts(session) == []  # it did not wait for a host: no "took it" either


def test_only_another_workspaces_host_connected_is_no_host_for_this_one(workspace, django_user_model):
    other = workspace_create(
        name="Globex", slug="globex", owner_user=django_user_model.objects.create_user("g", password="pw-g-12345")
    )
    live_host("globex-only", workspace=other)
    live_host("acme-own", workspace=workspace)
    theirs = new_session(other)
    Host.objects.filter(name="globex-only").update(channel_name="")  # Globex's host went away
    ours = new_session(workspace)
    say(ours, "ours")
    say(theirs, "theirs")
    hosts_sweep()
    assert system_texts(theirs) == [NO_HOST]
    assert system_texts(ours) == []  # Acme's own host is connected


def test_a_turn_whose_host_lapsed_mid_turn_says_why_it_waits_then_that_it_started(workspace, settings):
    settings.CALVIN_HOST_LAPSE_SECONDS = 30
    home, other = live_host("home"), live_host("other")
    session = new_session(workspace)
    say(session, "work")
    assert [t["session"] for t in turns_claim(host_id=home.id)] == [session.id]
    Host.objects.filter(id=home.id).update(last_heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
    Host.objects.filter(id=other.id).update(channel_name="")  # the only other host is gone too

    hosts_sweep()
    hosts_sweep()
    waiting = host_wait_text("its host home stopped answering")
    assert system_texts(session) == [waiting]  # once, and not the "none connected" one on top

    Host.objects.filter(id=other.id).update(channel_name="other-ch", last_heartbeat_at=timezone.now())
    assert [t["session"] for t in turns_claim(host_id=other.id)] == [session.id]
    assert system_texts(session) == [waiting, HOST_TOOK]


def test_a_paused_agents_turn_is_not_said_to_wait_for_a_host(workspace):
    session = new_session(workspace)
    session.agent.paused_at = timezone.now()
    session.agent.save(update_fields=["paused_at"])
    say(session, "work")
    hosts_sweep()
    assert NO_HOST not in system_texts(session)


def test_two_sweeps_telling_the_same_wait_post_it_once(workspace):
    from sessions.scheduling import turn_host_wait_tell

    session = new_session(workspace)
    say(session, "work")
    turn = Turn.objects.get(session=session)
    # Two hosts' heartbeats sweep at once: both read the turn as untold; only one update changes it.
    assert turn_host_wait_tell(turn_id=turn.id, thread_id=session.thread_id, text=NO_HOST)
    assert not turn_host_wait_tell(turn_id=turn.id, thread_id=session.thread_id, text=NO_HOST)
    assert system_texts(session) == [NO_HOST]
