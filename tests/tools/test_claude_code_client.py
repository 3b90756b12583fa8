"""A real third-party client: Claude Code's CLI connects to /mcp with a runner token, and not without one."""

import os
import subprocess
from pathlib import Path

import pytest

CLAUDE = Path(__file__).resolve().parents[2] / "var" / "node" / "node_modules" / ".bin" / "claude"

pytestmark = pytest.mark.django_db(transaction=True)


def claude(home: Path, *args: str) -> str:
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run([str(CLAUDE), *args], env=env, capture_output=True, text=True, timeout=90)
    return done.stdout + done.stderr


def test_claude_code_connects_with_a_runner_token_and_fails_without(agent, tmp_path):
    assert CLAUDE.exists(), "scripts/test installs Claude Code's CLI into var/node"
    home = tmp_path / "home"
    home.mkdir()
    for name, token in (("calvin", agent.token), ("intruder", "cvn_not-a-token")):
        claude(home, "mcp", "add", "--transport", "http", "--scope", "user", name, agent.url,
               "--header", f"Authorization: Bearer {token}")  # fmt: skip
    listing = claude(home, "mcp", "list")
    assert f"calvin: {agent.url} (HTTP) - ✔ Connected" in listing, listing
    assert f"intruder: {agent.url} (HTTP) - ✘ Failed to connect" in listing, listing
