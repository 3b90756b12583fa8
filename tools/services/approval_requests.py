"""A tool call that waits for a person's decision: recorded, then its approval opened."""

from django.db import transaction

from approvals.models import PendingApproval
from approvals.services import approval_open, approvals_waiting_refusal
from secrets_vault.scanner import SecretScanner
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.common import tool_call_record


@transaction.atomic
def approval_request(
    *,
    caller: Caller,
    tool: str,
    arguments: dict,
    summary: str,
    secrets: SecretScanner,
    payload: dict | None = None,
    server: str = ToolCall.Server.NANOCLAW,
) -> PendingApproval:
    """Record the call with the exact arguments that will run once approved (it waits,
    publishing nothing), open its approval, and post the card once this commits."""
    refused = approvals_waiting_refusal(session_id=caller.session_id)
    if refused:
        raise ToolRefused(refused)
    call = tool_call_record(
        caller=caller,
        tool=tool,
        arguments=arguments,
        payload=payload or {},
        secrets=secrets,
        server=server,
        status=ToolCall.Status.AWAITING_APPROVAL,
    )
    return approval_open(call=call, workspace_id=caller.workspace_id, summary=summary)
