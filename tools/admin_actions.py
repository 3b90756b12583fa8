"""Retry failed tool calls from the admin, after a confirmation page (tools/retry.py decides)."""

from calvin.admin_actions import operator_action
from calvin.operators import operator_for
from tools.models import ToolCall
from tools.retry import tool_call_retry, tool_call_retry_problem


def _retry_plan(call: ToolCall) -> str:
    problem = tool_call_retry_problem(call)
    if problem:
        return f"nothing: {problem}"
    return f"apply its {call.tool} effect again, once (it failed: {call.error[:200] or 'no reason recorded'})"


def _retry(request, call: ToolCall) -> str:
    return tool_call_retry(tool_call_id=call.id, actor=operator_for(request.user, call.session.workspace_id))


retry_tool_calls = operator_action(
    name="retry",
    description="Retry the selected failed tool calls",
    verb="Retry",
    plan=_retry_plan,
    perform=_retry,
)
