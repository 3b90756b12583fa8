"""No turn is left running when its host goes away in ways the heartbeat does not see (the
host row deleted, a host that never ends a turn), and a Stop is never lost to a host that
cannot be reached: real host daemons over the real /ws/host/."""

import signal
import time

import pytest
from django.utils import timezone

from sessions.hosts import host_create, hosts_sweep
from sessions.models import Host, Runner, Session, Turn
from sessions.scheduling import host_wait_text, turns_claim
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, commanded, scripted, system_texts, wait_connected
from tests.sessions.test_hosts import _pids_with, new_session, say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_heartbeats(settings):
    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    settings.CALVIN_HOST_LAPSE_SECONDS = 3.0


def _running(session) -> bool:
    return Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists()


def _host_row(name: str) -> Host:
    """A host that looks connected and live, with no daemon behind it."""
    host, _ = host_create(name=name)
    Host.objects.filter(id=host.id).update(channel_name=f"{name}-channel", capacity=2, last_heartbeat_at=timezone.now())
    return Host.objects.get(id=host.id)


def turn_running(hosts, workspace, name: str, *, seconds: int):
    """A session whose turn (a sleep, then a reply) is running on a new host called `name`."""
    session = new_session(workspace)
    scripted(session.agent, [{"sleep": seconds}, {"reply": "finished {prompt}"}])
    host = hosts(name)
    wait_connected(host)
    say(session, "work")
    wait_for(lambda: _running(session), timeout=20)
    return session, host


# A host deleted in the admin


def test_a_host_deleted_in_the_admin_mid_turn_its_turn_runs_on_another_host(hosts, workspace, admin_client):
    session, doomed = turn_running(hosts, workspace, "doomed", seconds=3)
    response = admin_client.post(f"/admin/agent_sessions/host/{doomed.host.id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Host.objects.filter(id=doomed.host.id).exists()
    # At once, not when some sweep notices: the turn is queued again, not "running" on no host.
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.QUEUED and turn.host_id is None and "was deleted" in turn.error
    assert doomed.process.wait(timeout=20) != 0  # its connection was closed; its token is gone
    survivor = hosts("survivor")
    wait_connected(survivor)
    wait_for(lambda: agent_texts(session) == ["finished work"], timeout=40)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE and turn.host_id == survivor.host.id and turn.attempts == 2
    assert [r.generation for r in Runner.objects.filter(session=session).order_by("generation")] == [1, 2]


def test_hosts_deleted_with_the_admins_bulk_action_leave_no_turn_running(workspace, admin_client):
    host = _host_row("bulk")
    session = new_session(workspace)
    say(session, "work")
    assert len(turns_claim(host_id=host.id)) == 1
    response = admin_client.post(
        "/admin/agent_sessions/host/",
        {"action": "delete_selected", "_selected_action": [host.id], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Host.objects.filter(id=host.id).exists()
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.QUEUED and "was deleted" in turn.error
    session.refresh_from_db()
    assert session.status == Session.Status.QUEUED
    # Its connection may still be open for a moment and be woken: it claims nothing, and does not crash.
    assert turns_claim(host_id=host.id) == []


def test_the_sweep_queues_again_a_running_turn_whose_host_row_is_gone(workspace):
    host = _host_row("gone")
    session = new_session(workspace)
    say(session, "work")
    assert len(turns_claim(host_id=host.id)) == 1
    Host.objects.filter(id=host.id).delete()  # not through the admin: the rows keep no host
    assert Turn.objects.get(session=session).status == Turn.Status.RUNNING
    hosts_sweep()
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.QUEUED and turn.error == host_wait_text("its host was deleted")
    assert Runner.objects.get(session=session).revoked_at is not None
    # And another host takes it.
    other = _host_row("other")
    assert [t["session"] for t in turns_claim(host_id=other.id)] == [session.id]


# A host that heartbeats but never ends the turn


def test_a_turn_its_host_never_ends_is_ended_by_the_sweep_and_said_in_the_thread(hosts, workspace, settings):
    session = new_session(workspace)
    marker = f"sleep {200_000 + time.time_ns() % 100_000}"  # unique: its process is found by it
    commanded(session.agent, ["sh", "-c", marker])
    host = hosts("slow")
    wait_connected(host)
    say(session, "go")
    wait_for(lambda: _running(session), timeout=20)
    wait_for(lambda: _pids_with(marker), timeout=10)
    # The host got the turn with the default timeout (an hour), so it will not end it: only
    # the gateway's own bound can. Lower that bound now; the host keeps heartbeating.
    settings.CALVIN_TURN_TIMEOUT_SECONDS = 1.0
    settings.CALVIN_TURN_GRACE_SECONDS = 0.5
    notice = wait_for(lambda: [t for t in system_texts(session) if t.startswith("The agent's turn was ended")], 20)
    assert "did not end it within the 1 s a turn may run" in notice[0]
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.FAILED and turn.error.startswith("ended by the gateway")
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE and session.host_id is None
    assert Runner.objects.get(session=session).revoked_at is not None
    # The host was told to stop the agent, and stays connected; its late report changes nothing.
    wait_for(lambda: not _pids_with(marker), timeout=10)
    time.sleep(1)
    assert host.process.poll() is None
    assert Turn.objects.get(session=session).status == Turn.Status.FAILED
    assert agent_texts(session) == []


def test_a_turn_within_its_bound_is_left_to_its_host(workspace, settings):
    settings.CALVIN_TURN_TIMEOUT_SECONDS = 60.0
    settings.CALVIN_TURN_GRACE_SECONDS = 5.0
    host = _host_row("fine")
    session = new_session(workspace)
    say(session, "work")
    assert len(turns_claim(host_id=host.id)) == 1
    Turn.objects.filter(session=session).update(started_at=timezone.now() - timezone.timedelta(seconds=60))
    hosts_sweep()
    assert Turn.objects.get(session=session).status == Turn.Status.RUNNING  # 60 s < 65 s
    Turn.objects.filter(session=session).update(started_at=timezone.now() - timezone.timedelta(seconds=66))
    hosts_sweep()
    assert Turn.objects.get(session=session).status == Turn.Status.FAILED


# Stop when the host cannot be reached


def test_stop_with_its_host_gone_stops_at_once_and_the_agent_never_runs_again(hosts, workspace, client):
    session, doomed = turn_running(hosts, workspace, "doomed", seconds=4)
    doomed.kill()
    wait_for(lambda: Host.objects.get(id=doomed.host.id).channel_name == "", timeout=10)
    client.force_login(session.owner.user)
    assert client.post(f"/threads/{session.thread_id}/stop/").status_code == 302
    # Nobody could be told: the turn is stopped now, and the thread says so.
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.STOPPED and turn.error.startswith("stopped by")
    assert any(t.startswith("Stopped (stopped by") and "could not be reached" in t for t in system_texts(session))
    # Past the lapse, with another host ready: nothing runs it again.
    survivor = hosts("survivor")
    wait_connected(survivor)
    wait_for(lambda: Host.objects.get(id=doomed.host.id).last_heartbeat_at is None, timeout=15)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.STOPPED and turn.attempts == 1
    assert agent_texts(session) == []
    assert Runner.objects.filter(session=session).count() == 1


def test_a_stop_its_frozen_host_never_heard_is_not_undone_when_the_host_lapses(hosts, workspace, client):
    session, frozen = turn_running(hosts, workspace, "frozen", seconds=5)
    frozen.process.send_signal(signal.SIGSTOP)  # connected, and deaf: the stop goes nowhere
    try:
        client.force_login(session.owner.user)
        assert client.post(f"/threads/{session.thread_id}/stop/").status_code == 302
        survivor = hosts("survivor")
        wait_connected(survivor)
        # The lapse: the stopped turn ends stopped, not queued for the survivor.
        wait_for(lambda: Turn.objects.get(session=session).status != Turn.Status.RUNNING, timeout=20)
        turn = Turn.objects.get(session=session)
        assert turn.status == Turn.Status.STOPPED and turn.error.startswith("stopped by"), turn.error
        assert any(t.startswith("Stopped (stopped by") and "could not be told" in t for t in system_texts(session))
        wait_for(lambda: Host.objects.get(id=frozen.host.id).last_heartbeat_at is None, timeout=10)
        time.sleep(2)  # the survivor claims on every heartbeat (0.5 s)
        turn.refresh_from_db()
        assert turn.status == Turn.Status.STOPPED and turn.attempts == 1
        assert agent_texts(session) == []
    finally:
        frozen.kill()


# An idle session whose host went away


def test_an_idle_session_whose_host_lapsed_runs_on_another_host(workspace):
    home, other = _host_row("home"), _host_row("other")
    session = new_session(workspace)
    say(session, "first")
    assert [t["session"] for t in turns_claim(host_id=home.id)] == [session.id]
    Turn.objects.filter(session=session).update(status=Turn.Status.DONE)
    Session.objects.filter(id=session.id).update(status=Session.Status.IDLE)
    say(session, "second")
    assert turns_claim(host_id=other.id) == []  # its host lives: it waits for it
    Host.objects.filter(id=home.id).update(last_heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
    # Lapsed, before any sweep has seen it (a sweep clears its heartbeat: the revoke test below).
    assert [t["session"] for t in turns_claim(host_id=other.id)] == [session.id]
    runners = list(Runner.objects.filter(session=session).order_by("generation"))
    assert [(r.host.name, r.revoked_at is None) for r in runners] == [("home", False), ("other", True)]
    session.refresh_from_db()
    assert session.host_id == other.id


def test_an_idle_session_whose_host_was_revoked_runs_on_another_host(workspace):
    from sessions.hosts import host_revoke

    home, other = _host_row("home"), _host_row("other")
    session = new_session(workspace)
    say(session, "first")
    assert len(turns_claim(host_id=home.id)) == 1
    Turn.objects.filter(session=session).update(status=Turn.Status.DONE)
    say(session, "second")
    assert host_revoke(host_id=home.id)
    assert [t["session"] for t in turns_claim(host_id=other.id)] == [session.id]


def test_a_running_turn_stopped_from_the_admin_says_who_stopped_it(workspace, admin_client):
    from sessions.turns import turn_finish

    host = _host_row("live")
    session = new_session(workspace)
    say(session, "work")
    [turn] = turns_claim(host_id=host.id)
    response = admin_client.post(
        "/admin/agent_sessions/session/",
        {"action": "stop", "_selected_action": [session.id], "confirmed": "yes"},  # its confirmation page's POST
        follow=True,
    )
    assert f"Session {session.id}: stopping." in response.content.decode()
    assert turn_finish(host_id=host.id, turn_id=turn["turn"], status="stopped")  # the host's report
    assert Turn.objects.get(session=session).error == "stopped from the admin by admin"
    assert system_texts(session) == ["Stopped (stopped from the admin by admin)."]
