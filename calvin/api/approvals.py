"""Approvals: list, get, and a person's decision (the same CAS decision as a card's button)."""

from ninja import Query, Router
from pydantic import Field

from approvals.models import PendingApproval
from approvals.services import ApprovalRefused, approval_decide, approval_may_decide, approval_refusal
from calvin.api import scope
from calvin.api.idempotency import idempotent
from calvin.api.pagination import PageQuery, page, page_of
from calvin.api.problems import Problem
from calvin.api.schemas import ApprovalOut, DecisionOut
from calvin.api.schemas import Problem as ProblemOut
from calvin.workspaces.models import Member

router = Router(tags=["approvals"])


class ApprovalQuery(PageQuery):
    status: PendingApproval.Status | None = Field(None, description="Only approvals in this status.")
    session: int | None = Field(None, ge=1, le=2**63 - 1, description="Only this session's approvals.")


def approval_shown(approval: PendingApproval) -> dict:
    return {
        "id": approval.id,
        "session_id": approval.session_id,
        "kind": approval.kind,
        "summary": approval.summary,
        "status": approval.status,
        "details": approval.details if isinstance(approval.details, dict) else {"value": approval.details},
        "requested_at": approval.requested_at,
        "expires_at": approval.expires_at,
        "decided_by": str(approval.decided_by) if approval.decided_by_id else None,
        "decided_via": approval.decided_via,
        "decided_at": approval.decided_at,
    }


def _visible(principal):
    return scope.approvals_visible(principal).select_related("decided_by__user", "session__workspace")


@router.get("/approvals", response=page_of(ApprovalOut), summary="List approvals")
def approvals_list(request, query: Query[ApprovalQuery]):
    approvals = _visible(request.auth)
    if query.status:
        approvals = approvals.filter(status=query.status)
    if query.session:
        approvals = approvals.filter(session_id=query.session)
    return page(approvals, query, approval_shown)


@router.get("/approvals/{approval_id}", response=ApprovalOut, summary="Get an approval")
def approvals_get(request, approval_id: int):
    return approval_shown(scope.one(_visible(request.auth), approval_id, "approval"))


def _decision(request, approval_id: int, *, approve: bool):
    principal = request.auth

    def change():
        approval = scope.one(_visible(principal), approval_id, "approval")
        if principal.is_agent:
            raise Problem(403, "an agent never decides approvals: a person does", code="people_only")
        member = Member.objects.select_related("user").get(id=principal.member_id)
        if not approval_may_decide(member=member, approval=approval):
            raise Problem(403, approval_refusal(approval))
        try:
            text = approval_decide(approval_id=approval.id, member=member, approve=approve, via="api")
        except ApprovalRefused as exc:
            raise Problem(409, str(exc), code="not_decided") from None
        return 200, {"status": "done", "detail": text}

    return idempotent(request, principal, change)


DECISION_RESPONSES = {200: DecisionOut, 403: ProblemOut, 404: ProblemOut, 409: ProblemOut, 422: ProblemOut}


@router.post("/approvals/{approval_id}/approve", response=DECISION_RESPONSES, summary="Approve")
def approvals_approve(request, approval_id: int):
    return _decision(request, approval_id, approve=True)


@router.post("/approvals/{approval_id}/deny", response=DECISION_RESPONSES, summary="Deny")
def approvals_deny(request, approval_id: int):
    return _decision(request, approval_id, approve=False)
