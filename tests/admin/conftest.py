"""Fixtures of the operator tests: a workspace owner in the admin (neither staff nor superuser),
a second workspace, and rows to act on."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import PendingApproval
from calvin.workspaces.models import Member
from sessions.hosts import host_create
from sessions.models import Host
from sessions.services import message_post_by_person, session_start
from tests.dashboard.conftest import other_workspace, plain_member, stranger_member  # noqa: F401
from tools.models import ToolCall

CHANGELISTS = {
    "approval": "/admin/approvals/pendingapproval/",
    "session": "/admin/agent_sessions/session/",
    "host": "/admin/agent_sessions/host/",
    "runner": "/admin/agent_sessions/runner/",
    "toolcall": "/admin/tools/toolcall/",
    "agent": "/admin/workspaces/agent/",
    "quota": "/admin/workspaces/quota/",
}


@pytest.fixture
def owner(workspace):
    return Member.objects.select_related("user").get(workspace=workspace, user__username="owner")


@pytest.fixture
def owner_client(owner):
    """The workspace's owner, logged in; not staff, not a superuser."""
    assert not owner.user.is_staff and not owner.user.is_superuser
    client = Client()
    client.force_login(owner.user)
    return client


def flat(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def act(client, model: str, action: str, ids, *, confirmed: bool = False):
    """Run an action on the change list as a person does (a confirmed POST is the
    confirmation page's own form); returns the page shown after."""
    data = {"action": action, "_selected_action": [str(i) for i in ids]}
    if confirmed:
        data["confirmed"] = "yes"
    response = client.post(CHANGELISTS[model], data, follow=True)
    assert response.status_code == 200, response.content[:2000]
    return response


def session_in(workspace, *, prompt: str = "", title: str = "t"):
    member = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=member, title=title)
    if prompt:
        message_post_by_person(thread=session.thread, member=member, text=prompt)
    return session


def approval_in(session, *, summary: str = "install apt: jq", minutes: int = 60) -> PendingApproval:
    arguments = {"apt": ["jq"], "npm": [], "reason": ""}
    call = ToolCall.objects.create(
        session=session,
        server=ToolCall.Server.NANOCLAW,
        tool="install_packages",
        arguments=arguments,
        payload={"agent_id": session.agent_id},
        status=ToolCall.Status.AWAITING_APPROVAL,
    )
    return PendingApproval.objects.create(
        session=session,
        tool_call=call,
        kind="install_packages",
        summary=summary,
        details=arguments,
        expires_at=timezone.now() + timedelta(minutes=minutes),
    )


def live_host(name: str, workspace=None) -> Host:
    """A host that looks connected and live, with no daemon behind it."""
    host, _ = host_create(name=name, workspace=workspace)
    Host.objects.filter(id=host.id).update(channel_name=f"{name}-channel", capacity=4, last_heartbeat_at=timezone.now())
    return Host.objects.get(id=host.id)
