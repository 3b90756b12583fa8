"""The gateway's var/ is 0700 and what it makes there 0600 (database, keys, logs, demo.mcp.json,
stored files), session directories 0700: after a real `up` over files an older run left loose,
from a fresh settings load, from the services, and in the processes' own umask."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from calvin.workspaces.models import Member
from sessions.services import session_start
from tests.conftest import Agent, free_port, text_of, wait_for
from tests.sessions.test_up import LogFile, host_daemon_of, start_up, stop, up_env
from tests.support.celery_processes import subprocess_database_url

ROOT = Path(__file__).resolve().parents[2]
LOOSE = 0o022  # an operator's usual umask: what a file would be made with, were it not for the fixes


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def umask_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError(f"no Umask line for {pid}")


@pytest.fixture
def loose_umask():
    """The test process (whose children inherit it) runs with an ordinary umask."""
    before = os.umask(LOOSE)
    yield
    os.umask(before)


def test_up_over_an_older_runs_loose_files_makes_var_private(tmp_path, loose_umask):
    var = tmp_path / "var"
    (var / "media").mkdir(parents=True)
    for directory in (var, var / "media"):
        directory.chmod(0o755)
    for name in ("secret_key", "host.log", "demo.mcp.json"):
        (var / name).write_text("left by an older run\n" if name != "secret_key" else "k" * 60)
        (var / name).chmod(0o644)
    os.symlink("/etc/hostname", var / "a-link")  # never followed: /etc/hostname keeps its mode
    etc_mode = mode(Path("/etc/hostname"))

    output = LogFile(tmp_path / "up.log")
    process, _base = start_up(tmp_path, {"CALVIN_MODE": "one-machine"}, output)
    try:
        assert umask_of(process.pid) == 0o077
        host = wait_for(lambda: host_daemon_of(process.pid), timeout=20)
        assert umask_of(host) == LOOSE  # the host's files are read by agents of another uid
        snippet = json.loads((var / "demo.mcp.json").read_text())["mcpServers"]["calvin"]
        token = snippet["headers"]["Authorization"].removeprefix("Bearer ")
        for directory in (var / "sessions").iterdir():  # the demo session's directory among them
            (directory / "report.txt").write_text("sent by the demo token")
        agent = Agent(session=None, runner=None, token=token, url=snippet["url"])
        sent = agent.call("send_file", {"path": "report.txt"})
        assert not sent.is_error, text_of(sent)
        stored = wait_for(lambda: [p for p in (var / "media").rglob("*") if p.is_file()], timeout=20)

        assert mode(var) == 0o700
        for name in ("secret_key", "vault_key", "calvin.sqlite3", "host.log", "demo.mcp.json"):
            assert mode(var / name) == 0o600, name
        assert mode(Path("/etc/hostname")) == etc_mode
        for directory in (var / "media", var / "sessions", var / "session-tmp", *(var / "sessions").iterdir()):
            assert mode(directory) == 0o700, directory
        for path in stored:
            assert mode(path) == 0o600, path
            for parent in path.relative_to(var / "media").parents[:-1]:
                assert mode(var / "media" / parent) == 0o700, parent
    finally:
        stop(process)


def test_a_fresh_var_and_its_secret_key_are_private_from_the_first_settings_load(tmp_path, loose_umask):
    var = tmp_path / "fresh" / "var"
    environment = up_env(tmp_path / "fresh", {})  # CALVIN_VAR_DIR is <that>/var
    loaded = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; settings.SECRET_KEY"],
        cwd=ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "calvin.settings"},
        capture_output=True,
        text=True,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert mode(var) == 0o700
    assert mode(var / "secret_key") == 0o600
    assert len((var / "secret_key").read_text().strip()) >= 50


@pytest.mark.django_db(transaction=True)
def test_session_directories_and_stored_files_are_private(workspace, loose_umask):
    session = session_start(workspace=workspace, owner=Member.objects.filter(workspace=workspace).first(), title="t")
    assert mode(Path(session.directory)) == 0o700
    assert mode(Path(session.temp_directory)) == 0o700
    name = default_storage.save(f"tool-files/{session.id}/new-dir/f.bin", ContentFile(b"stored"))
    try:
        path = Path(default_storage.path(name))
        assert mode(path) == 0o600
        assert mode(path.parent) == 0o700 and mode(path.parent.parent) == 0o700
    finally:
        default_storage.delete(name)


@pytest.mark.django_db(transaction=True)
def test_a_web_process_and_a_celery_worker_of_their_own_make_private_files(tmp_path, loose_umask):
    """calvin.http_server and `celery -A calvin worker`, started by an operator with umask 022."""
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    environment = {**os.environ, "CALVIN_VAR_DIR": str(var), "DATABASE_URL": subprocess_database_url()}
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "calvin.http_server", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "calvin", "worker", "-Q", f"private-files-{port}", "-l", "warning"],
        cwd=ROOT,
        env={**environment, "CALVIN_QUEUE": f"private-files-{port}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: umask_of(web.pid) == 0o077, timeout=30)
        wait_for(lambda: umask_of(worker.pid) == 0o077, timeout=60)
        deadline = time.monotonic() + 10
        while mode(var) != 0o700 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mode(var) == 0o700
    finally:
        for process in (web, worker):
            process.terminate()
        for process in (web, worker):
            process.wait(timeout=30)
