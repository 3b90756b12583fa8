"""Operator actions in the admin, by a workspace owner who is neither staff nor a superuser:
each asks first on a confirmation page (nothing changes until it is confirmed, with CSRF),
then calls its service per row, says what happened to each row, and changes nothing on a
second click or for another workspace's rows."""

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import PendingApproval
from calvin.audit.models import AuditEvent
from sessions.models import Host, Message, Runner, Turn
from sessions.services import runner_start
from tests.admin.conftest import CHANGELISTS, act, approval_in, flat, live_host, session_in
from tools.models import ToolCall

pytestmark = pytest.mark.django_db

S = PendingApproval.Status


def told(session) -> list[str]:
    return list(Message.objects.filter(thread_id=session.thread_id).values_list("text", flat=True))


# Approvals


def test_approve_asks_first_then_approves_once(owner_client, workspace):
    approval = approval_in(session_in(workspace))
    page = flat(act(owner_client, "approval", "approve_selected", [approval.id]))
    assert "Approve selected: are you sure?" in page
    assert f"Approval {approval.id}" in page and "approve install_packages: install apt: jq" in page
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING  # asked, not done
    page = flat(act(owner_client, "approval", "approve_selected", [approval.id], confirmed=True))
    assert f"Approval {approval.id}: Approved: install apt: jq. Applying it now." in page
    approval.refresh_from_db()
    assert (
        approval.status == S.APPROVED
        and approval.decided_via == "admin"
        and approval.decided_by.user.username == "owner"
    )
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.PENDING
    # The same confirmation page posted again (a second click, a stale tab): nothing changes.
    page = flat(act(owner_client, "approval", "deny_selected", [approval.id], confirmed=True))
    assert f"Approval {approval.id}: already approved by owner; it is being applied; nothing changed." in page
    assert PendingApproval.objects.get(id=approval.id).status == S.APPROVED


def test_the_confirmation_says_a_decided_row_will_not_change(owner_client, workspace):
    approval = approval_in(session_in(workspace))
    act(owner_client, "approval", "deny_selected", [approval.id], confirmed=True)
    page = flat(act(owner_client, "approval", "approve_selected", [approval.id]))
    assert "nothing: it is denied already" in page


def test_deny_tells_the_agent(owner_client, workspace):
    session = session_in(workspace)
    approval = approval_in(session)
    page = flat(act(owner_client, "approval", "deny_selected", [approval.id], confirmed=True))
    assert f"Approval {approval.id}: Denied: install apt: jq. The agent is told." in page
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.DENIED
    assert any("was denied by owner" in text for text in told(session))


def test_another_workspaces_approval_is_neither_listed_nor_decided(owner_client, other_workspace):
    theirs = approval_in(session_in(other_workspace), summary="Globex plan")
    page = flat(act(owner_client, "approval", "approve_selected", [theirs.id]))
    assert "Globex plan" not in page and "are you sure?" not in page  # nothing of theirs to confirm
    assert "1 selected row(s) no longer exist or are not yours to change" in page
    page = flat(act(owner_client, "approval", "approve_selected", [theirs.id], confirmed=True))
    assert "1 selected row(s) no longer exist or are not yours to change; nothing changed for them." in page
    assert PendingApproval.objects.get(id=theirs.id).status == S.PENDING


def test_a_confirmation_without_its_csrf_token_is_refused(owner, workspace):
    approval = approval_in(session_in(workspace))
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner.user)
    data = {"action": "approve_selected", "_selected_action": [approval.id], "confirmed": "yes"}
    assert client.post(CHANGELISTS["approval"], data).status_code == 403
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING


def test_expire_now_expires_tells_the_agent_and_records_it(owner_client, owner, workspace):
    session = session_in(workspace)
    approval = approval_in(session)
    page = flat(act(owner_client, "approval", "expire_selected", [approval.id]))
    assert "expire install_packages: install apt: jq now" in page
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING
    page = flat(act(owner_client, "approval", "expire_selected", [approval.id], confirmed=True))
    assert f"Approval {approval.id}: expired now" in page
    approval.refresh_from_db()
    assert approval.status == S.EXPIRED and approval.expires_at <= timezone.now()
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.EXPIRED
    assert any("expired: owner expired it after" in text and "nothing was changed" in text for text in told(session))
    event = AuditEvent.objects.get(verb="approval.expire")
    assert (event.actor_label, event.workspace_id, event.target_id, event.via) == (
        "owner",
        workspace.id,
        str(approval.id),
        "admin",
    )
    assert event.changes == {"status": ["pending", "expired"]}
    page = flat(act(owner_client, "approval", "expire_selected", [approval.id], confirmed=True))
    assert "expired: nobody decided within" in page or "nothing changed" in page
    assert AuditEvent.objects.filter(verb="approval.expire").count() == 1


def test_expire_now_leaves_a_decided_approval_as_it_is(owner_client, workspace):
    approval = approval_in(session_in(workspace))
    act(owner_client, "approval", "approve_selected", [approval.id], confirmed=True)
    page = flat(act(owner_client, "approval", "expire_selected", [approval.id], confirmed=True))
    assert "already approved by owner" in page and "nothing changed" in page
    assert PendingApproval.objects.get(id=approval.id).status == S.APPROVED
    assert not AuditEvent.objects.filter(verb="approval.expire").exists()


# Sessions


def test_stop_asks_first_then_stops_and_says_when_nothing_runs(owner_client, workspace):
    session = session_in(workspace, prompt="work")
    page = flat(act(owner_client, "session", "stop", [session.id]))
    assert "drop 1 queued message(s) from the queue" in page
    assert Turn.objects.get(session=session).status == Turn.Status.QUEUED
    page = flat(act(owner_client, "session", "stop", [session.id], confirmed=True))
    assert f"Session {session.id}: stopped before the agent started" in page
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.STOPPED and turn.error == "stopped by owner"
    page = flat(act(owner_client, "session", "stop", [session.id], confirmed=True))
    assert f"Session {session.id}: the agent is not running; nothing changed." in page


def test_another_workspaces_session_is_not_stopped(owner_client, other_workspace):
    theirs = session_in(other_workspace, prompt="work")
    page = flat(act(owner_client, "session", "stop", [theirs.id], confirmed=True))
    assert "not yours to change" in page
    assert Turn.objects.get(session=theirs).status == Turn.Status.QUEUED


# Tokens


def test_revoke_a_host_token_once_and_record_it(owner_client, workspace, other_workspace):
    host = live_host("ours", workspace)
    theirs = live_host("theirs", other_workspace)
    page = flat(act(owner_client, "host", "revoke", [host.id, theirs.id]))
    assert "revoke its token and disconnect it" in page and "theirs" not in page
    page = flat(act(owner_client, "host", "revoke", [host.id, theirs.id], confirmed=True))
    assert f"Host {host.id}: token revoked" in page and "1 selected row(s)" in page
    assert Host.objects.get(id=host.id).revoked_at is not None
    assert Host.objects.get(id=theirs.id).revoked_at is None
    event = AuditEvent.objects.get(verb="host.token_revoke")
    assert (event.actor_label, event.workspace_id, event.target_id) == ("owner", workspace.id, str(host.id))
    page = flat(act(owner_client, "host", "revoke", [host.id], confirmed=True))
    assert "its token was revoked already; nothing changed." in page
    assert AuditEvent.objects.filter(verb="host.token_revoke").count() == 1


def test_a_host_serving_every_workspace_is_not_revoked_by_a_tenant(owner_client):
    shared = live_host("shared")
    act(owner_client, "host", "revoke", [shared.id], confirmed=True)
    assert Host.objects.get(id=shared.id).revoked_at is None


def test_reset_a_host_token_shows_it_once_and_records_only_hints(owner_client, workspace):
    host = live_host("ours", workspace)
    old_hint = host.token_hint
    page = flat(act(owner_client, "host", "reset_token", [host.id]))
    assert "the new token is shown once" in page
    assert Host.objects.get(id=host.id).token_hint == old_hint
    response = act(owner_client, "host", "reset_token", [host.id], confirmed=True)
    assert not response.redirect_chain and "no-store" in response["Cache-Control"]  # a page of its own
    page = flat(response)
    host.refresh_from_db()
    assert host.token_hint != old_hint and f"new token for ours, shown this once: {host.token_hint}" in page
    assert host.token_hint not in str(owner_client.cookies)  # never kept for a later page
    assert host.token_hint not in flat(owner_client.get(CHANGELISTS["host"]))
    event = AuditEvent.objects.get(verb="host.token_reset")
    assert event.changes == {"token_hint": [old_hint, host.token_hint]}
    assert "token" not in {key.lower() for key in event.changes}


def test_revoke_a_runner_token_once_and_record_it(owner_client, workspace, other_workspace):
    runner, _ = runner_start(session=session_in(workspace))
    theirs, _ = runner_start(session=session_in(other_workspace))
    page = flat(act(owner_client, "runner", "revoke", [runner.id]))
    assert "revoke its token: the agent holding it is refused from now on" in page
    page = flat(act(owner_client, "runner", "revoke", [runner.id, theirs.id], confirmed=True))
    assert f"Runner {runner.id}: token revoked" in page
    assert Runner.objects.get(id=runner.id).revoked_at is not None
    assert Runner.objects.get(id=theirs.id).revoked_at is None
    page = flat(act(owner_client, "runner", "revoke", [runner.id], confirmed=True))
    assert "it was revoked already; nothing changed." in page
    assert AuditEvent.objects.filter(verb="runner.token_revoke").count() == 1


@pytest.mark.parametrize("bad", ["abc", "1\x00", "9" * 30, "-1.5"])
def test_a_selection_of_ids_that_are_no_ids_changes_nothing_and_says_so(owner_client, workspace, bad):
    approval = approval_in(session_in(workspace))
    page = flat(act(owner_client, "approval", "approve_selected", [approval.id, bad], confirmed=True))
    assert "The selection holds an id that is not one; nothing changed." in page
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING


def test_expire_now_is_refused_to_a_plain_member_and_to_another_workspaces_owner(
    plain_member, stranger_member, workspace
):
    from approvals.services import ApprovalRefused, approval_expire_now

    approval = approval_in(session_in(workspace))
    for actor in (plain_member, stranger_member):
        with pytest.raises(ApprovalRefused, match="only an owner or admin"):
            approval_expire_now(approval_id=approval.id, actor=actor)
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING
    assert not AuditEvent.objects.filter(verb="approval.expire").exists()


def test_the_sweeps_expiry_is_one_event_by_the_system(workspace):
    from approvals.services import approvals_sweep

    approval = approval_in(session_in(workspace), minutes=-1)
    assert approvals_sweep(now=timezone.now())["expired"] == 1
    event = AuditEvent.objects.get(verb="approval.expire")
    assert (event.actor_kind, event.target_id) == ("system", str(approval.id))
    assert approvals_sweep(now=timezone.now())["expired"] == 0
    assert AuditEvent.objects.filter(verb="approval.expire").count() == 1
