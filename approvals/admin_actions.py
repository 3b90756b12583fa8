"""The approvals' operator actions: approve, deny, expire now; each through approvals.services
(its compare-and-swap and its owner-or-admin rule), after a confirmation page. And the allow
rules' revoke, through approvals.rule_services."""

from django.utils import timezone

from approvals.cards import when
from approvals.models import ApprovalRule, PendingApproval
from approvals.rule_services import approval_rule_revoke
from approvals.services import ApprovalRefused, approval_decide, approval_expire_now
from calvin.admin_actions import operator_action
from calvin.operators import operator_for
from calvin.workspaces.models import Member

S = PendingApproval.Status


def _open(approval: PendingApproval) -> bool:
    return approval.status == S.PENDING and approval.expires_at > timezone.now()


def _nothing(approval: PendingApproval) -> str:
    if approval.status == S.PENDING:
        return "nothing: its time is up (it expires)"
    return f"nothing: it is {approval.status} already"


def _decision_plan(verb: str, outcome: str):
    def plan(approval: PendingApproval) -> str:
        if not _open(approval):
            return _nothing(approval)
        return f"{verb} {approval.kind}: {approval.summary} — {outcome}"

    return plan


def _decide(approve: bool):
    def perform(request, approval: PendingApproval) -> str:
        """As the person's Member in the approval's workspace: the rule every channel follows."""
        workspace = approval.session.workspace
        member = Member.objects.filter(workspace=workspace, user=request.user).first()
        if member is None:
            raise ApprovalRefused(f"you are not a member of {workspace}")
        return approval_decide(approval_id=approval.id, member=member, approve=approve, via="admin")

    return perform


approve_selected = operator_action(
    name="approve_selected",
    description="Approve selected",
    verb="Approve",
    plan=_decision_plan("approve", "it is applied, the agent is told"),
    perform=_decide(True),
    refusals=(ApprovalRefused,),
    noun="Approval",
)

deny_selected = operator_action(
    name="deny_selected",
    description="Deny selected",
    verb="Deny",
    plan=_decision_plan("deny", "nothing is applied, the agent is told"),
    perform=_decide(False),
    refusals=(ApprovalRefused,),
    noun="Approval",
)


def _expire_plan(approval: PendingApproval) -> str:
    if approval.status != S.PENDING:
        return _nothing(approval)
    return f"expire {approval.kind}: {approval.summary} now — nothing is applied, the agent is told it expired"


def _expire(request, approval: PendingApproval) -> str:
    return approval_expire_now(approval_id=approval.id, actor=operator_for(request.user, approval.session.workspace_id))


expire_selected = operator_action(
    name="expire_selected",
    description="Expire selected now",
    verb="Expire",
    plan=_expire_plan,
    perform=_expire,
    refusals=(ApprovalRefused,),
    noun="Approval",
)


def _revoke_plan(rule: ApprovalRule) -> str:
    if rule.revoked_at is not None:
        return f"nothing: it was revoked {when(rule.revoked_at)}"
    where = f"session {rule.session_id}" if rule.scope == ApprovalRule.Scope.SESSION else f"agent {rule.agent}"
    return f"revoke {rule.label} ({where}) — what it allowed is asked again"


def _revoke(request, rule: ApprovalRule) -> str:
    return approval_rule_revoke(rule_id=rule.id, actor=operator_for(request.user, rule.workspace_id))


revoke_rules = operator_action(
    name="revoke_rules",
    description="Revoke selected",
    verb="Revoke",
    plan=_revoke_plan,
    perform=_revoke,
    refusals=(ApprovalRefused,),
    noun="Rule",
)
