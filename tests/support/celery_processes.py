"""Real `celery -A calvin worker|beat` processes for tests that kill and recover them.

They use the test database (rows must be committed: django_db(transaction=True)) and a
queue of their own, so the in-process worker from tests/conftest.py never takes their tasks.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import redis
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {"record": "tests.support.recording_chat.RecordingChannel"}


def subprocess_database_url() -> str:
    db = connection.settings_dict  # pytest-django's test_ database, not the settings' NAME
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    return f"postgres://{quote(db['USER'])}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


class CeleryProcess:
    def __init__(self, args: list[str], *, queue: str, log_path: Path, env: dict | None = None):
        self.log_path = log_path
        environment = {
            **os.environ,  # what scripts/test set: REDIS_URL, CALVIN_VAR_DIR, ...
            "DATABASE_URL": subprocess_database_url(),
            "CALVIN_QUEUE": queue,
            "CALVIN_CHAT_ADAPTERS": json.dumps(ADAPTERS),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "calvin", *args],
            cwd=ROOT,
            env=environment,
            stdout=open(log_path, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a kill takes the pool children too
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert self.process.poll() is None, f"celery exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"no {text!r} in time:\n{self.log()}"
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a lost machine would: no shutdown code runs."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def worker(*, queue: str, log_path: Path, concurrency: int = 1, env: dict | None = None) -> CeleryProcess:
    pool = ["--pool", "prefork", "--concurrency", str(concurrency)] if concurrency > 1 else ["--pool", "solo"]
    args = ["worker", "-l", "info", "-Q", queue, "-n", f"{queue}-{uuid.uuid4().hex[:6]}@%h", *pool]
    return CeleryProcess([*args, "--without-mingle", "--without-gossip"], queue=queue, log_path=log_path, env=env)


def beat(*, queue: str, log_path: Path, env: dict | None = None) -> CeleryProcess:
    return CeleryProcess(["beat", "-l", "info", "--max-interval", "1"], queue=queue, log_path=log_path, env=env)


def queue_forget(queue: str) -> None:
    """Drop what the broker holds for this queue, including messages a killed worker left unacked."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=f"*{queue}*"):
        client.delete(key)
    for tag, raw in client.hgetall("unacked").items():
        if json.loads(raw)[2] == queue:
            client.hdel("unacked", tag)
            client.zrem("unacked_index", tag)
