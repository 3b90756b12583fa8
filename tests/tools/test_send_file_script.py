"""calvin-send-file: the same tool and limits, from a shell."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.models import Message
from tests.conftest import wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = Path(__file__).resolve().parents[2] / "bin" / "calvin-send-file"


def run(agent, *args, env_token=True, cwd=None):
    env = dict(os.environ)
    if env_token:
        env.update(CALVIN_MCP_URL=agent.url, CALVIN_TOKEN=agent.token)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=cwd or agent.directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sends_a_file_with_a_comment(agent):
    (agent.directory / "out.txt").write_text("from a script")
    done = run(agent, "out.txt", "made by make")
    assert done.returncode == 0, done.stderr
    call = wait_for(lambda: ToolCall.objects.filter(status="applied").first())
    message = Message.objects.get(tool_call=call)
    assert (message.text, message.file.read()) == ("made by make", b"from a script")


def test_reads_the_session_mcp_json_and_reports_refusals(agent):
    config = {
        "mcpServers": {
            "calvin": {"type": "http", "url": agent.url, "headers": {"Authorization": f"Bearer {agent.token}"}}
        }
    }
    (agent.directory / ".mcp.json").write_text(json.dumps(config))
    (agent.directory / "empty.txt").write_text("")
    done = run(agent, "empty.txt", env_token=False)
    assert done.returncode == 1
    assert "empty.txt is empty" in done.stderr
    assert not ToolCall.objects.exists()


def test_works_from_any_directory_with_what_the_runner_sets(agent, tmp_path):
    # No .mcp.json above the working directory: the runner's CALVIN_MCP_URL and CALVIN_TOKEN are enough.
    (agent.directory / "report.txt").write_text("from elsewhere")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run(agent, str(agent.directory / "report.txt"), cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    call = wait_for(lambda: ToolCall.objects.filter(status="applied").first())
    assert Message.objects.get(tool_call=call).file.read() == b"from elsewhere"
    refused = run(agent, str(agent.directory / "report.txt"), cwd=elsewhere, env_token=False)
    assert refused.returncode == 1 and "no CALVIN_MCP_URL/CALVIN_TOKEN and no .mcp.json" in refused.stderr
