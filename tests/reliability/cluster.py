"""A PostgreSQL cluster and a Redis of the fault tests' own, to kill and start again.

The rest of the suite uses the machine's PostgreSQL (5432) and Redis (6379); these run on free
ports, with their files under var/<TEST_NAME>/[<xdist worker>/]reliability/<name>/, so a test may
stop them hard without touching anyone else.

    postgres = Postgres(directory)      # initdb (as the `postgres` OS user: initdb refuses root)
    postgres.start()                    # pg_ctl start -w on a free port (kept across restarts)
    postgres.database_create("calvin")  # -> "postgres://postgres@127.0.0.1:<port>/calvin"
    postgres.database_create("c1", template="calvin")  # a copy (of a migrated schema, say)
    postgres.stop_immediate()           # pg_ctl stop -m immediate: no checkpoint, clients cut off
    postgres.start()                    # the same port and files again

    redis = Redis()                     # redis-server without persistence, as our child process
    redis.start(); redis.url(0)         # -> "redis://127.0.0.1:<port>/0"
    redis.kill(); redis.start()         # SIGKILL, then empty again on the same port

Both are stopped with `.stop()` (the fixtures in conftest.py do it).
"""

import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import redis as redis_client

from tests.support.ports import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "postgres"


def _reachable_by(path: Path, user: str) -> None:
    """Let `user` traverse to `path`: var/ is made 0700 by gateways and `up` (private modes);
    0711 on the way down adds traversal only (names cannot be listed)."""
    account = pwd.getpwnam(user)
    for parent in reversed(path.parents):
        if parent == Path("/") or not parent.exists():
            continue
        info = parent.stat()
        if info.st_uid != account.pw_uid and not info.st_mode & 0o001:
            os.chmod(parent, info.st_mode | 0o011)


class Postgres:
    """One PostgreSQL 15 cluster in `directory` (made afresh), run as the `postgres` OS user."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.data = self.directory / "pg"
        self.log = self.directory / "postgres.log"
        self.port = free_port()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True)
        account = pwd.getpwnam(PG_USER)
        os.chown(self.directory, account.pw_uid, account.pw_gid)
        _reachable_by(self.directory, PG_USER)
        self._as_postgres([str(PG_BIN / "initdb"), "-D", str(self.data), "--auth=trust", "-U", PG_USER, "-E", "UTF8"])

    def _as_postgres(self, argv: list[str], timeout: float = 60) -> None:
        _reachable_by(self.directory, PG_USER)
        done = subprocess.run(
            ["runuser", "-u", PG_USER, "--", *argv], capture_output=True, text=True, timeout=timeout, cwd="/"
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{self.logs()}")

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._as_postgres(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"]
        )

    def stop_immediate(self) -> None:
        """Like a crashed machine's database: every backend goes at once, no shutdown checkpoint."""
        self._as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop_immediate()

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.url(database), autocommit=True, connect_timeout=5)

    def database_create(self, name: str, template: str | None = None) -> str:
        """A new empty database (or a copy of `template`, which must have no connections)."""
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def answers(self) -> bool:
        try:
            with self.connect() as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False


class Redis:
    """A redis-server child process without persistence: a kill loses everything it held."""

    def __init__(self, log: Path | None = None):
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 10) -> None:
        output = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not self.answers():
            assert self.process.poll() is None, f"redis-server exited ({self.process.returncode})"
            assert time.monotonic() < deadline, "redis-server did not answer"
            time.sleep(0.05)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def answers(self) -> bool:
        try:
            return redis_client.Redis(port=self.port, socket_timeout=1).ping()
        except redis_client.RedisError:
            return False

    def kill(self) -> None:
        """SIGKILL: no save, clients see their sockets reset."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
