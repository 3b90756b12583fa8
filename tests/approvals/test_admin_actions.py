"""Deciding in the Django admin: "Approve selected" / "Deny selected", under the same rule as
every channel, through the real admin with a logged-in superuser; never by a free edit."""

import re

import pytest

from approvals.models import PendingApproval
from calvin.workspaces.models import Agent, Member
from tests.approvals.support import (
    card_note,
    card_of,
    requested,
    told,
)
from tests.conftest import wait_for
from tests.dashboard.conftest import csrf_token_in, post_login_form
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
CHANGELIST = "/admin/approvals/pendingapproval/"
ROOT_PASSWORD = "pw-root-123"


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", ROOT_PASSWORD)


@pytest.fixture
def admin_http(gateway, root):
    import httpx2

    with httpx2.Client(base_url=gateway, timeout=10) as http:
        response = post_login_form(http, "root", ROOT_PASSWORD, path="/admin/login/?next=/admin/")
        assert response.status_code == 302, response.text
        yield http


def run_action(http, action: str, ids: list[int]) -> str:
    """Select rows on the changelist, run an action and confirm it on its confirmation page
    (calvin/admin_actions.py), as a person does; returns the page shown after."""
    token = csrf_token_in(http.get(CHANGELIST).text)
    data = {"action": action, "_selected_action": [str(i) for i in ids], "csrfmiddlewaretoken": token}
    confirmation = http.post(CHANGELIST, data=data)
    assert confirmation.status_code == 200 and 'name="confirmed" value="yes"' in confirmation.text
    token = csrf_token_in(confirmation.text)
    response = http.post(
        CHANGELIST, data={**data, "csrfmiddlewaretoken": token, "confirmed": "yes"}, follow_redirects=True
    )
    assert response.status_code == 200, response.text
    return re.sub(r"\s+", " ", response.text)


def test_the_list_shows_status_kind_summary_and_the_decision(admin_http, agent):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    page = admin_http.get(CHANGELIST).text
    for column in ("column-status", "column-kind", "column-summary", "column-decided_by", "column-decided_via",
                   "column-decided_at"):  # fmt: skip
        assert column in page
    assert "install apt: jq" in page
    options = re.findall(r'<option value="(\w+)"', page)
    assert "approve_selected" in options and "deny_selected" in options
    assert "delete_selected" not in options  # the audit trail stays
    change = admin_http.get(f"{CHANGELIST}{approval.id}/change/").text
    assert 'name="status"' not in change and 'name="decided_by"' not in change  # read-only, no free edit


def test_a_workspace_admin_approves_selected_in_the_admin(admin_http, agent, root):
    Member.objects.create(workspace=agent.session.workspace, user=root, role=Member.Role.ADMIN)
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    card_of(approval)
    page = run_action(admin_http, "approve_selected", [approval.id])
    assert f"Approval {approval.id}: Approved: install apt: jq" in page
    wait_for(lambda: PendingApproval.objects.get(id=approval.id).status == S.APPLIED, timeout=20)
    approval.refresh_from_db()
    assert approval.decided_via == "admin" and approval.decided_by.user_id == root.id
    assert Agent.objects.get(id=agent.session.agent_id).apt_packages == ["jq"]
    assert card_note(approval, "Approved by root · applied")
    assert "approved by root" in told(agent, "applied")


def test_deny_selected(admin_http, agent, root):
    Member.objects.create(workspace=agent.session.workspace, user=root, role=Member.Role.OWNER)
    first = requested(agent, "install_packages", {"apt": ["jq"]})
    second = requested(agent, "add_mcp_server", {"name": "x", "command": "y"})
    page = run_action(admin_http, "deny_selected", [first.id, second.id])
    assert f"Approval {first.id}: Denied" in page and f"Approval {second.id}: Denied" in page
    assert set(PendingApproval.objects.values_list("status", flat=True)) == {S.DENIED}
    assert set(ToolCall.objects.filter(session=agent.session).values_list("status", flat=True)) == {"denied"}


def test_a_superuser_who_is_not_an_admin_of_the_workspace_is_refused(admin_http, agent, root):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    page = run_action(admin_http, "approve_selected", [approval.id])
    assert f"Approval {approval.id}: you are not a member of Acme; nothing changed." in page
    Member.objects.create(workspace=agent.session.workspace, user=root, role=Member.Role.MEMBER)
    page = run_action(admin_http, "approve_selected", [approval.id])
    assert "only the workspace&#x27;s owners and admins can decide an agent&#x27;s changes to itself" in page
    approval.refresh_from_db()
    assert approval.status == S.PENDING and approval.decided_by is None
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.AWAITING_APPROVAL


def test_an_agents_change_to_itself_waits_for_an_admin_unless_the_workspace_lets_its_starter_decide(
    admin_http, agent, root
):
    from calvin.workspaces.models import Workspace
    from sessions.models import Session

    # root started the session as a plain member of Acme.
    starter = Member.objects.create(workspace=agent.session.workspace, user=root, role=Member.Role.MEMBER)
    Session.objects.filter(id=agent.session.id).update(owner=starter)
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    page = run_action(admin_http, "deny_selected", [approval.id])
    assert "only the workspace&#x27;s owners and admins can decide an agent&#x27;s changes to itself" in page
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING
    Workspace.objects.filter(id=agent.session.workspace_id).update(
        self_modification_deciders=Workspace.SelfModificationDeciders.ADMINS_AND_OWNER
    )
    page = run_action(admin_http, "deny_selected", [approval.id])
    assert f"Approval {approval.id}: Denied" in page
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id, approval.decided_via) == (S.DENIED, starter.id, "admin")


def test_an_already_decided_row_is_told_so(admin_http, agent, root):
    Member.objects.create(workspace=agent.session.workspace, user=root, role=Member.Role.ADMIN)
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    run_action(admin_http, "deny_selected", [approval.id])
    page = run_action(admin_http, "approve_selected", [approval.id])
    assert f"Approval {approval.id}: already denied by root; nothing changed." in page
    assert PendingApproval.objects.get(id=approval.id).status == S.DENIED
