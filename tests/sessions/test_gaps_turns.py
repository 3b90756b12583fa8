"""What the gateway keeps from a turn: the provider's conversation id for the next turn, the
agent's minutes against the workspace's quota; and a host made in the admin's add form."""

import re

import pytest
from django.utils import timezone

from calvin.workspaces.models import DailyUsage
from sessions.hosts import host_create
from sessions.models import Host, Session
from sessions.scheduling import turns_claim
from sessions.turns import turn_finish
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, host_process_start, scripted, wait_connected
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_heartbeats(settings):
    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    settings.CALVIN_HOST_LAPSE_SECONDS = 3.0


def test_the_providers_session_id_is_kept_and_the_next_turn_resumes_it(workspace):
    host, _ = host_create(name="h")
    Host.objects.filter(id=host.id).update(channel_name="h-channel", capacity=2, last_heartbeat_at=timezone.now())
    session = new_session(workspace)
    say(session, "first")
    [first] = turns_claim(host_id=host.id)
    assert first["provider"]["resume"] == ""  # nothing to resume yet
    assert turn_finish(host_id=host.id, turn_id=first["turn"], status="done", reply="hi", agent_session_id="conv-41")
    session.refresh_from_db()
    assert session.agent_session_id == "conv-41"
    say(session, "second")
    [second] = turns_claim(host_id=host.id)
    assert second["provider"]["resume"] == "conv-41"
    # A turn that reports no id keeps the one the conversation has.
    assert turn_finish(host_id=host.id, turn_id=second["turn"], status="done", reply="again")
    assert Session.objects.get(id=session.id).agent_session_id == "conv-41"


def test_the_agents_minutes_of_a_real_turn_are_counted_for_its_workspace(hosts, workspace):
    def used() -> int:
        row = DailyUsage.objects.filter(workspace=workspace).order_by("-day").first()
        return row.agent_seconds if row else 0

    before = used()
    session = new_session(workspace)
    scripted(session.agent, [{"sleep": 3}, {"reply": "rested"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "sleep")
    wait_for(lambda: agent_texts(session) == ["rested"], timeout=40)
    assert used() - before >= 3


def test_a_host_made_in_the_admins_add_form_shows_its_token_once_and_it_connects(
    admin_client, gateway, tmp_path, workspace
):
    response = admin_client.post(
        "/admin/agent_sessions/host/add/", {"name": "from-the-form", "workspace": workspace.id}, follow=True
    )
    assert response.status_code == 200 and response.redirect_chain == []  # its own page, not a notice
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    tokens = set(re.findall(r"cvh_[A-Za-z0-9_\-]+", page))
    assert len(tokens) == 1, tokens
    token = tokens.pop()
    # Never through Django's messages, whose cookie would carry it to the next page.
    assert token not in str(admin_client.cookies.get("messages", ""))
    host = Host.objects.get(name="from-the-form")
    assert host.workspace_id == workspace.id and token not in (host.token_digest, "") and host.token_hint
    # Once: the host's page, and the list, never show it again.
    assert token not in admin_client.get(f"/admin/agent_sessions/host/{host.id}/change/").content.decode()
    assert token not in admin_client.get("/admin/agent_sessions/host/").content.decode()
    # And it is the token a real daemon connects with.
    daemon = host_process_start(gateway=gateway, host=host, token=token, directory=tmp_path / "from-the-form")
    try:
        wait_connected(daemon)
        host.refresh_from_db()
        assert host.version and host.capacity == 4
    finally:
        daemon.stop()
