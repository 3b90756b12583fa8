"""Calvin's processes, for real, on the fault tests' own PostgreSQL and Redis (cluster.py).

    stack = Stack(name="faults", directory=..., postgres=postgres, redis=redis, template="calvin_template")
    stack.migrate()                          # only on a template: once per module (conftest.py)
    web = stack.gateway()                    # python -m calvin.http_server on a free port
    worker = stack.worker(); beat = stack.beat()   # celery -A calvin worker|beat (tests/support)
    fixtures = stack.django("result = ...")  # Python in a Django process on the cluster -> JSON
    db = stack.db()                          # psycopg, autocommit, for counts at the destination
    web.kill(); web.start()                  # SIGKILL, then the same command on the same port
    stack.stop()                             # every process it started

Every process gets the cluster's DATABASE_URL and REDIS_URL, a queue and channel prefix of the
stack's own, a file tree under `directory`, scripts/test's SP_STORE_KEY and short sweep bounds
(SWEEP below), so what a fault leaves behind is swept within seconds. The test process itself
never opens the cluster with Django's ORM: its own Django is pytest-django's (the shared
PostgreSQL), so rows are made by `stack.django(...)` and read with SQL.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psycopg

from tests.reliability.cluster import Postgres, Redis, free_port
from tests.sessions.host_processes import HostProcess, host_process_start
from tests.support import celery_processes

ROOT = Path(__file__).resolve().parents[2]

# Short bounds, so that a fault's leftovers are found within seconds (calvin/settings.py).
SWEEP = {
    "CALVIN_SWEEP_SECONDS": "1",
    # Not lower: each sweep re-queues every pending call older than this, so a bound shorter than
    # the backlog's drain floods the queue with duplicates of the backlog once a second.
    "CALVIN_LOST_PENDING_SECONDS": "10",
    "CALVIN_STUCK_APPLYING_SECONDS": "5",
    "CALVIN_HOST_HEARTBEAT_SECONDS": "0.5",
    "CALVIN_HOST_LAPSE_SECONDS": "3",
    "CALVIN_LIVE_CHECK_SECONDS": "1",
}


class Gateway:
    """`python -m calvin.http_server` (uvicorn), in its own process group."""

    def __init__(self, *, env: dict, log: Path, port: int | None = None):
        self.env, self.log, self.port = env, log, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self, timeout: float = 60) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calvin.http_server", "--port", str(self.port)]
            + ["--log-level", "warning", "--no-access-log"],
            cwd=ROOT,
            env=self.env,
            stdout=open(self.log, "ab"),  # noqa: SIM115 - the child holds it
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, f"gateway exited:\n{self.output()}"
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, f"gateway did not answer /healthz:\n{self.output()}"
            time.sleep(0.1)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class HostRecord:
    """The Host row as the test sees it (made in the cluster by stack.host_create)."""

    id: int
    name: str
    token: str


@dataclass
class Stack:
    name: str
    directory: Path
    postgres: Postgres
    redis: Redis
    database: str = "calvin"
    template: str | None = None  # a migrated database to copy: no migrate per test
    extra_env: dict = field(default_factory=dict)

    def __post_init__(self):
        self.directory = Path(self.directory)
        self.var = self.directory / "calvin"
        self.logs = self.directory / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.queue = f"{self.name}-{uuid.uuid4().hex[:6]}"
        self.database_url = self.postgres.database_create(self.database, template=self.template)
        self.started: list = []

    def env(self, **extra) -> dict:
        """The environment of every Calvin process of this stack (extra wins)."""
        return {
            **os.environ,  # scripts/test's: SP_STORE_KEY, TMPDIR, PYTHONPATH ...
            "DJANGO_SETTINGS_MODULE": "calvin.settings",
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis.url(0),
            "CALVIN_QUEUE": self.queue,
            "CALVIN_CHANNEL_PREFIX": self.queue,
            "CALVIN_VAR_DIR": str(self.var),
            "CALVIN_SESSIONS_DIR": str(self.var / "sessions"),
            "CALVIN_SESSIONS_TMP_DIR": str(self.var / "session-tmp"),
            "MEDIA_ROOT": str(self.var / "media"),
            "PYTHONUNBUFFERED": "1",
            **SWEEP,
            **self.extra_env,
            **extra,
        }

    def migrate(self) -> None:
        done = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def django(self, code: str, timeout: float = 60):
        """Run `code` in a fresh Django process on the cluster; it sets `result` (JSON-able)."""
        script = "import django, json, sys\ndjango.setup()\nresult = None\n" + textwrap.dedent(code)
        script += "\nsys.stdout.write('\\n@@result ' + json.dumps(result))\n"
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.rsplit("@@result ", 1)[1])

    def db(self) -> psycopg.Connection:
        return psycopg.connect(self.database_url, autocommit=True, connect_timeout=5)

    def query(self, sql: str, params=()) -> list[tuple]:
        with self.db() as conn:
            return conn.execute(sql, params).fetchall()

    def _track(self, process):
        self.started.append(process)
        return process

    def gateway(self, **env) -> Gateway:
        n = sum(isinstance(p, Gateway) for p in self.started)
        return self._track(Gateway(env=self.env(**env), log=self.logs / f"web-{n}.log"))

    def worker(self, concurrency: int = 1, **env) -> celery_processes.CeleryProcess:
        n = sum(isinstance(p, celery_processes.CeleryProcess) for p in self.started)
        process = celery_processes.worker(
            queue=self.queue, log_path=self.logs / f"celery-{n}.log", concurrency=concurrency, env=self.env(**env)
        )
        return self._track(process)

    def beat(self, **env) -> celery_processes.CeleryProcess:
        n = sum(isinstance(p, celery_processes.CeleryProcess) for p in self.started)
        process = celery_processes.beat(queue=self.queue, log_path=self.logs / f"celery-{n}.log", env=self.env(**env))
        return self._track(process)

    def host_create(self, name: str) -> HostRecord:
        made = self.django(
            f"""
            from sessions.hosts import host_create
            host, token = host_create(name={name!r})
            result = {{"id": host.id, "name": host.name, "token": token}}
            """
        )
        return HostRecord(**made)

    def host(self, host: HostRecord, gateway: Gateway, capacity: int = 4, **env) -> HostProcess:
        """`manage.py host` for a Host row; start it again (after a kill) with the same call."""
        environment = dict(SWEEP)
        environment.update(self.extra_env)
        environment.update(env)
        handle = host_process_start(
            gateway=gateway.url,
            host=host,
            token=host.token,
            directory=self.directory / "hosts" / host.name,
            capacity=capacity,
            environment=environment,
        )
        return self._track(handle)

    def stop(self) -> None:
        for process in reversed(self.started):
            process.stop()
        self.started.clear()


def wait_until(predicate, timeout: float, interval: float = 0.1, what: str = "condition", state=None):
    """`state()`, if given, says what was seen instead when the time is up."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not met within {timeout} s" + (f"; seen: {state()}" if state else ""))
        time.sleep(interval)


def sessions_make(stack: Stack, count: int) -> list[dict]:
    """`count` web-channel sessions of one new workspace, each with a runner token
    (bench/setup_calvin.py): [{"token", "session_id", "thread_id"}, ...]."""
    return sessions_and_cookie(stack, count)[0]


def sessions_and_cookie(stack: Stack, count: int) -> tuple[list[dict], str]:
    """sessions_make's sessions, and a logged-in owner's `Cookie` header for their pages' sockets."""
    out = stack.directory / f"sessions-{uuid.uuid4().hex[:6]}.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "setup_calvin.py"), str(count), str(out)],
        cwd=ROOT,
        env=stack.env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    made = json.loads(out.read_text())
    return made["runners"], made["cookie"]
