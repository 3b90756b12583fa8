"""What a host is sent for a turn: everything its runner needs, and nothing it must not hold.

The host holds no database credentials, so the turn carries the session's configuration:
the prompt, the runner's token (only when a new generation starts), the provider, the
instructions file, the workspace's AGENTS.md, the secrets in the session's scope, the
agent's environment and its own MCP servers, and in a code channel the repository's checkout.
"""

import time

from django.conf import settings

from calvin.previews.models import Preview
from calvin.workspaces.definitions import agents_md_text
from sessions.code_channel_checkouts import code_channel_checkout_for_turn
from sessions.instructions import session_instructions_text
from sessions.models import Runner, Session, Turn
from sessions.secrets_port import turn_secrets


def _provider(session: Session) -> dict:
    agent = session.agent
    return {
        "kind": agent.provider if agent else "claude-code",
        "command": list(agent.provider_command or []) if agent else [],
        "script": agent.provider_script if agent else "",
        "model": session.model if session.model != "default" else (agent.model if agent else "default"),
        "permission_mode": session.permission_mode,
        "resume": session.agent_session_id,
        # How long a tool call may take: approval_prompt waits for a person up to its bound.
        "tool_timeout_seconds": settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS + 60,
    }


def _secrets(session: Session) -> list[dict]:
    return turn_secrets(session)


def _environment(session: Session) -> dict | None:
    agent = session.agent
    if agent is None or not (agent.apt_packages or agent.npm_packages):
        return None
    return {
        "agent": agent.id,
        "version": agent.environment_version,
        "apt": list(agent.apt_packages),
        "npm": list(agent.npm_packages),
    }


# A turn lists at most this many inbox files; the rest follow with the next turns (a turn message stays small).
INBOX_PER_TURN = 50


def inbox_files_for_turn(*, agent_id: int, workspace_id: int, host_id: int) -> list[dict]:
    """The agent's inbox files (tools/services/inbox_files.py) this host has not written yet, oldest
    first: what its runner fetches and writes into the agent's directory before the agent runs."""
    from tools.models import InboxFile

    rows = (
        InboxFile.objects.filter(agent_id=agent_id, workspace_id=workspace_id)
        .exclude(deliveries__host_id=host_id)
        .order_by("id")
        .values("id", "sender", "name", "size")[:INBOX_PER_TURN]
    )
    return [{"id": r["id"], "from": r["sender"], "name": r["name"], "size": r["size"]} for r in rows]


def _inbox(session: Session, runner: Runner) -> list[dict]:
    """Files sent to the agent that this host has not written into its directory yet."""
    if session.agent_id is None or runner.host_id is None:
        return []
    return inbox_files_for_turn(agent_id=session.agent_id, workspace_id=session.workspace_id, host_id=runner.host_id)


def turn_message(*, session: Session, turns: list[Turn], runner: Runner, token: str | None) -> dict:
    from sessions.scheduling import turn_prompt

    agents_md_at = time.time()  # before the read: the host keeps the newer of this and a push
    runner_part = {"generation": runner.generation}
    if token:
        runner_part["token"] = token
    return {
        "type": "turn",
        "turn": turns[0].id,
        "turns": [t.id for t in turns],
        "session": session.id,
        # Its checkouts borrow objects from the host's cache for this workspace (shown read-only).
        "workspace": session.workspace_id,
        "prompt": turn_prompt(turns),
        # A scheduled task's guard: run first, in the sandbox (sessions/host/runner.py `_gate`).
        "gate": next((t.gate_script for t in turns if t.gate_script), ""),
        "runner": runner_part,
        "tool_sets": list(session.agent.tool_sets) if session.agent else ["calvin", "nanoclaw"],
        # Its persistent directory on the host is keyed by it.
        "agent": session.agent_id,
        # What add_mcp_server approved: `vault:NAME` values stay references; the host resolves them.
        "agent_mcp_servers": dict(session.agent.mcp_servers or {}) if session.agent else {},
        "provider": _provider(session),
        "instructions": session_instructions_text(session),
        "agents_md": agents_md_text(session.workspace_id),
        "agents_md_at": agents_md_at,
        "secrets": _secrets(session),
        "environment": _environment(session),
        # Enforced by the host's egress proxy; the host parses the entries again.
        "egress": {
            "policy": session.workspace.egress_policy,
            "allowlist": session.workspace.egress_entries(),
            "workspace": session.workspace.slug,
        },
        "timeout": settings.CALVIN_TURN_TIMEOUT_SECONDS,
        # The ports its live previews publish: the host keeps the sandbox serving them after the turn.
        "previews": Preview.objects.live().filter(session_id=session.id).ports(),
        # [{id, from, name, size}]: fetched and written as inbox/<from>/<name> before the agent runs.
        "inbox": _inbox(session, runner),
        # A code channel's repository, checked out before the agent runs (sessions/code_channel_checkouts.py).
        "checkout": code_channel_checkout_for_turn(session=session, turns=turns),
    }
