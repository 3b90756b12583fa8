"""An agent's write through the API (`ncl`): recorded as a tool call of the `ncl` source that
waits for a person, with the exact change on its approval card; once approved, the worker
applies exactly that change (calvin/api/effects.py), as for any gated tool."""

from approvals.models import PendingApproval
from calvin.api.principal import Principal
from calvin.api.problems import Problem
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.approval_requests import approval_request
from tools.services.common import secret_scanner_for


def agent_write_request(*, principal: Principal, action: str, arguments: dict, summary: str) -> PendingApproval:
    caller = principal.caller
    try:
        return approval_request(
            caller=caller,
            tool=action,
            arguments=arguments,
            summary=summary,
            secrets=secret_scanner_for(caller),
            server=ToolCall.Server.NCL,
        )
    except ToolRefused as exc:
        raise Problem(409, str(exc), code="refused") from None


def approval_pending(approval: PendingApproval) -> tuple[int, dict]:
    return 202, {
        "status": "approval-pending",
        "detail": f"waiting for a person to approve: {approval.summary}",
        "approval": approval.id,
    }
