"""Pausing an agent from the admin: its sessions take no new turns in the real scheduling claim
(queued turns wait, the thread is told once who paused it); resuming lets them run. Another
workspace's agents are neither paused nor reachable."""

import pytest
from django.db import transaction

from calvin.audit.models import AuditEvent
from calvin.operators import OperatorRefused
from calvin.workspaces.models import Agent
from calvin.workspaces.pauses import agent_pause, agent_resume
from sessions.models import Host, Message, Session, Turn
from sessions.scheduling import _claim_session, turns_claim
from tests.admin.conftest import act, flat, live_host, session_in

pytestmark = pytest.mark.django_db


def notices(session) -> list[str]:
    return list(
        Message.objects.filter(thread_id=session.thread_id, author=Message.Author.SYSTEM).values_list("text", flat=True)
    )


def claimed_sessions(host) -> list[int]:
    return [turn["session"] for turn in turns_claim(host_id=host.id)]


def test_the_confirmation_page_lists_the_agent_and_changes_nothing(owner_client, workspace):
    session = session_in(workspace, prompt="hello")
    page = flat(act(owner_client, "agent", "pause", [session.agent_id]))
    assert "Pause the selected agents: are you sure?" in page
    assert "pause it: its sessions take no new turns" in page
    assert 'name="confirmed" value="yes"' in page and "csrfmiddlewaretoken" in page
    assert Agent.objects.get(id=session.agent_id).paused_at is None
    assert not AuditEvent.objects.filter(verb="agent.pause").exists()


def test_a_paused_agents_queued_turn_waits_and_its_thread_is_told_once(owner_client, owner, workspace):
    session = session_in(workspace, prompt="hello")
    host = live_host("h")
    page = flat(act(owner_client, "agent", "pause", [session.agent_id], confirmed=True))
    assert f"Agent {session.agent_id}: paused" in page
    agent = Agent.objects.get(id=session.agent_id)
    assert agent.paused_at is not None and agent.paused_by == owner.user
    assert claimed_sessions(host) == []
    assert claimed_sessions(host) == []  # every heartbeat claims again: told once
    assert notices(session).count("Waiting: the agent is paused by owner") == 1
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.QUEUED
    # A message sent while paused waits too, without a second notice.
    from sessions.services import message_post_by_person

    message_post_by_person(thread=session.thread, member=owner, text="and this")
    assert claimed_sessions(host) == []
    assert notices(session).count("Waiting: the agent is paused by owner") == 1
    event = AuditEvent.objects.get(verb="agent.pause")
    assert (event.workspace_id, event.actor_label, event.target_id, event.via) == (
        workspace.id,
        "owner",
        str(agent.id),
        "admin",
    )
    assert event.changes == {"paused": [False, True]}

    page = flat(act(owner_client, "agent", "resume", [agent.id], confirmed=True))
    assert f"Agent {agent.id}: resumed: its queued messages run now" in page
    assert claimed_sessions(host) == [session.id]
    assert set(Turn.objects.filter(session=session).values_list("status", flat=True)) == {Turn.Status.RUNNING}
    assert "Resumed by owner: the waiting messages run now." in notices(session)
    assert AuditEvent.objects.filter(verb="agent.resume", target_id=str(agent.id)).count() == 1


def test_pausing_one_agent_leaves_other_agents_and_workspaces_running(owner, workspace, other_workspace):
    paused = session_in(workspace, prompt="a")  # waiting longest: first in line
    other = session_in(other_workspace, prompt="b")
    host = live_host("shared")
    Host.objects.filter(id=host.id).update(capacity=1)  # the paused session must not take the one place
    agent_pause(agent_id=paused.agent_id, actor=owner)
    assert claimed_sessions(host) == [other.id]
    assert notices(other) == []


def test_a_claim_that_read_its_candidates_before_the_pause_still_takes_nothing(owner, workspace):
    """The claim looks again once it holds the session's row (agent_pause waits for held rows)."""
    session = session_in(workspace, prompt="a")
    host = live_host("h")
    agent_pause(agent_id=session.agent_id, actor=owner)
    with transaction.atomic():
        assert _claim_session(host, Session.objects.select_for_update().get(id=session.id)) is None
    assert Turn.objects.get(session=session).status == Turn.Status.QUEUED


def test_a_second_click_and_a_stale_page_change_nothing(owner_client, workspace):
    session = session_in(workspace)
    act(owner_client, "agent", "pause", [session.agent_id], confirmed=True)
    page = flat(act(owner_client, "agent", "pause", [session.agent_id], confirmed=True))
    assert f"Agent {session.agent_id}: already paused by owner; nothing changed." in page
    assert AuditEvent.objects.filter(verb="agent.pause").count() == 1
    act(owner_client, "agent", "resume", [session.agent_id], confirmed=True)
    page = flat(act(owner_client, "agent", "resume", [session.agent_id], confirmed=True))
    assert "it is not paused; nothing changed." in page
    assert AuditEvent.objects.filter(verb="agent.resume").count() == 1


def test_another_workspaces_agent_is_not_paused_by_a_typed_id(owner_client, other_workspace):
    theirs = session_in(other_workspace)
    page = flat(act(owner_client, "agent", "pause", [theirs.agent_id], confirmed=True))
    assert Agent.objects.get(id=theirs.agent_id).paused_at is None
    assert "1 selected row(s) no longer exist or are not yours to change" in page
    assert not AuditEvent.objects.filter(verb="agent.pause").exists()


def test_the_service_refuses_a_plain_member_and_another_workspaces_owner(plain_member, stranger_member, workspace):
    session = session_in(workspace)
    for actor in (plain_member, stranger_member):
        with pytest.raises(OperatorRefused, match="only an owner or admin"):
            agent_pause(agent_id=session.agent_id, actor=actor)
    with pytest.raises(OperatorRefused):
        agent_resume(agent_id=session.agent_id, actor=plain_member)
    assert Agent.objects.get(id=session.agent_id).paused_at is None


def test_a_superuser_who_is_no_member_pauses_as_themselves(django_user_model, workspace):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    session = session_in(workspace, prompt="x")
    agent_pause(agent_id=session.agent_id, actor=root)
    assert claimed_sessions(live_host("h")) == []
    assert "Waiting: the agent is paused by root" in notices(session)
