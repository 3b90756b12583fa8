"""What a host is sent for a turn: everything its runner needs, and nothing it must not hold.

The host holds no database credentials, so the turn carries the session's configuration:
the prompt, the runner's token (only when a new generation starts), the provider, the
instructions file, the workspace's AGENTS.md, the secrets in the session's scope, the
agent's environment and its own MCP servers.
"""

import time

from django.conf import settings

from calvin.previews.models import Preview
from calvin.workspaces.definitions import agents_md_text
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
    }
