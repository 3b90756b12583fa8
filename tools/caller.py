"""Who is calling: the runner a bearer token belongs to, its session and its agent."""

import json
from dataclasses import dataclass

from django.db import connection

from calvin.workspaces.models import Agent
from secrets_vault.models import Secret
from sessions.models import Runner, Session
from sessions.tokens import token_digest


@dataclass(frozen=True)
class Caller:
    runner_id: int
    session_id: int
    thread_id: int
    workspace_id: int
    session_directory: str
    # The session's own temp directory: "the system temp directory" of seed 000's send_file.
    session_temp_directory: str
    permission_mode: str
    # The secrets in the session's scope as "<how many>/<last set at>": "0/" means no check
    # at all, and any change means a cached check is stale.
    secrets_version: str
    agent_id: int | None
    # The session's host (None: its directory is on the gateway, e.g. an issue_token runner).
    host_id: int | None
    # What the session's runner runs (Agent.provider); "" without an agent.
    provider: str
    # The MCP servers this session's agent is given ("calvin", "nanoclaw").
    tool_sets: tuple[str, ...]
    # When the runner's refusal pause ends (tools/refusals.py), read from its row with the
    # caller, so every web process sees a pause made through any of them.
    refusals_paused_until: float | None = None


_IN_SCOPE = """x.workspace_id = s.workspace_id
    AND (x.session_id = s.id OR x.agent_id = s.agent_id OR (x.session_id IS NULL AND x.agent_id IS NULL))"""

# Every tool call starts here, so this is one hand-written, indexed query: the ORM's
# query building cost more than the database's work (bench/profile_post_card.py).
_CALLER_SQL = f"""
SELECT r.id, r.session_id, s.thread_id, s.workspace_id, s.directory, s.temp_directory, s.permission_mode,
       (SELECT count(*) || '/' || coalesce(CAST(max(x.set_at) AS TEXT), '')
        FROM {Secret._meta.db_table} x WHERE {_IN_SCOPE}),
       s.agent_id, s.host_id, coalesce(a.provider, ''), a.tool_sets, r.refusals_paused_until
FROM {Runner._meta.db_table} r JOIN {Session._meta.db_table} s ON s.id = r.session_id
     LEFT JOIN {Agent._meta.db_table} a ON a.id = s.agent_id
WHERE r.token_digest = %s AND r.revoked_at IS NULL
"""

ALL_TOOL_SETS = ("calvin", "nanoclaw")


def _tool_sets(raw) -> tuple[str, ...]:
    if raw is None:  # a session without an agent gets both
        return ALL_TOOL_SETS
    value = json.loads(raw) if isinstance(raw, str) else raw
    return tuple(s for s in value if s in ALL_TOOL_SETS) if isinstance(value, list) else ()


def caller_for_token(token: str) -> Caller | None:
    """None for an unknown or revoked token."""
    with connection.cursor() as cursor:
        cursor.execute(_CALLER_SQL, [token_digest(token)])
        row = cursor.fetchone()
    if not row:
        return None
    return Caller(*row[:-2], tool_sets=_tool_sets(row[-2]), refusals_paused_until=row[-1])


NO_SECRETS_VERSION = "0/"


def caller_has_secrets(caller: Caller) -> bool:
    return caller.secrets_version != NO_SECRETS_VERSION


def file_roots(caller: Caller) -> list[str]:
    """Where an agent's files may come from: its session directory and its own temp directory."""
    return [root for root in (caller.session_directory, caller.session_temp_directory) if root]
