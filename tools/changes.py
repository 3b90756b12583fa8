"""The announcement of a tool call's state change (calvin/events.py), made inside its transaction."""

from calvin import events
from calvin.events import ToolCallChanged, announce
from tools.models import ToolCall


def _changed(call: ToolCall, status: str, workspace_id: int, thread_id: int) -> ToolCallChanged:
    return ToolCallChanged(
        workspace_id=workspace_id,
        thread_id=thread_id,
        session_id=call.session_id,
        tool_call_id=call.id,
        tool=call.tool,
        status=status,
    )


def tool_call_changed(call: ToolCall, status: str, *, workspace_id: int | None = None, thread_id: int | None = None):
    """`call` needs its session (loaded, or read here when the ids are not given)."""
    if workspace_id is None or thread_id is None:
        session = call.session
        workspace_id, thread_id = session.workspace_id, session.thread_id
    announce(_changed(call, status, workspace_id, thread_id))


def tool_call_recorded_live_rows(
    call: ToolCall, status: str, *, workspace_id: int, thread_id: int
) -> tuple[str, list] | None:
    """What announcing a new call would log on the console, for the statement that inserts the
    call to write itself (tools/limits.py gives each row the call's id), and their table; None
    when the console is not loaded. Only the live log records this event (tests/tools/test_effects.py holds
    that), so nothing else is skipped."""
    if events.LIVE_ROWS is None:
        return None
    return events.LIVE_ROWS.table, events.LIVE_ROWS.rows(_changed(call, status, workspace_id, thread_id))


def tool_call_recorded_live_written(live: tuple[str, list]) -> None:
    events.LIVE_ROWS.written(live[1])
