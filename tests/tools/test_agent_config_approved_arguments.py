"""What is approved is what runs: the card shows the approval's recorded arguments, and a
gated call whose own arguments were changed after the request applies nothing of the change,
whether they changed before the decision or between the decision and the worker."""

import pytest

from approvals.models import PendingApproval
from approvals.services import CHANGED, approval_decide
from calvin.workspaces.models import Agent
from tests.approvals.support import _worker_idle_afterwards, requested, told  # noqa: F401 (an autouse fixture)
from tools.effects import tool_call_apply
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
SERVER = {"name": "docs", "command": "docs-server", "args": ["--read-only"], "env": {}}


def test_arguments_changed_while_waiting_are_not_applied(agent):
    approval = requested(agent, "add_mcp_server", SERVER)
    ToolCall.objects.filter(id=approval.tool_call_id).update(arguments={**SERVER, "command": "sh", "args": ["-c", "x"]})
    said = approval_decide(approval_id=approval.id, member=agent.session.owner, approve=True, via="web")
    assert CHANGED in said
    told(agent, CHANGED)
    approval.refresh_from_db()
    call = ToolCall.objects.get(id=approval.tool_call_id)
    assert approval.status == S.FAILED and call.status == ToolCall.Status.FAILED and call.error == CHANGED
    assert Agent.objects.get(id=agent.session.agent_id).mcp_servers == {}


def test_arguments_changed_after_the_decision_are_not_applied(agent):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    version = Agent.objects.get(id=agent.session.agent_id).environment_version
    # Decided, and claimed by the worker, with the row changed in between.
    assert PendingApproval.transition(approval.id, source=S.PENDING, target=S.APPROVED, decided_via="web")
    changed = {"apt": ["netcat-openbsd"], "npm": [], "reason": ""}
    ToolCall.objects.filter(id=approval.tool_call_id).update(status=ToolCall.Status.APPLYING, arguments=changed)
    tool_call_apply(tool_call_id=approval.tool_call_id)
    call = ToolCall.objects.get(id=approval.tool_call_id)
    assert call.status == ToolCall.Status.FAILED and call.error == CHANGED
    assert PendingApproval.objects.get(id=approval.id).status == S.FAILED
    agent_row = Agent.objects.get(id=agent.session.agent_id)
    assert agent_row.apt_packages == [] and agent_row.environment_version == version
    told(agent, CHANGED)


def test_unchanged_arguments_apply_as_approved(agent):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    assert PendingApproval.transition(approval.id, source=S.PENDING, target=S.APPROVED, decided_via="web")
    ToolCall.objects.filter(id=approval.tool_call_id).update(status=ToolCall.Status.APPLYING)
    tool_call_apply(tool_call_id=approval.tool_call_id)
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.APPLIED
    assert Agent.objects.get(id=agent.session.agent_id).apt_packages == ["jq"]


def test_names_are_checked_again_when_the_recorded_arguments_themselves_changed(agent):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    bad = {"apt": ["jq; reboot"], "npm": [], "reason": ""}
    ToolCall.objects.filter(id=approval.tool_call_id).update(arguments=bad)
    PendingApproval.objects.filter(id=approval.id).update(details=bad)  # the card re-renders from these
    approval_decide(approval_id=approval.id, member=agent.session.owner, approve=True, via="web")
    assert "invalid package names" in told(agent, "failed")
    assert Agent.objects.get(id=agent.session.agent_id).apt_packages == []
