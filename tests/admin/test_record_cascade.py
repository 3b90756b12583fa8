"""Records are read-only in the admin, yet a workspace (or an agent) someone may delete takes its
records with it: their read-only admins must not make the delete impossible."""

import pytest
from django.db import transaction

from calvin.audit.models import AuditEvent
from calvin.audit.services import audit_record
from calvin.workspaces.models import Agent, Workspace
from calvin.workspaces.services import agent_create
from sessions.models import Message, Reaction
from sessions.services import session_start
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def workspace_with_records(workspace, owner):
    session = session_start(workspace=workspace, owner=owner, prompt="build it", title="Build")
    ToolCall.objects.create(session=session, tool="send_message", status=ToolCall.Status.APPLIED)
    agent = agent_create(workspace=workspace, name="helper")
    message = Message.objects.filter(thread=session.thread).first()
    Reaction.objects.create(message=message, emoji="eyes", agent=agent)
    with transaction.atomic():
        audit_record(verb="session.stop", workspace=workspace, actor=owner, target=session)
    return workspace, agent


def test_a_superuser_deletes_a_workspace_with_its_records_and_its_audit_stays(admin_client, workspace_with_records):
    workspace, _ = workspace_with_records
    url = f"/admin/workspaces/workspace/{workspace.id}/delete/"
    page = admin_client.get(url)
    assert page.status_code == 200 and not page.context["perms_lacking"], page.context["perms_lacking"]
    done = admin_client.post(url, {"post": "yes"})
    assert done.status_code == 302, done.content.decode()[-3000:]
    assert not Workspace.objects.filter(id=workspace.id).exists()
    assert not ToolCall.objects.filter(session__workspace_id=workspace.id).exists()
    # The audit log is kept, without its workspace (superusers still read it).
    assert AuditEvent.objects.filter(verb="session.stop", workspace=None).count() == 1


def test_an_owner_deletes_an_agent_whose_reactions_go_with_it(owner_client, workspace_with_records):
    _, agent = workspace_with_records
    url = f"/admin/workspaces/agent/{agent.id}/delete/"
    assert not owner_client.get(url).context["perms_lacking"]
    owner_client.post(url, {"post": "yes"})
    assert not Agent.objects.filter(id=agent.id).exists()
    assert not Reaction.objects.filter(emoji="eyes").exists()


def test_a_record_itself_still_cannot_be_deleted(admin_client, workspace_with_records):
    workspace, _ = workspace_with_records
    call = ToolCall.objects.filter(session__workspace=workspace).first()
    assert admin_client.get(f"/admin/tools/toolcall/{call.id}/delete/").status_code == 403
    assert admin_client.post(f"/admin/tools/toolcall/{call.id}/delete/", {"post": "yes"}).status_code == 403
    assert ToolCall.objects.filter(id=call.id).exists()
