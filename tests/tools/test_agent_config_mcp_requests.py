"""add_mcp_server refuses `${` outside a vault reference: Claude Code would expand it from the
session's environment (which holds its secrets) when it starts the server, so the card would
show a name while a secret's value ran."""

import pytest

from tests.approvals.support import _worker_idle_afterwards, refused  # noqa: F401 (an autouse fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_expansion_is_refused_wherever_it_would_run(agent):
    arguments = {
        "name": "srv",
        "command": "${SHELL}",
        "args": ["--token", "${GITHUB_TOKEN}"],
        "env": {"A": "x${B}", "OK": "vault:GITHUB_TOKEN", "PLAIN": "$HOME"},
    }
    text = refused(agent, "add_mcp_server", arguments, "'${' is not allowed")
    assert "command, args[1], env A" in text and "env OK" not in text and "PLAIN" not in text
