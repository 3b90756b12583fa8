"""Writes through /api/v1/: a person's apply at once (by their role), an agent's wait for a
person's approval and then apply exactly what the card showed; Idempotency-Key."""

import pytest

from approvals.models import PendingApproval
from calvin.api.models import IdempotentRequest
from calvin.api.tokens import api_token_create
from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Member
from sessions.models import Turn
from sessions.services import message_post_by_person
from tests.api.conftest import Client, agent_client, member_of
from tests.api.test_auth_scope import assert_problem
from tests.conftest import wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def queued_turn(session) -> Turn:
    owner = Member.objects.filter(workspace_id=session.workspace_id).first()
    message_post_by_person(thread=session.thread, member=owner, text="do the thing")
    return Turn.objects.get(session=session, status=Turn.Status.QUEUED)


def test_the_sessions_owner_stops_it_at_once_and_a_plain_member_may_not(api_url, workspace, person):
    target = agent_client(api_url, workspace)
    turn = queued_turn(target.session)
    plain = member_of(workspace, "plain")
    _, token = api_token_create(member=plain, name="plain's")
    body = assert_problem(Client(api_url, token).post(f"/sessions/{target.session.id}/stop"), 403, "forbidden")
    assert "started this session" in body["detail"]
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED

    response = person.post(f"/sessions/{target.session.id}/stop")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "done"
    assert Turn.objects.get(id=turn.id).status == Turn.Status.STOPPED
    assert AuditEvent.objects.filter(verb="session.stop", via="api").exists()


def test_an_agents_stop_waits_for_approval_then_applies_once_approved(api_url, workspace, person, celery_worker):
    agent = agent_client(api_url, workspace)
    turn = queued_turn(agent.session)
    response = agent.post(f"/sessions/{agent.session.id}/stop")
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "approval-pending"
    approval = PendingApproval.objects.get(id=body["approval"])
    assert (approval.kind, approval.details) == ("sessions.stop", {"session": agent.session.id})
    assert approval.tool_call.server == ToolCall.Server.NCL
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED  # nothing happens before a decision

    assert_problem(agent.post(f"/approvals/{approval.id}/approve"), 403, "people_only")
    shown = person.get(f"/approvals/{approval.id}").json()
    assert shown["status"] == "pending" and shown["details"] == {"session": agent.session.id}
    decided = person.post(f"/approvals/{approval.id}/approve")
    assert decided.status_code == 200, decided.text
    wait_for(lambda: ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.APPLIED, timeout=30)
    assert Turn.objects.get(id=turn.id).status == Turn.Status.STOPPED
    assert_problem(person.post(f"/approvals/{approval.id}/deny"), 409, "not_decided")  # decided already


def test_an_agents_stop_denied_changes_nothing(api_url, workspace, person):
    agent = agent_client(api_url, workspace)
    turn = queued_turn(agent.session)
    approval_id = agent.post(f"/sessions/{agent.session.id}/stop").json()["approval"]
    assert person.post(f"/approvals/{approval_id}/deny").status_code == 200
    call = ToolCall.objects.get(approval__id=approval_id)
    assert call.status == ToolCall.Status.DENIED
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED


def test_a_group_agent_cannot_stop_another_agents_session(api_url, workspace):
    mine = agent_client(api_url, workspace, name="mine")
    other = agent_client(api_url, workspace, name="other")
    assert_problem(mine.post(f"/sessions/{other.session.id}/stop"), 404, "not_found")
    assert not PendingApproval.objects.exists()


def test_an_approval_of_another_workspace_is_never_decided(api_url, workspace, other_workspace, stranger, person):
    agent = agent_client(api_url, workspace)
    approval_id = agent.post(f"/sessions/{agent.session.id}/stop").json()["approval"]
    assert_problem(stranger.post(f"/approvals/{approval_id}/approve"), 404, "not_found")
    assert_problem(stranger.get(f"/approvals/{approval_id}"), 404, "not_found")
    assert stranger.get("/approvals").json()["items"] == []
    assert PendingApproval.objects.get(id=approval_id).status == PendingApproval.Status.PENDING
    assert [a["id"] for a in person.get("/approvals", status="pending").json()["items"]] == [approval_id]


def test_an_idempotency_key_repeats_the_answer_and_refuses_another_request(api_url, workspace, person):
    agent = agent_client(api_url, workspace)
    key = {"Idempotency-Key": "stop-1"}
    first = agent.post(f"/sessions/{agent.session.id}/stop", headers=key)
    again = agent.post(f"/sessions/{agent.session.id}/stop", headers=key)
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json() and again.headers["idempotent-replayed"] == "true"
    assert PendingApproval.objects.count() == 1  # one change for the two requests
    other = agent_client(api_url, workspace, name="other")
    body = assert_problem(agent.post(f"/sessions/{other.session.id}/stop", headers=key), 422, "idempotency_key_reused")
    assert "another request" in body["detail"]
    # Keys are the token's own: another token's same key is a new request.
    assert other.post(f"/sessions/{other.session.id}/stop", headers=key).status_code == 202
    assert IdempotentRequest.objects.count() == 2
    too_long = {"Idempotency-Key": "k" * 201}
    assert_problem(agent.post(f"/sessions/{agent.session.id}/stop", headers=too_long), 422, "invalid")


def test_a_refused_write_is_kept_under_its_key_too(api_url, workspace, person):
    plain = member_of(workspace, "plain")
    _, token = api_token_create(member=plain, name="plain's")
    client = Client(api_url, token)
    agent = agent_client(api_url, workspace)
    key = {"Idempotency-Key": "try"}
    assert_problem(client.post(f"/sessions/{agent.session.id}/stop", headers=key), 403, "forbidden")
    Member.objects.filter(id=plain.id).update(role=Member.Role.ADMIN)
    # The retry gets the first answer: the key names that request, whatever changed since.
    assert_problem(client.post(f"/sessions/{agent.session.id}/stop", headers=key), 403, "forbidden")
    assert client.post(f"/sessions/{agent.session.id}/stop").status_code == 200
