"""issue_token: a new runner generation, its token shown once, and a .mcp.json with one entry per tool set."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calvin.workspaces.models import Agent
from sessions.models import Runner
from sessions.services import session_start
from sessions.tokens import token_digest

pytestmark = pytest.mark.django_db


def issue(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("issue_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_mcp_json_has_one_entry_per_tool_set_with_the_same_token(workspace):
    session = session_start(workspace=workspace, title="t")
    out, _ = issue(str(session.id), "--mcp-json", "--url", "https://calvin.example.com/")
    servers = json.loads(out)["mcpServers"]
    assert {name: s["url"] for name, s in servers.items()} == {
        "calvin": "https://calvin.example.com/mcp",
        "nanoclaw": "https://calvin.example.com/mcp/nanoclaw",
    }
    tokens = {s["headers"]["Authorization"] for s in servers.values()}
    assert len(tokens) == 1
    token = tokens.pop().removeprefix("Bearer ")
    assert Runner.objects.get(token_digest=token_digest(token), revoked_at__isnull=True).session_id == session.id


def test_an_agent_given_one_tool_set_gets_one_entry(workspace):
    session = session_start(workspace=workspace, title="t")
    Agent.objects.filter(id=session.agent_id).update(tool_sets=["nanoclaw"])
    out, _ = issue(str(session.id), "--mcp-json", "--url", "http://127.0.0.1:8000/mcp")  # a trailing /mcp is fine
    assert json.loads(out)["mcpServers"]["nanoclaw"]["url"] == "http://127.0.0.1:8000/mcp/nanoclaw"
    assert set(json.loads(out)["mcpServers"]) == {"nanoclaw"}


def test_an_unknown_session_is_a_clear_error(workspace):
    with pytest.raises(CommandError, match="no session 999999"):
        issue("999999")
