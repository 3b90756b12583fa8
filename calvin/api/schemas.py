"""What the API answers with: one schema per resource (its OpenAPI components)."""

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field


class WorkspaceOut(BaseModel):
    id: int
    slug: str
    name: str


class MeOut(BaseModel):
    kind: str = Field(description="agent or person")
    scope: str = Field(description="An agent's cli_scope (group, global), or workspace for a person.")
    workspace: WorkspaceOut
    agent_id: int | None = None
    session_id: int | None = None
    member_id: int | None = None
    role: str = Field("", description="A person's role in the workspace: owner, admin or member.")


class AgentOut(BaseModel):
    id: int
    name: str
    cli_scope: str
    model: str
    provider: str
    tool_sets: list[str]
    apt_packages: list[str]
    npm_packages: list[str]
    mcp_servers: list[str] = Field(description="The names of its extra MCP servers.")
    paused: bool
    created_at: datetime


class DestinationOut(BaseModel):
    id: int
    agent_id: int
    name: str
    kind: str = Field(description="thread (a chat) or agent")
    thread_id: int | None
    target_agent_id: int | None


class MemberOut(BaseModel):
    id: int
    name: str
    role: str
    created_at: datetime


class SessionOut(BaseModel):
    id: int
    title: str
    status: str
    channel: str = Field(description="slack or web")
    agent_id: int | None
    owner_id: int | None
    parent_id: int | None
    host: str | None
    thread_id: int
    url: str = Field(description="The thread's page on the dashboard.")
    created_at: datetime
    updated_at: datetime


class MessageOut(BaseModel):
    id: int
    author: str
    kind: str
    text: str
    member_id: int | None
    created_at: datetime


class ApprovalOut(BaseModel):
    id: int
    session_id: int
    kind: str
    summary: str
    status: str
    details: dict[str, Any] = Field(description="Everything being approved: what runs once it is.")
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_via: str
    decided_at: datetime | None


class ToolCallOut(BaseModel):
    id: int
    session_id: int
    server: str
    tool: str
    status: str
    arguments: dict[str, Any] = Field(description="As stored: secret values are redacted.")
    error: str
    created_at: datetime
    finished_at: datetime | None


class AuditEventOut(BaseModel):
    id: int
    at: datetime
    verb: str
    actor_kind: str
    actor_label: str
    target_type: str
    target_id: str
    target_label: str
    via: str
    changes: dict[str, Any]


class DecisionOut(BaseModel):
    status: str = Field(description="done, or approval-pending (an agent's write, waiting for a person)")
    detail: str
    approval: int | None = Field(None, description="The approval that now waits (approval-pending only).")


class Problem(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    code: str


class TaskOut(BaseModel):
    id: int
    agent_id: int
    name: str
    prompt: str
    process_after: datetime | None
    recurrence: str
    timezone: str
    recurrence_policy: str
    grace_window_seconds: int
    script: str
    status: str = Field(description="active, paused, cancelled, or done (a one-off task that ran)")
    next_run_at: datetime | None
    consecutive_failures: int
    paused_reason: str
    session_id: int | None = Field(description="The session its runs' turns go to (made at its first run).")
    created_at: datetime
    updated_at: datetime


class TaskRunOut(BaseModel):
    id: int
    task_id: int
    scheduled_for: datetime
    trigger: str = Field(description="schedule, catch-up (after downtime) or manual (ncl tasks run)")
    status: str = Field(description="running, done, failed, or skipped (missed beyond the grace window)")
    turn_id: int | None
    error: str
    created_at: datetime
    finished_at: datetime | None


class TaskWriteOut(BaseModel):
    status: str = Field(description="done, or approval-pending (an agent's write, waiting for a person)")
    detail: str
    approval: int | None = Field(None, description="The approval that now waits (approval-pending only).")
    task: TaskOut | None = Field(None, description="The task as it is now (done only; none once deleted).")


class MeterOut(BaseModel):
    key: str = Field(
        description="tool_calls_today, turns_today, agent_minutes_month, sessions_running, storage_mib "
        "or spend_month_usd"
    )
    label: str
    used: int | float
    limit: int | float | None = Field(description="The quota; null where none is set (no spend cap).")
    unit: str
    percent: int | None
    resets: str = Field(description='When a daily count starts again ("00:00 UTC"); empty for the others.')


class UsageDayOut(BaseModel):
    day: date
    tool_calls: int
    turns: int
    agent_seconds: int
    cost_usd: float


class UsageOut(BaseModel):
    meters: list[MeterOut]
    days: list[UsageDayOut] = Field(description="The UTC days with any use, newest first.")
