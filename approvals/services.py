"""Approval state changes: request, decide, apply's bookkeeping, expire. (Filled in by the approvals work.)"""


def approval_after_apply(*, tool_call_id: int, error: str | None) -> bool:
    """Called when a tool call's effect applied (error None) or failed. True when the call was
    an approved request: its approval then records the outcome and tells the agent."""
    return False
