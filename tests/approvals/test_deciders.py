"""Who decides an approval. An agent's changes to itself (install_packages, add_mcp_server,
create_agent: seed 002's "an admin gets an approval card") wait for the workspace's owners and
admins; the person who started the session decides them too only where the workspace's
self_modification_deciders says "admins-and-owner". Every other approval stays the session
owner's or an owner's or admin's. Through the service, the web channel's buttons, the API, the
home page, and the card's words.

Requests go over real MCP (/mcp/nanoclaw); a real worker posts the cards."""

from datetime import timedelta

import httpx2
import pytest
from django.test import Client
from django.utils import timezone

from approvals.cards import approval_card
from approvals.models import PendingApproval
from approvals.services import ApprovalRefused, approval_decide
from calvin.api.tokens import api_token_create
from calvin.workspaces.models import Member, Workspace
from sessions.models import Session
from tests.approvals.support import card_of, card_text, pressing, requested
from tests.dashboard.conftest import MEMBER_PASSWORD
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
ADMINS = Workspace.SelfModificationDeciders.ADMINS
ADMINS_AND_OWNER = Workspace.SelfModificationDeciders.ADMINS_AND_OWNER
SELF_MODIFICATIONS = [
    ("install_packages", {"apt": ["jq"]}),
    ("add_mcp_server", {"name": "docs", "command": "docs-server"}),
    ("create_agent", {"name": "helper"}),
]
REFUSED = "only the workspace's owners and admins can decide an agent's changes to itself"
ADMINS_NOTE = "Only the workspace's owners and admins may decide."
OWNER_NOTE = "Only the person who started this session or a workspace owner or admin may decide."


def deciders_set(workspace, value: str) -> None:
    Workspace.objects.filter(id=workspace.id).update(self_modification_deciders=value)


def waiting(approval: PendingApproval) -> bool:
    approval.refresh_from_db()
    call_status = ToolCall.objects.values_list("status", flat=True).get(id=approval.tool_call_id)
    return (approval.status, approval.decided_by_id, call_status) == (S.PENDING, None, "awaiting_approval")


def other_approval(session, kind: str) -> PendingApproval:
    """An approval that is not an agent's change to itself, as post_thread and a Claude Code
    permission prompt open them (their tool calls wait inside the call: none here)."""
    details = {
        "post_thread": {"target": {"label": "#general", "url": "https://example.com/t/1"}, "post": "hello"},
        "approval_prompt": {"tool_name": "Bash", "input": {"command": "ls"}},
    }[kind]
    return PendingApproval.objects.create(
        session=session, kind=kind, summary=f"a {kind}", details=details, expires_at=timezone.now() + timedelta(hours=1)
    )


@pytest.fixture
def started_by_member(agent, plain_member):
    """The agent's session, started by "member": in Acme, neither its owner nor an admin."""
    Session.objects.filter(id=agent.session.id).update(owner=plain_member)
    agent.session.refresh_from_db()
    return agent


@pytest.fixture
def admin_member(workspace, django_user_model):
    user = django_user_model.objects.create_user("admin", password="pw-admin-123")
    return Member.objects.create(workspace=workspace, user=user, role=Member.Role.ADMIN)


@pytest.mark.parametrize(("kind", "arguments"), SELF_MODIFICATIONS, ids=[k for k, _ in SELF_MODIFICATIONS])
def test_the_sessions_owner_as_a_plain_member_decides_a_self_modification_only_where_the_workspace_says(
    started_by_member, plain_member, workspace, kind, arguments
):
    assert Workspace.objects.get(id=workspace.id).self_modification_deciders == ADMINS  # the default
    approval = requested(started_by_member, kind, arguments)
    assert approval.kind == kind == ToolCall.objects.get(id=approval.tool_call_id).tool
    for approve in (True, False):
        with pytest.raises(ApprovalRefused, match=REFUSED):
            approval_decide(approval_id=approval.id, member=plain_member, approve=approve, via="web")
    assert waiting(approval)

    deciders_set(workspace, ADMINS_AND_OWNER)
    said = approval_decide(approval_id=approval.id, member=plain_member, approve=False, via="web")
    assert said.startswith("Denied")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id) == (S.DENIED, plain_member.id)


def test_a_workspace_admin_decides_under_either_setting(started_by_member, plain_member, admin_member, workspace):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    for deciders in (ADMINS, ADMINS_AND_OWNER):
        deciders_set(workspace, deciders)
        for kind, arguments in SELF_MODIFICATIONS:
            approval = requested(started_by_member, kind, arguments)
            if deciders == ADMINS:  # the session's owner is refused here: only an admin decides
                with pytest.raises(ApprovalRefused, match=REFUSED):
                    approval_decide(approval_id=approval.id, member=plain_member, approve=False, via="web")
            said = approval_decide(approval_id=approval.id, member=admin_member, approve=False, via="dashboard")
            assert said.startswith("Denied")
            approval.refresh_from_db()
            assert (approval.status, approval.decided_by_id, approval.decided_via) == (
                S.DENIED,
                admin_member.id,
                "dashboard",
            )
        # The workspace's owner decides under either setting too.
        approval = requested(started_by_member, "install_packages", {"apt": ["curl"]})
        assert approval_decide(approval_id=approval.id, member=owner, approve=False, via="web").startswith("Denied")


def test_an_admin_of_another_workspace_never_decides(started_by_member, plain_member, stranger_member, workspace):
    assert stranger_member.is_admin  # Globex's owner, nobody in Acme
    for deciders in (ADMINS, ADMINS_AND_OWNER):
        deciders_set(workspace, deciders)
        Workspace.objects.filter(id=stranger_member.workspace_id).update(self_modification_deciders=deciders)
        approval = requested(started_by_member, "install_packages", {"apt": ["jq"]})
        with pytest.raises(ApprovalRefused):
            approval_decide(approval_id=approval.id, member=stranger_member, approve=True, via="api")
        if deciders == ADMINS:
            with pytest.raises(ApprovalRefused, match=REFUSED):
                approval_decide(approval_id=approval.id, member=plain_member, approve=True, via="api")
        assert waiting(approval)


@pytest.mark.parametrize("kind", ["post_thread", "approval_prompt"])
def test_other_approvals_stay_the_sessions_owners_to_decide(started_by_member, gateway, workspace, kind):
    """Under "admins", in the same thread: the agent's change to itself is refused to the session's
    owner, its post or permission prompt is theirs to decide, on the web channel's card buttons."""
    gated = requested(started_by_member, "install_packages", {"apt": ["jq"]})
    other = other_approval(started_by_member.session, kind)
    with pressing(gateway, "member", MEMBER_PASSWORD, started_by_member.session.thread_id) as member:
        refused = member.press(gated.id, "deny")
        assert refused.status_code == 409 and REFUSED in refused.json()["text"], refused.text
        decided = member.press(other.id, "deny")
        assert decided.status_code == 200 and decided.json()["text"].startswith("Denied"), decided.text
    other.refresh_from_db()
    assert (other.status, other.decided_by.user.username, other.decided_via) == (S.DENIED, "member", "web")
    assert waiting(gated)


def test_the_web_channels_buttons_follow_the_setting(started_by_member, gateway, workspace):
    approval = requested(started_by_member, "add_mcp_server", {"name": "docs", "command": "docs-server"})
    card_of(approval)
    with pressing(gateway, "member", MEMBER_PASSWORD, started_by_member.session.thread_id) as member:
        refused = member.press(approval.id, "approve")
        assert refused.status_code == 409 and refused.json() == {"ok": False, "text": refused.json()["text"]}
        assert REFUSED in refused.json()["text"]
        assert waiting(approval)
        deciders_set(workspace, ADMINS_AND_OWNER)
        decided = member.press(approval.id, "deny")
        assert decided.status_code == 200 and decided.json()["text"].startswith("Denied"), decided.text
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == (S.DENIED, "web")


def test_the_api_follows_the_setting(started_by_member, gateway, plain_member, workspace):
    _, token = api_token_create(member=plain_member, name="laptop")
    approval = requested(started_by_member, "create_agent", {"name": "helper"})
    url = f"{gateway}/api/v1/approvals/{approval.id}/deny"
    headers = {"Authorization": f"Bearer {token}"}
    refused = httpx2.post(url, headers=headers, timeout=30)
    assert refused.status_code == 403, refused.text
    assert REFUSED in refused.json()["detail"]
    assert waiting(approval)
    deciders_set(workspace, ADMINS_AND_OWNER)
    decided = httpx2.post(url, headers=headers, timeout=30)
    assert decided.status_code == 200, decided.text
    assert decided.json()["detail"].startswith("Denied")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id, approval.decided_via) == (S.DENIED, plain_member.id, "api")


def test_the_home_offers_the_buttons_only_to_who_may_decide(started_by_member, plain_member, workspace):
    approval = requested(started_by_member, "install_packages", {"apt": ["jq"]})
    post = other_approval(started_by_member.session, "post_thread")
    client = Client()
    client.force_login(plain_member.user)
    page = client.get("/w/acme/").content.decode()
    assert f"actions/approval/{approval.id}/" not in page and f"actions/approval/{post.id}/" in page
    assert "Only the workspace's owners and admins can decide this." in page
    deciders_set(workspace, ADMINS_AND_OWNER)
    page = client.get("/w/acme/").content.decode()
    assert f"actions/approval/{approval.id}/" in page and "owners and admins can decide this" not in page


def test_the_card_says_who_may_decide(started_by_member, workspace):
    approval = requested(started_by_member, "install_packages", {"apt": ["jq"]})
    card = card_of(approval)  # posted by the worker, as people see it
    assert ADMINS_NOTE in card_text(card) and OWNER_NOTE not in card_text(card)
    slack = approval_card(PendingApproval.objects.get(id=approval.id))["blocks"]
    assert {"type": "plain_text", "text": ADMINS_NOTE, "emoji": False} in slack[-1]["elements"]

    post = other_approval(started_by_member.session, "post_thread")
    assert OWNER_NOTE in [i.get("text") for i in approval_card(post)["items"]]

    deciders_set(workspace, ADMINS_AND_OWNER)
    notes = [i.get("text") for i in approval_card(PendingApproval.objects.get(id=approval.id))["items"]]
    assert OWNER_NOTE in notes and ADMINS_NOTE not in notes
