"""`manage.py up` on a bare machine: embedded SQLite, in-process worker, a ready .mcp.json."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from tests.conftest import Agent, free_port, text_of, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def calvin_up(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CALVIN_"))}
    env.update(CALVIN_VAR_DIR=str(tmp_path / "var"), CALVIN_MODE="one-machine", PYTHONUNBUFFERED="1")
    out = open(tmp_path / "up.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )

    def log() -> str:
        return (tmp_path / "up.log").read_text()

    try:
        deadline = time.monotonic() + 60
        while "Application startup complete" not in log():
            assert process.poll() is None, log()
            assert time.monotonic() < deadline, log()
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", log(), tmp_path / "var"
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_up_prints_what_a_newcomer_needs_and_serves_a_working_gateway(calvin_up):
    base, output, var = calvin_up
    assert "embedded: SQLite/in-memory, mode one-machine" in output
    assert f"Dashboard:   {base}/" in output
    password = re.search(r"user: admin  password: (\S+)", output).group(1)
    snippet = json.loads((var / "demo.mcp.json").read_text())
    assert json.dumps(snippet, indent=2) in output
    server = snippet["mcpServers"]["calvin"]
    assert server["type"] == "http" and server["url"] == f"{base}/mcp"
    token = server["headers"]["Authorization"].removeprefix("Bearer ")
    assert (var / "calvin.sqlite3").exists()

    agent = Agent(session=None, runner=None, token=token, url=server["url"])
    spec = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "Hello from up"}}}}
    result = agent.call("post_card", {"spec": spec})
    assert not result.is_error, text_of(result)

    with httpx2.Client(base_url=base, follow_redirects=True) as http:
        login = http.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        home = http.post(
            "/accounts/login/", data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf}
        )
        assert "Demo session" in home.text
        thread = re.search(r'href="(/threads/\d+/)"', home.text).group(1)
        # The in-process worker applies the card; the thread page shows it.
        wait_for(lambda: "Hello from up" in http.get(thread).text, timeout=15)
