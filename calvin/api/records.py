"""What happened: tool calls, and the audit log (read only)."""

from ninja import Query, Router
from pydantic import Field

from calvin.api import scope
from calvin.api.pagination import PageQuery, page, page_of
from calvin.api.schemas import AuditEventOut, ToolCallOut
from tools.models import ToolCall

router = Router()
NAME = r"^[a-z][a-z0-9_.]*$"  # tool names and audit verbs (never NUL, which PostgreSQL refuses)


class ToolCallQuery(PageQuery):
    session: int | None = Field(None, ge=1, le=2**63 - 1, description="Only this session's calls.")
    status: ToolCall.Status | None = Field(None, description="Only calls in this status.")
    tool: str | None = Field(None, max_length=40, pattern=NAME, description="Only calls of this tool.")


class AuditQuery(PageQuery):
    verb: str | None = Field(
        None, max_length=64, pattern=NAME, description="Only events of this verb (e.g. approval.approve)."
    )


def tool_call_shown(call: ToolCall) -> dict:
    return {
        "id": call.id,
        "session_id": call.session_id,
        "server": call.server,
        "tool": call.tool,
        "status": call.status,
        "arguments": call.arguments if isinstance(call.arguments, dict) else {"value": call.arguments},
        "error": call.error,
        "created_at": call.created_at,
        "finished_at": call.finished_at,
    }


def audit_shown(event) -> dict:
    return {
        "id": event.id,
        "at": event.at,
        "verb": event.verb,
        "actor_kind": event.actor_kind,
        "actor_label": event.actor_label,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "target_label": event.target_label,
        "via": event.via,
        "changes": event.changes if isinstance(event.changes, dict) else {},
    }


@router.get("/tool-calls", response=page_of(ToolCallOut), summary="List tool calls", tags=["tool calls"])
def tool_calls_list(request, query: Query[ToolCallQuery]):
    calls = scope.tool_calls_visible(request.auth)
    if query.session:
        calls = calls.filter(session_id=query.session)
    if query.status:
        calls = calls.filter(status=query.status)
    if query.tool:
        calls = calls.filter(tool=query.tool)
    return page(calls, query, tool_call_shown)


@router.get("/tool-calls/{call_id}", response=ToolCallOut, summary="Get a tool call", tags=["tool calls"])
def tool_calls_get(request, call_id: int):
    return tool_call_shown(scope.one(scope.tool_calls_visible(request.auth), call_id, "tool call"))


@router.get("/audit-events", response=page_of(AuditEventOut), summary="List audit events", tags=["audit"])
def audit_events_list(request, query: Query[AuditQuery]):
    events = scope.audit_events_visible(request.auth)
    if query.verb:
        events = events.filter(verb=query.verb)
    return page(events, query, audit_shown)
