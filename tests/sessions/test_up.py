"""`manage.py up`: embedded on a bare machine, or with PostgreSQL and Redis as separate processes."""

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx2
import psycopg
import pytest
from django.conf import settings

from tests.conftest import Agent, free_port, text_of, wait_for

ROOT = Path(__file__).resolve().parents[2]
PG = "postgres://postgres@127.0.0.1:5432"


@pytest.fixture
def fresh_database():
    name = f"calvin_up_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG}/{name}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_up(tmp_path, extra_env: dict):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CALVIN_"))}
    env.update(CALVIN_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1", **extra_env)
    log_path = tmp_path / "up.log"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "up", "--port", str(port)],
        cwd=tmp_path,  # not the project directory: up must not depend on where it is started
        env=env,
        stdout=open(log_path, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while "Application startup complete" not in log_path.read_text():
        assert process.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.2)
    return process, f"http://127.0.0.1:{port}", log_path


def check_working_platform(base: str, output: str, var: Path) -> None:
    assert f"Dashboard:   {base}/" in output
    password = re.search(r"user: admin  password: (\S+)", output).group(1)
    snippet = json.loads((var / "demo.mcp.json").read_text())
    assert json.dumps(snippet, indent=2) in output
    server = snippet["mcpServers"]["calvin"]
    assert server["type"] == "http" and server["url"] == f"{base}/mcp"
    token = server["headers"]["Authorization"].removeprefix("Bearer ")

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
        # The worker applies the card; the thread page shows it.
        wait_for(lambda: "Hello from up" in http.get(thread).text, timeout=20)


def stop(process) -> None:
    process.terminate()
    process.wait(timeout=30)


def test_embedded_up_on_a_bare_machine(tmp_path):
    process, base, log = start_up(tmp_path, {"CALVIN_MODE": "one-machine"})
    try:
        output = log.read_text()
        assert "embedded: SQLite/in-memory, mode one-machine" in output
        check_working_platform(base, output, tmp_path / "var")
        assert (tmp_path / "var" / "calvin.sqlite3").exists()
    finally:
        stop(process)


def test_up_with_postgresql_and_redis_runs_worker_and_beat_as_processes(tmp_path, fresh_database):
    queue = f"calvin-up-{uuid.uuid4().hex[:8]}"
    env = {
        "DATABASE_URL": fresh_database,
        "REDIS_URL": settings.REDIS_URL,
        "CALVIN_QUEUE": queue,
        "CALVIN_CHANNEL_PREFIX": queue,
    }
    process, base, log = start_up(tmp_path, env)
    try:
        output = log.read_text()
        assert "(PostgreSQL + Redis, mode hosted)" in output
        check_working_platform(base, output, tmp_path / "var")
        wait_for(lambda: "beat: Starting" in log.read_text(), timeout=20)
    finally:
        stop(process)
    assert "Unable to load celery application" not in log.read_text()
    # up takes its worker and beat down with it.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert queue not in ps
