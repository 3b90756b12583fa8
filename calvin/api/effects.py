"""What an approved agent write applies (run by the worker, as every tool's effect)."""

from approvals.services import approved_arguments
from sessions.turns import session_stop
from tools.models import ToolCall


def session_stop_effect(call: ToolCall) -> dict:
    arguments = approved_arguments(call)
    outcome = session_stop(session_id=arguments["session"], member=call.approval.decided_by, via="api")
    return {"outcome": outcome}
