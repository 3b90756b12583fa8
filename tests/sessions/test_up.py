"""`manage.py up`: embedded on a bare machine, or with PostgreSQL and Redis as separate processes."""

import json
import os
import pty
import re
import shlex
import sqlite3
import stat
import subprocess
import sys
import threading
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
BLOCK_END = "Calvin is running. Stop it with Ctrl+C.\n"


@pytest.fixture
def fresh_database():
    name = f"calvin_up_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG}/{name}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class LogFile:
    """up's output redirected to a file, as in `scripts/up > /tmp/calvin.log`."""

    def __init__(self, path: Path):
        self.path = path
        self.stdout = open(path, "w")

    def text(self) -> str:
        return self.path.read_text()


class Terminal:
    """up's output on a pseudo-terminal, as when a person runs it; held in memory only."""

    def __init__(self):
        master, self.stdout = pty.openpty()
        self._chunks: list[bytes] = []
        threading.Thread(target=self._read, args=(master,), daemon=True).start()

    def _read(self, master: int) -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # every writer is gone
                break
            if not data:
                break
            self._chunks.append(data)
        os.close(master)

    def text(self) -> str:
        return b"".join(self._chunks).decode(errors="replace").replace("\r\n", "\n")


def up_env(tmp_path, extra_env: dict) -> dict:
    # Without the tests' SP_STORE_KEY too, as on a laptop: a test that wants one passes it.
    dropped = ("DATABASE_URL", "REDIS_URL", "CALVIN_", "SP_STORE_KEY")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    # A sweep every second: beat's chatter, if it were not quieted, would follow the block.
    env.update(CALVIN_VAR_DIR=str(tmp_path / "var"), CALVIN_SWEEP_SECONDS="1", PYTHONUNBUFFERED="1", **extra_env)
    return env


def start_up(tmp_path, extra_env: dict, output):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "up", "--port", str(port)],
        cwd=tmp_path,  # not the project directory: up must not depend on where it is started
        env=up_env(tmp_path, extra_env),
        stdin=subprocess.DEVNULL,
        stdout=output.stdout,
        stderr=output.stdout,
        start_new_session=True,
    )
    if isinstance(output.stdout, int):
        os.close(output.stdout)  # the terminal's other end now belongs to up alone
    deadline = time.monotonic() + 60
    while BLOCK_END not in output.text():
        assert process.poll() is None, output.text()
        assert time.monotonic() < deadline, output.text()
        time.sleep(0.2)
    return process, f"http://127.0.0.1:{port}"


def check_working_platform(base: str, output: str, var: Path, password: str) -> None:
    assert f"Dashboard:   {base}/" in output
    snippet = json.loads((var / "demo.mcp.json").read_text())
    assert json.dumps(snippet, indent=2) in output
    server = snippet["mcpServers"]["calvin"]
    assert server["type"] == "http" and server["url"] == f"{base}/mcp"
    token = server["headers"]["Authorization"].removeprefix("Bearer ")
    # One entry per tool set, with the same token.
    assert set(snippet["mcpServers"]) == {"calvin", "nanoclaw"}
    nanoclaw = snippet["mcpServers"]["nanoclaw"]
    assert nanoclaw["url"] == f"{base}/mcp/nanoclaw" and nanoclaw["headers"] == server["headers"]
    sent = Agent(session=None, runner=None, token=token, url=nanoclaw["url"]).call(
        "send_message", {"text": "Hello from nanoclaw", "to": "thread"}
    )
    assert not sent.is_error and sent.structured_content["messageId"] > 0, text_of(sent)

    agent = Agent(session=None, runner=None, token=token, url=server["url"])
    spec = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "Hello from up"}}}}
    result = agent.call("post_card", {"spec": spec})
    assert not result.is_error, text_of(result)
    # NUL and NaN are refused up front in the same words whichever database is behind
    # (SQLite would store a NUL that PostgreSQL rejects).
    nul = agent.raw_call(
        "post_card", '{"spec": {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "a\\u0000"}}}}}'
    )
    assert nul["isError"] and nul["content"][0]["text"] == (
        "Error executing tool post_card: invalid arguments: spec.elements.c.props.title: contains a NUL character"
        " (\\u0000)"
    ), nul
    nan = '{"spec": {"root": "c", "elements": {"c": {"type": "Card", "children": ["x"]},'
    nan += ' "x": {"type": "Field", "props": {"label": "n", "value": NaN}}}}}'
    nan = agent.raw_call("post_card", nan)
    assert nan["isError"] and nan["content"][0]["text"] == (
        "Error executing tool post_card: invalid card spec: elements.x (Field): value: must be a finite number"
        " (not NaN or Infinity)"
    ), nan

    with httpx2.Client(base_url=base, follow_redirects=True) as http:
        login = http.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        home = http.post(
            "/accounts/login/", data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf}
        )
        assert "Demo session" in home.text
        thread = re.search(r"Your own agent's thread: \S+(/threads/\d+/)", output).group(1)
        # The worker applies the card; the thread page shows it.
        wait_for(lambda: "Hello from up" in http.get(thread).text, timeout=20)

        # The local host runs the demo agent: a message in its thread makes it work (no logged-in
        # Claude Code here, so it is the script: a card and a file through the real tools, a reply).
        talk = re.search(r"Talk to an agent: \S+(/threads/\d+/)", output).group(1)
        page = http.get(talk).text
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        http.post(f"{talk}reply/", data={"text": "hi there", "csrfmiddlewaretoken": csrf})
        # Its reply comes at the end of its turn; the card and the file once the worker applied them.
        shown = ("I am Calvin&#x27;s demo agent", "You said: hi there", "CLAUDE.md")
        wait_for(lambda: all(part in http.get(talk).text for part in shown), timeout=60)


def test_embedded_up_without_a_vault_key_makes_one_that_every_process_uses(tmp_path):
    """up started without SP_STORE_KEY (self-hosted: request_secret is offered) makes a key into
    var/ (mode 0600) and says so; request_secret works with it, and another process started
    from that directory uses the same key (a secret it stores is one the gateway can read)."""
    output = LogFile(tmp_path / "up.log")
    process, _base = start_up(tmp_path, {"CALVIN_MODE": "self-hosted"}, output)
    try:
        check_generated_vault_key(tmp_path, output.text())
    finally:
        stop(process)


def check_generated_vault_key(tmp_path, log: str) -> None:
    key_file = tmp_path / "var" / "vault_key"
    assert f"Generated a key for secrets in {key_file} (mode 0600)" in log, log
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    snippet = json.loads((tmp_path / "var" / "demo.mcp.json").read_text())["mcpServers"]
    token = snippet["calvin"]["headers"]["Authorization"].removeprefix("Bearer ")
    calvin = Agent(session=None, runner=None, token=token, url=snippet["calvin"]["url"])
    asked = calvin.call("request_secret", {"name": "DEPLOY_TOKEN", "reason": "To deploy the demo", "file": False})
    assert not asked.is_error, text_of(asked)

    value = "set-by-another-process-" + uuid.uuid4().hex
    store = (
        "import os; from sessions.models import Runner; from sessions.tokens import token_digest;"
        " from secrets_vault.services import secret_put;"
        " session = Runner.objects.get(token_digest=token_digest(os.environ['DEMO_TOKEN'])).session;"
        " secret_put(workspace_id=session.workspace_id, name='FROM_SHELL', value=os.environ['SHELL_VALUE'])"
    )
    env = up_env(tmp_path, {"CALVIN_MODE": "self-hosted", "DEMO_TOKEN": token, "SHELL_VALUE": value})
    stored = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", store], cwd=tmp_path, env=env, capture_output=True
    )
    assert stored.returncode == 0, stored.stderr.decode()
    # Under another key the gateway could not decrypt it, and would refuse for that instead.
    nanoclaw = Agent(session=None, runner=None, token=token, url=snippet["nanoclaw"]["url"])
    leaked = nanoclaw.call("send_message", {"text": f"the value is {value}", "to": "thread"})
    assert leaked.is_error and "the secret FROM_SHELL" in text_of(leaked), text_of(leaked)


def assert_block_is_last(output: str) -> None:
    """After startup and real use (a tool call applied, pages served, beat ticking every
    second), nothing has followed the block: no banner, root warning or task chatter."""
    assert output.count(BLOCK_END) == 1
    assert output.split(BLOCK_END, 1)[1].strip() == "", output
    # Celery's banner and its warning about running as root are not shown at all.
    assert "celery@" not in output and "superuser privileges" not in output, output


def stop(process) -> None:
    process.terminate()
    process.wait(timeout=30)


def test_embedded_up_into_a_log_file_leaves_no_password_there(tmp_path):
    output = LogFile(tmp_path / "up.log")
    process, base = start_up(tmp_path, {"CALVIN_MODE": "one-machine"}, output)
    try:
        log = output.text()
        assert "embedded: SQLite/in-memory, mode one-machine" in log
        # Not a terminal: no password is made, so none can be in the log; the block says what to do.
        assert "password:" not in log
        with sqlite3.connect(tmp_path / "var" / "calvin.sqlite3") as db:
            (stored,) = db.execute("SELECT password FROM auth_user WHERE username = 'admin'").fetchone()
        assert stored.startswith("!")  # Django's unusable password
        command = re.search(r"set one with: (.+)", log).group(1)
        subprocess.run(
            shlex.split(command),
            input="a-long-passphrase\na-long-passphrase\n",
            text=True,
            env=up_env(tmp_path, {"CALVIN_MODE": "one-machine"}),
            start_new_session=True,  # no terminal: getpass reads the input
            capture_output=True,
            check=True,
        )
        check_working_platform(base, log, tmp_path / "var", "a-long-passphrase")
        assert_block_is_last(output.text())
        check_newcomer_signs_up(base, output)
        host = host_daemon_of(process.pid)
        assert host is not None, "up runs a local host daemon as its child"
    finally:
        stop(process)
    # SIGTERM to up stops its host daemon too.
    wait_for(lambda: not Path(f"/proc/{host}").exists(), timeout=20)


def check_newcomer_signs_up(base: str, output) -> None:
    """A newcomer follows the printout: signs up, reads the verification link in up's log (no
    EMAIL_URL: the console backend), verifies, and creates a workspace of their own (SQLite)."""
    assert f"Sign up:     {base}/accounts/signup/" in output.text()
    with httpx2.Client(base_url=base, follow_redirects=True) as http:
        page = http.get("/accounts/signup/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        form = {
            "email": "New.Comer@example.com",
            "password1": "a-long-passphrase-9",
            "password2": "a-long-passphrase-9",
        }
        http.post("/accounts/signup/", data={**form, "csrfmiddlewaretoken": csrf})
        wait_for(lambda: re.search(r"http://\S+/accounts/verify/\S+/", output.text()), timeout=20)
        link = re.search(r"http://\S+/accounts/verify/\S+/", output.text()).group(0)
        page = http.get(link)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        created = http.post(link, data={"csrfmiddlewaretoken": csrf})
        assert created.url.path == "/workspaces/new/", created.url
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', created.text).group(1)
        home = http.post("/workspaces/new/", data={"name": "Newco", "slug": "newco", "csrfmiddlewaretoken": csrf})
        assert home.url.path == "/w/newco/" and "Newco" in home.text
        assert "Demo session" not in home.text  # the demo workspace is not theirs


def host_daemon_of(parent: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"host" in cmdline and any(part.endswith(b"manage.py") for part in cmdline):
            return int(entry.name)
    return None


def test_up_on_a_terminal_with_postgresql_and_redis_shows_a_password_that_no_file_keeps(tmp_path, fresh_database):
    queue = f"calvin-up-{uuid.uuid4().hex[:8]}"
    env = {
        "DATABASE_URL": fresh_database,
        "REDIS_URL": settings.REDIS_URL,
        "CALVIN_QUEUE": queue,
        "CALVIN_CHANNEL_PREFIX": queue,
        # A hosted gateway with DATABASE_URL does not start without one.
        "SP_STORE_KEY": os.environ["SP_STORE_KEY"],
    }
    output = Terminal()
    process, base = start_up(tmp_path, env, output)
    try:
        screen = output.text()
        assert "(PostgreSQL + Redis, mode hosted)" in screen
        password = re.search(r"user: admin  password: (\S+)", screen).group(1)
        check_working_platform(base, screen, tmp_path / "var", password)
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert password.encode() not in path.read_bytes(), path
        # Worker and beat run as processes of their own, still alive after all that.
        of_up = ["ps", "-ww", "--ppid", str(process.pid), "-o", "args="]
        children = subprocess.run(of_up, capture_output=True, text=True).stdout
        assert " worker " in children and " beat " in children, children
        assert_block_is_last(output.text())
    finally:
        stop(process)
    assert "Unable to load celery application" not in output.text()
    # up takes its worker and beat down with it.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert queue not in ps
