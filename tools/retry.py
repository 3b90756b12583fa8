"""An operator retries a failed tool call: its effect applied once, never twice.

The retry is one conditional UPDATE failed -> pending that must change one row, then the
usual enqueue on commit; the worker's claim (pending -> applying, ToolCall.claim) lets one
worker in, as for any call. Two retries at once: one UPDATE changes the row, the other none.

Which failures are retried: a call no approval gates (a gated call's approval recorded what
a person approved and how it ended; the agent asks again for a new decision), whose tool
still has an effect. Denied and expired calls are not failures and never become pending.
"""

from django.db import transaction

from approvals.models import PendingApproval
from calvin.audit.services import audit_record
from calvin.operators import OperatorRefused, operator_check
from tools.changes import tool_call_changed
from tools.effects import EFFECTS
from tools.models import ToolCall
from tools.services.common import effect_announce

S = ToolCall.Status


def tool_call_retry_problem(call: ToolCall) -> str | None:
    """Why this call is not retried (None: it is), as the confirmation page and the refusal say."""
    if call.status != S.FAILED:
        return f"it is {call.status}, not failed"
    if PendingApproval.objects.filter(tool_call_id=call.id).exists():
        return "an approval gated it: the agent asks again for a new decision"
    if (call.server, call.tool) not in EFFECTS:
        return f"{call.server}.{call.tool} has no effect to apply"
    return None


@transaction.atomic
def tool_call_retry(*, tool_call_id: int, actor) -> str:
    """failed -> pending, queued for the worker once this commits. Raises OperatorRefused when
    nothing changed (not retryable, not theirs, or another retry was first)."""
    call = ToolCall.objects.select_related("session").filter(id=tool_call_id).first()
    if call is None:
        raise OperatorRefused(f"there is no tool call {tool_call_id}")
    operator_check(actor, call.session.workspace_id)
    problem = tool_call_retry_problem(call)
    if problem:
        raise OperatorRefused(problem)
    # attempts=1: the worker's claim makes it 2, so a chat effect first asks the platform
    # whether an earlier attempt landed (effects.already_delivered) instead of posting twice,
    # and the retry gets a fresh budget of attempts.
    # One table only: a join would make Django's UPDATE a subquery, which a second retry
    # waiting on the row lock would not evaluate again (both would "change one row"). An
    # approval is made with its call, never later, so the check above holds.
    retried = ToolCall.objects.filter(id=call.id, status=S.FAILED).update(
        status=S.PENDING, error="", finished_at=None, claimed_at=None, attempts=1
    )
    if retried != 1:
        raise OperatorRefused("it is no longer failed (retried already?)")
    tool_call_changed(call, S.PENDING)
    audit_record(
        verb="tool_call.retry",
        workspace=call.session.workspace_id,
        actor=actor,
        target=call,
        changes={"status": (S.FAILED, S.PENDING), "error": (call.error, "")},
    )
    transaction.on_commit(lambda: effect_announce(call.id))
    return "queued again; its effect is applied once"
