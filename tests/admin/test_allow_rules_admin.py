"""Allow rules in the admin: listed per workspace, revoked with "Revoke selected" or from the
agent's page (its inline's "revoke" box), each revocation through approval_rule_revoke, audited."""

import re

import pytest

from approvals.models import ApprovalRule
from calvin.audit.models import AuditEvent
from calvin.workspaces.services import agent_create
from tests.admin.conftest import flat, session_in
from tests.admin.test_agent_form import change_url, posted

pytestmark = pytest.mark.django_db

RULES = "/admin/approvals/approvalrule/"


def agent_rule(agent, prefix: str, member=None) -> ApprovalRule:
    return ApprovalRule.objects.create(
        workspace_id=agent.workspace_id,
        scope="agent",
        agent=agent,
        tool_name="Bash",
        command_prefix=prefix,
        created_by=member,
    )


def session_rule(session, tool_name: str, member=None) -> ApprovalRule:
    return ApprovalRule.objects.create(
        workspace_id=session.workspace_id,
        scope="session",
        session=session,
        agent_id=session.agent_id,
        tool_name=tool_name,
        created_by=member,
    )


def test_the_list_shows_only_its_workspaces_rules_and_revokes_them(owner_client, owner, workspace, other_workspace):
    ours = agent_rule(agent_create(workspace=workspace, name="builder"), "npm test", owner)
    theirs = agent_rule(agent_create(workspace=other_workspace, name="globex-bot"), "make globex")
    page = flat(owner_client.get(RULES))
    assert "Bash: npm test" in page and "builder" in page
    assert "make globex" not in page and "globex-bot" not in page
    assert 'value="revoke_rules"' in page and 'value="delete_selected"' not in page  # revoked, never deleted
    assert "Add approval rule" not in page  # made on cards only

    selected = {"action": "revoke_rules", "_selected_action": [str(ours.id), str(theirs.id)]}
    confirmation = flat(owner_client.post(RULES, selected))
    assert "revoke Bash: npm test (agent builder) — what it allowed is asked again" in confirmation
    assert "make globex" not in confirmation
    done = flat(owner_client.post(RULES, {**selected, "confirmed": "yes"}, follow=True))
    assert f"Rule {ours.id}: revoked Bash: npm test (this agent): prompts it allowed are asked again." in done
    assert "1 selected row(s) no longer exist or are not yours to change" in done
    ours.refresh_from_db()
    theirs.refresh_from_db()
    assert ours.revoked_at is not None and ours.revoked_by == owner.user
    assert theirs.revoked_at is None
    [event] = AuditEvent.objects.filter(verb="approval_rule.revoke")
    assert (event.target_id, event.actor_label, event.workspace_id) == (str(ours.id), "owner", workspace.id)

    again = flat(owner_client.post(RULES, {**selected, "confirmed": "yes"}, follow=True))
    assert f"Rule {ours.id}: it was revoked already" in again
    assert AuditEvent.objects.filter(verb="approval_rule.revoke").count() == 1
    assert "revoked" in flat(owner_client.get(RULES, {"state": "revoked"}))
    assert "Bash: npm test" not in flat(owner_client.get(RULES, {"state": "live"}))


def test_the_agents_page_lists_its_rules_and_revokes_one(owner_client, owner, workspace):
    builder = agent_create(workspace=workspace, name="builder")
    other = agent_create(workspace=workspace, name="reviewer")
    session = session_in(workspace)
    session.agent = builder
    session.save(update_fields=["agent"])
    always = agent_rule(builder, "npm test", owner)
    here = session_rule(session, "WebFetch", owner)
    elsewhere = agent_rule(other, "make reviewer")

    page = flat(owner_client.get(change_url(builder)))
    assert "allow rules (made on permission prompts" in page.lower()
    assert "Bash: npm test" in page and "every session" in page
    assert "WebFetch: every use" in page and f"/admin/agent_sessions/session/{session.id}/change/" in page
    assert "make reviewer" not in page
    names = re.findall(r'name="(approval_rules-[^"]+)"', page)
    assert "approval_rules-0-revoke" in names and "approval_rules-1-revoke" in names
    assert not [n for n in names if n.endswith(("-tool_name", "-command_prefix", "-scope", "-DELETE"))]

    rows = {int(v) for v in re.findall(r'name="approval_rules-\d-id" value="(\d+)"', page)}
    assert rows == {always.id, here.id}
    order = [int(v) for v in re.findall(r'name="approval_rules-\d-id" value="(\d+)"', page)]
    data = posted(builder) | {
        "approval_rules-TOTAL_FORMS": "2",
        "approval_rules-INITIAL_FORMS": "2",
        "approval_rules-MIN_NUM_FORMS": "0",
        "approval_rules-MAX_NUM_FORMS": "1000",
        "approval_rules-0-id": str(order[0]),
        "approval_rules-0-agent": str(builder.id),
        "approval_rules-1-id": str(order[1]),
        "approval_rules-1-agent": str(builder.id),
        f"approval_rules-{order.index(always.id)}-revoke": "on",
    }
    response = owner_client.post(change_url(builder), data, follow=True)
    assert response.status_code == 200
    assert f"Rule {always.id}: revoked Bash: npm test (this agent)" in flat(response)
    always.refresh_from_db()
    here.refresh_from_db()
    elsewhere.refresh_from_db()
    assert always.revoked_at is not None and here.revoked_at is None and elsewhere.revoked_at is None
    assert AuditEvent.objects.filter(verb="approval_rule.revoke", target_id=str(always.id)).count() == 1
    assert "revoked " in flat(owner_client.get(change_url(builder)))
