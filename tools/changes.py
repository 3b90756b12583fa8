"""The announcement of a tool call's state change (calvin/events.py), made inside its transaction."""

from calvin.events import ToolCallChanged, announce
from tools.models import ToolCall


def tool_call_changed(call: ToolCall, status: str, *, workspace_id: int | None = None, thread_id: int | None = None):
    """`call` needs its session (loaded, or read here when the ids are not given)."""
    if workspace_id is None or thread_id is None:
        session = call.session
        workspace_id, thread_id = session.workspace_id, session.thread_id
    announce(
        ToolCallChanged(
            workspace_id=workspace_id,
            thread_id=thread_id,
            session_id=call.session_id,
            tool_call_id=call.id,
            tool=call.tool,
            status=status,
        )
    )


def tool_call_changed_by_id(tool_call_id: int, status: str) -> None:
    call = ToolCall.objects.select_related("session").only(
        "id", "tool", "session_id", "session__workspace_id", "session__thread_id"
    )
    found = call.filter(id=tool_call_id).first()
    if found is not None:
        tool_call_changed(found, status)
