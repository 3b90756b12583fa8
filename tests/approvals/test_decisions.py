"""Deciding an approval: who may, exactly once, the agent told, the card edited in place, expiry as expiry.

Requests go over real MCP (/mcp/nanoclaw); presses are real HTTP posts to the web channel's
action URL by people logged in through the login form; a real worker applies.
"""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from threading import Barrier

import pytest
from django.utils import timezone

from approvals.models import PendingApproval
from approvals.services import (
    MAX_PENDING_PER_SESSION,
    ApprovalRefused,
    approval_card_post,
    approval_decide,
    approval_expire,
)
from approvals.tasks import post_approval_card, sweep_approvals
from calvin.workspaces.models import Agent, Member
from sessions.models import Message
from tests.approvals.support import (
    OWNER_PASSWORD,
    card_note,
    card_of,
    has_buttons,
    pressing,
    refused,
    requested,
    system_messages,
    told,
)
from tests.conftest import wait_for
from tests.dashboard.conftest import MEMBER_PASSWORD, STRANGER_PASSWORD
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
PACKAGES = {"apt": ["jq"]}


def environment_version(agent) -> int:
    return Agent.objects.get(id=agent.session.agent_id).environment_version


def unchanged(approval: PendingApproval, agent, version: int) -> None:
    approval.refresh_from_db()
    assert approval.status == S.PENDING and approval.decided_by is None and approval.decided_at is None
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.AWAITING_APPROVAL
    assert environment_version(agent) == version


# Who may decide


def test_a_plain_member_pressing_changes_nothing(agent, gateway, plain_member):
    version = environment_version(agent)
    approval = requested(agent, "install_packages", PACKAGES)
    card = card_of(approval)
    with pressing(gateway, "member", MEMBER_PASSWORD, agent.session.thread_id) as plain:
        for value in ("approve", "deny"):
            response = plain.press(approval.id, value)
            assert response.status_code == 409
            assert "only the workspace's owners and admins can decide" in response.json()["text"]
    unchanged(approval, agent, version)
    assert has_buttons(card)


def test_a_member_of_another_workspace_pressing_changes_nothing(agent, gateway, stranger_member):
    version = environment_version(agent)
    approval = requested(agent, "install_packages", PACKAGES)
    card_of(approval)
    with pressing(gateway, "stranger", STRANGER_PASSWORD, agent.session.thread_id) as stranger:
        response = stranger.press(approval.id)
        assert response.status_code == 404  # the thread is not theirs to see at all
    unchanged(approval, agent, version)


def test_an_admin_of_another_workspace_is_refused_by_the_service_too(agent, stranger_member):
    assert stranger_member.is_admin  # owner of Globex, nothing in Acme
    approval = requested(agent, "install_packages", PACKAGES)
    with pytest.raises(ApprovalRefused, match="only the workspace's owners and admins"):
        approval_decide(approval_id=approval.id, member=stranger_member, approve=True, via="slack")
    with pytest.raises(ApprovalRefused):
        approval_decide(approval_id=approval.id, member=None, approve=True, via="slack")
    unchanged(approval, agent, environment_version(agent))


def test_a_workspace_admin_decides_a_session_someone_else_started(agent, plain_member):
    Member.objects.filter(id=plain_member.id).update(role=Member.Role.ADMIN)
    plain_member.refresh_from_db()
    approval = requested(agent, "install_packages", PACKAGES)
    approval_decide(approval_id=approval.id, member=plain_member, approve=True, via="dashboard")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id, approval.decided_via) in {
        (S.APPROVED, plain_member.id, "dashboard"),
        (S.APPLIED, plain_member.id, "dashboard"),
    }


def test_a_press_must_come_from_the_approvals_own_thread(agent, make_agent, gateway):
    approval = requested(agent, "install_packages", PACKAGES)
    elsewhere = make_agent()  # another thread of the same workspace: its owner can see it
    with pressing(gateway, "owner", OWNER_PASSWORD, elsewhere.session.thread_id) as owner:
        response = owner.press(approval.id)
    assert response.status_code == 409 and "no such approval in this thread" in response.json()["text"]
    unchanged(approval, agent, environment_version(agent))


def test_only_the_cards_buttons(agent, gateway):
    approval = requested(agent, "install_packages", PACKAGES)
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as owner:
        response = owner.press(approval.id, "approve please")
    assert response.status_code == 409 and "not one of the card's buttons" in response.json()["text"]
    unchanged(approval, agent, environment_version(agent))


# Exactly once


def test_eight_concurrent_approve_clicks_apply_once(agent, gateway):
    version = environment_version(agent)
    approval = requested(agent, "install_packages", PACKAGES)
    card_of(approval)
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as owner:
        barrier = Barrier(8)

        def click(_):
            barrier.wait()
            return owner.press(approval.id, "approve")

        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(click, range(8)))
    assert sorted(r.status_code for r in responses) == [200] + [409] * 7
    assert all("already approved by owner" in r.json()["text"] for r in responses if r.status_code == 409)
    wait_for(lambda: PendingApproval.objects.get(id=approval.id).status == S.APPLIED, timeout=20)
    call = ToolCall.objects.get(id=approval.tool_call_id)
    assert call.status == ToolCall.Status.APPLIED and call.attempts == 1
    assert environment_version(agent) == version + 1
    told(agent, "applied")
    assert len([t for t in system_messages(agent) if "install_packages" in t]) == 1


def test_a_second_click_and_a_stale_card_change_nothing_and_say_so(agent, gateway):
    approval = requested(agent, "install_packages", PACKAGES)
    card_of(approval)
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as owner:
        assert owner.press(approval.id, "deny").status_code == 200
        again = owner.press(approval.id, "approve")  # the card still on an old page
    assert again.status_code == 409 and again.json()["text"] == "already denied by owner"
    approval.refresh_from_db()
    assert approval.status == S.DENIED and approval.decided_via == "web"
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.DENIED


def test_deny_tells_the_agent_and_edits_the_card(agent, gateway):
    approval = requested(agent, "install_packages", PACKAGES)
    card = card_of(approval)
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as owner:
        response = owner.press(approval.id, "deny")
    assert response.json() == {"ok": True, "text": "Denied: install apt: jq. The agent is told."}
    text = told(agent, "denied")
    assert "install_packages" in text and "denied by owner" in text and "Nothing was changed" in text
    assert card_note(approval, "Denied by owner")
    assert not has_buttons(card)
    assert Agent.objects.get(id=agent.session.agent_id).apt_packages == []


def test_the_card_is_posted_once_however_often_its_task_runs(agent):
    approval = requested(agent, "install_packages", PACKAGES)
    first = card_of(approval)
    post_approval_card.delay(approval.id)  # a duplicate delivery, through the real worker
    post_approval_card.apply(args=[approval.id])  # and once more here
    approval_card_post(approval_id=approval.id)
    assert Message.objects.filter(thread_id=agent.session.thread_id, kind=Message.Kind.CARD).count() == 1
    assert PendingApproval.objects.get(id=approval.id).card_platform_ids == {"message_id": first.id}
    assert first.author == Message.Author.SYSTEM  # Calvin asks, not the agent


def test_a_lost_card_post_is_posted_by_the_sweep(agent, settings):
    settings.CALVIN_LOST_PENDING_SECONDS = 0
    approval = requested(agent, "install_packages", PACKAGES)
    card = card_of(approval)
    card.delete()  # as if its publish had been lost
    PendingApproval.objects.filter(id=approval.id).update(card_platform_ids={})
    sweep_approvals.delay()
    assert card_of(approval).id != card.id


def test_a_session_has_at_most_ten_requests_waiting(agent):
    for i in range(MAX_PENDING_PER_SESSION):
        requested(agent, "install_packages", {"apt": [f"p{i}"]})
    result = agent.nanoclaw.call("install_packages", {"apt": ["one-more"]})
    assert result.is_error and "already wait for a decision" in result.content[0].text
    assert PendingApproval.objects.filter(session=agent.session).count() == MAX_PENDING_PER_SESSION


def test_a_refused_request_leaves_nothing(agent):
    refused(agent, "install_packages", {"apt": ["--global"]}, "invalid package names")
    assert not ToolCall.objects.filter(session=agent.session).exists()
    assert not Message.objects.filter(thread_id=agent.session.thread_id, kind=Message.Kind.CARD).exists()


# Expiry


def past_due(approval: PendingApproval) -> None:
    PendingApproval.objects.filter(id=approval.id).update(
        requested_at=timezone.now() - timedelta(hours=24, seconds=1), expires_at=timezone.now() - timedelta(seconds=1)
    )


def test_expiry_is_reported_as_expiry_never_as_a_denial(agent, gateway):
    approval = requested(agent, "install_packages", PACKAGES)
    card = card_of(approval)
    past_due(approval)
    sweep_approvals.delay()  # what beat runs, through the real worker
    wait_for(lambda: PendingApproval.objects.get(id=approval.id).status == S.EXPIRED, timeout=20)
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.EXPIRED
    text = told(agent, "expired")
    assert "nobody decided within 24 h" in text and "install_packages" in text
    assert "denied" not in text.lower()
    assert card_note(approval, "Expired: nobody decided within 24 h")
    assert not has_buttons(card)
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as owner:
        late = owner.press(approval.id)
    assert late.status_code == 409 and late.json()["text"].startswith("expired: nobody decided within 24 h")
    assert PendingApproval.objects.get(id=approval.id).status == S.EXPIRED


def test_a_click_after_expiry_but_before_the_sweep_expires_it(agent, gateway):
    version = environment_version(agent)
    approval = requested(agent, "install_packages", PACKAGES)
    card_of(approval)
    past_due(approval)
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as owner:
        late = owner.press(approval.id)
    assert late.status_code == 409 and late.json()["text"].startswith("expired")
    approval.refresh_from_db()
    assert approval.status == S.EXPIRED and approval.decided_by is None
    assert environment_version(agent) == version
    assert "denied" not in told(agent, "expired").lower()


def test_the_workspaces_timeout_sets_the_expiry(agent):
    agent.session.workspace.__class__.objects.filter(id=agent.session.workspace_id).update(
        approval_timeout=timedelta(minutes=5)
    )
    approval = requested(agent, "install_packages", PACKAGES)
    assert timedelta(minutes=4) < approval.expires_at - timezone.now() <= timedelta(minutes=5)
    sweep_approvals.apply()
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING  # not due yet


def test_nothing_expires_before_its_time(agent):
    approval = requested(agent, "install_packages", PACKAGES)
    assert not approval_expire(approval_id=approval.id)  # the model's guard, not only the sweep's query
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING
    assert not [t for t in system_messages(agent) if "expired" in t]


def test_eight_threads_deciding_at_once_decide_once(agent, plain_member):
    """The same race below the web view (which may serialise requests): eight database
    connections deciding one approval at the same moment, approvals and denials mixed."""
    from django.db import connection

    Member.objects.filter(id=plain_member.id).update(role=Member.Role.ADMIN)
    plain_member.refresh_from_db()
    owner = Member.objects.get(workspace=agent.session.workspace, user__username="owner")
    version = environment_version(agent)
    approval = requested(agent, "install_packages", PACKAGES)
    barrier = Barrier(8)

    def decide(i):
        barrier.wait()
        try:
            approval_decide(approval_id=approval.id, member=owner if i % 2 else plain_member, approve=i < 6, via="web")
            return True
        except ApprovalRefused:
            return False
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        wins = list(pool.map(decide, range(8)))
    assert wins.count(True) == 1
    decided = wait_for(lambda: PendingApproval.objects.exclude(status=S.APPROVED).filter(id=approval.id).first())
    if decided.status == S.APPLIED:
        assert environment_version(agent) == version + 1
        assert ToolCall.objects.get(id=approval.tool_call_id).attempts == 1
    else:
        assert decided.status == S.DENIED and environment_version(agent) == version
