"""Calvin's MCP tools against a bare MCP server, side by side, on this machine.

    .venv/bin/python bench/run.py [--quick] [--workers N]

Starts (each in its own process, one worker each; `--workers N` for N each): uvicorn serving a
bare MCPServer with one no-op tool; uvicorn serving calvin.asgi; a Celery worker (solo pool, or
a prefork pool of N). Calvin runs on its own
PostgreSQL database (calvin_bench, dropped and migrated at the start) and Redis db 14, with
the vault key in var/bench/vault_key (made once, mode 0600). See bench/README.md for what is
measured.
"""

import argparse
import asyncio
import base64
import contextlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psycopg
import redis
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.asyncio.client import connect as ws_connect

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
VAR = ROOT / "var" / "bench"
LOGS = VAR / "logs"

DB_NAME = "calvin_bench"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/14"
QUEUE = "calvin-bench"
PER_RUNNER = 50  # tools/limits.py: 50 post_card and 50 send_file per runner

CALVIN_ENV = {
    "DJANGO_SETTINGS_MODULE": "calvin.settings",
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": REDIS_URL,
    "CALVIN_QUEUE": QUEUE,
    "CALVIN_CHANNEL_PREFIX": "calvin-bench",
    "CALVIN_VAR_DIR": str(VAR),
    "CALVIN_SESSIONS_DIR": str(VAR / "sessions"),
    # Empty: the settings read CALVIN_VAR_DIR/vault_key instead (var/bench/vault_key, which
    # vault_key_ensure makes), never a SP_STORE_KEY of the shell this runs in. A hosted gateway
    # with DATABASE_URL does not start without a key.
    "SP_STORE_KEY": "",
    "PYTHONUNBUFFERED": "1",
}
VAULT_KEY = VAR / "vault_key"

# Issue 26's targets, printed beside the figures.
TARGET_RATIO = 2.5  # post_card sequential p50 within 2.5x of the bare no-op (with 10 secrets the same)
TARGET_OTHER_RATIO = 3.0  # send_file and send_message within 3x
TARGET_EFFECT_MS = 10.0  # effect visible in the thread, p50
TARGET_SHARE = 50.0  # calls/s at 20 clients, % of bare
TARGET_LAG_P99_MS = 100.0  # created -> applied p99 at 20 clients; and effects applied/s >= calls accepted/s


@dataclass
class Plan:
    warmup: int  # untimed calls on the sequential client before measuring
    sequential: int  # N, per tool
    clients: int
    concurrent_total: int  # calls per tool across all clients
    effect: int  # calls per Calvin tool in the effect-visible phase


FULL = Plan(warmup=50, sequential=1000, clients=20, concurrent_total=2000, effect=200)
QUICK = Plan(warmup=20, sequential=200, clients=20, concurrent_total=400, effect=50)


# ---------------------------------------------------------------- processes


class Processes:
    """Subprocesses this run started; each in its own process group, stopped on exit, its
    output in `logs`/<name>.log (each bench its own directory)."""

    def __init__(self, logs: Path = LOGS):
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = open(self.logs / f"{name}.log", "wb")  # the child keeps its own copy
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def check(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is not None:
            tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} exited with {proc.returncode}; log tail:\n{tail}")

    def stop(self, name: str, timeout: float = 20) -> None:
        proc = self.procs.pop(name)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)  # the group this run created for it
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(procs: Processes, name: str, port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check(name)
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on port {port} within {timeout} s")


WORKERS = 1  # web processes per server and Celery worker processes (--workers)


def uvicorn_cmd(app: str, port: int, *extra: str) -> list[str]:
    # Access logging off for both servers: it is a per-request cost of the bench, not of Calvin.
    return [
        str(BIN / "uvicorn"),
        app,
        *extra,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(WORKERS),
        "--lifespan",
        "on",
        "--no-access-log",
        "--log-level",
        "warning",
    ]


def worker_words() -> str:
    return "1 Celery worker, solo pool" if WORKERS == 1 else f"1 Celery worker, prefork pool of {WORKERS}"


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        one = todo.pop()
        found.append(one)
        todo.extend(children.get(one, ()))
    return found


# ---------------------------------------------------------------- Calvin's database and fixtures


def vault_key_ensure() -> None:
    """var/bench/vault_key: made once (mode 0600, O_EXCL), kept while it exists. Every run drops
    calvin_bench, so the key only has to last one run, but profile_post_card.py (after a run)
    and ask_tap.py read it too."""
    VAR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(VAULT_KEY, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(base64.urlsafe_b64encode(os.urandom(32)).decode() + "\n")  # as crypto.new_key()


def prepare_calvin(env: dict, sessions: int, secret_sessions: int = 0) -> dict:
    """A fresh calvin_bench database, Redis db 14 and var/bench; returns the fixtures:
    `sessions` runners without secrets, and `secret_sessions` whose sessions each have 10."""
    vault_key_ensure()
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    redis.Redis.from_url(REDIS_URL).flushdb()  # db 14 is the bench's alone (queue and channel layer)
    for sub in ("sessions", "media"):
        shutil.rmtree(VAR / sub, ignore_errors=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    out = VAR / "fixtures.json"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "setup_calvin.py"), str(sessions), str(out), str(secret_sessions)],
        env=env,
        check=True,
    )
    return json.loads(out.read_text())


def db() -> psycopg.Connection:
    return psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{DB_NAME}", autocommit=True)


async def wait_drained(timeout: float = 600) -> None:
    """Until the worker has applied every recorded call (nothing pending or applying)."""
    deadline = time.monotonic() + timeout
    with db() as conn:
        while True:
            (left,) = conn.execute(
                "SELECT count(*) FROM tools_toolcall WHERE status IN ('pending', 'applying')"
            ).fetchone()
            if left == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{left} tool calls still not applied after {timeout} s")
            await asyncio.sleep(0.05)


def max_tool_call_id() -> int:
    with db() as conn:
        return conn.execute("SELECT coalesce(max(id), 0) FROM tools_toolcall").fetchone()[0]


def worker_stats(after_id: int, tool: str) -> dict:
    """What the database saw of the calls after `after_id`: effects/s, and where the lag went.

    queue: created (web process) -> claimed (worker); apply: claimed -> applied, which includes
    the websocket push; lag: created -> applied.
    """
    with db() as conn:
        row = conn.execute(
            """
            SELECT count(*) FILTER (WHERE status = 'applied'),
                   count(*) FILTER (WHERE status <> 'applied'),
                   extract(epoch FROM max(finished_at) - min(created_at)),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - created_at)),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - claimed_at)),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at))
            FROM tools_toolcall WHERE id > %s AND tool = %s
            """,
            (after_id, tool),
        ).fetchone()
    applied, not_applied, span, queue, apply, lag50, lag99 = row

    def ms_or_none(seconds):
        return float(seconds) * 1000 if seconds is not None else None

    return {
        "applied": applied,
        "not_applied": not_applied,
        "effects_per_s": applied / float(span) if span else None,
        "queue_p50_ms": ms_or_none(queue),
        "apply_p50_ms": ms_or_none(apply),
        "lag_p50_ms": ms_or_none(lag50),
        "lag_p99_ms": ms_or_none(lag99),
    }


# ---------------------------------------------------------------- clients


class TokenPool:
    """Pre-issued runner tokens; each is handed out once per tool (its budget for that tool)."""

    def __init__(self, runners: list[dict]):
        self.runners = runners
        self.next: dict[str, int] = {}

    def take(self, tool: str) -> dict:
        i = self.next.get(tool, 0)
        if i >= len(self.runners):
            raise RuntimeError(f"token pool exhausted for {tool}: pre-issue more runners")
        self.next[tool] = i + 1
        return self.runners[i]


def shares(total: int, clients: int) -> list[int]:
    return [total // clients + (i < total % clients) for i in range(clients)]


def tokens_needed(plan: Plan) -> int:
    def runners(calls: int) -> int:
        return math.ceil(calls / PER_RUNNER)

    return (
        1
        + runners(plan.warmup + plan.sequential)
        + sum(runners(n + 1) for n in shares(plan.concurrent_total, plan.clients))
        + runners(plan.effect + 1)
        + runners(plan.warmup + plan.sequential)  # post_card with the worker paused
        + 2
    )


def secret_tokens_needed(plan: Plan) -> int:
    """Runners whose sessions have secrets: post_card sequential once more (and one spare)."""
    return math.ceil((plan.warmup + plan.sequential) / PER_RUNNER) + 1


class Agent:
    """One initialized MCP client session calling one tool; rotates runner tokens between calls."""

    def __init__(self, url: str, tool: str, pool: TokenPool | None = None, on_rotate=None):
        self.url, self.tool, self.pool, self.on_rotate = url, tool, pool, on_rotate
        self.runner: dict | None = None
        self.used = 0

    async def __aenter__(self):
        self.stack = contextlib.AsyncExitStack()
        self.http = await self.stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        if self.pool:
            await self._rotate()
        self.client = await self.stack.enter_async_context(
            Client(streamable_http_client(self.url, http_client=self.http), mode="legacy")
        )
        return self

    async def __aexit__(self, *exc):
        return await self.stack.__aexit__(*exc)

    async def _rotate(self):
        self.runner = self.pool.take(self.tool)
        # The transport reads the client's headers on every request: the next call uses this token.
        self.http.headers["Authorization"] = f"Bearer {self.runner['token']}"
        self.used = 0
        if self.on_rotate:
            await self.on_rotate(self.runner)

    async def prepare(self):
        """Untimed: a fresh runner when this one's budget is used."""
        if self.pool and self.used >= PER_RUNNER:
            await self._rotate()

    async def call(self, arguments: dict):
        """(round trip in s, perf_counter at return, result); the round trip is call_tool alone."""
        await self.prepare()
        t0 = time.perf_counter()
        result = await self.client.call_tool(self.tool, arguments)
        t1 = time.perf_counter()
        self.used += 1
        return t1 - t0, t1, result


def error_text(result) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)[:300]


class Markers:
    def __init__(self):
        self.run = uuid.uuid4().hex[:6]
        self.n = 0
        self.pattern = re.compile(rf"bm{self.run}n\d{{7}}")

    def new(self) -> str:
        self.n += 1
        return f"bm{self.run}n{self.n:07d}"


def card_arguments(marker: str) -> dict:
    return {
        "spec": {
            "root": "card",
            "elements": {
                "card": {"type": "Card", "props": {"title": f"Build {marker}"}, "children": ["status", "took"]},
                "status": {"type": "Field", "props": {"label": "Status", "value": "passed"}},
                "took": {"type": "Field", "props": {"label": "Duration", "value": "42 s"}},
            },
        }
    }


class ThreadWatcher:
    """Websockets on thread pages, as a logged-in member's browser; notes when each marker arrives."""

    def __init__(self, port: int, cookie: str, pattern: re.Pattern):
        self.port, self.cookie, self.pattern = port, cookie, pattern
        self.sockets: dict[int, object] = {}
        self.readers: list[asyncio.Task] = []
        self.arrived: dict[str, float] = {}
        self.waiting: dict[str, asyncio.Future] = {}

    async def watch(self, runner: dict) -> None:
        thread_id = runner["thread_id"]
        if thread_id in self.sockets:
            return
        ws = await ws_connect(
            f"ws://127.0.0.1:{self.port}/ws/threads/{thread_id}/",
            origin=f"http://127.0.0.1:{self.port}",
            additional_headers={"Cookie": self.cookie},
            max_size=None,
        )
        self.sockets[thread_id] = ws
        self.readers.append(asyncio.create_task(self._read(ws)))

    async def _read(self, ws) -> None:
        with contextlib.suppress(Exception):
            async for raw in ws:
                now = time.perf_counter()
                for marker in self.pattern.findall(json.loads(raw).get("html", "")):
                    self.arrived.setdefault(marker, now)
                    future = self.waiting.pop(marker, None)
                    if future and not future.done():
                        future.set_result(now)

    def expect(self, marker: str) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if marker in self.arrived:
            future.set_result(self.arrived[marker])
        else:
            self.waiting[marker] = future
        return future

    async def close(self) -> None:
        for ws in self.sockets.values():
            with contextlib.suppress(Exception):
                await ws.close()
        for task in self.readers:
            task.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)


# ---------------------------------------------------------------- measurements


@dataclass
class Row:
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    calls_per_s: float | None = None
    concurrent_latencies: list[float] = field(default_factory=list)
    effect: list[float] = field(default_factory=list)
    effect_missing: int = 0
    worker: dict | None = None  # during the 20-client phase
    effect_path: dict | None = None  # during the effect-visible phase
    first_calls: list[float] = field(default_factory=list)  # sequential: a fresh runner's first call

    def note(self, result) -> None:
        if result.is_error:
            self.errors += 1
            self.first_error = self.first_error or error_text(result)


async def sequential(agent: Agent, make_args, row: Row, warmup: int, n: int) -> None:
    for _ in range(warmup):
        _, _, result = await agent.call(make_args())
        row.note(result)
    for _ in range(n):
        await agent.prepare()
        first = agent.pool is not None and agent.used == 0  # a fresh runner (and session): its first call
        seconds, _, result = await agent.call(make_args())
        row.latencies.append(seconds)
        if first:
            row.first_calls.append(seconds)
        row.note(result)


async def concurrent(make_agent, make_args, row: Row, clients: int, total: int) -> None:
    """Each client: its own initialized session (and runner token), one untimed call, then its share."""
    barrier = asyncio.Barrier(clients + 1)
    finished: list[float] = []

    async def client(share: int) -> None:
        try:
            async with make_agent() as agent:
                _, _, result = await agent.call(make_args())
                row.note(result)
                await barrier.wait()
                for _ in range(share):
                    seconds, _, result = await agent.call(make_args())
                    row.concurrent_latencies.append(seconds)
                    row.note(result)
                finished.append(time.perf_counter())
        except BaseException:
            barrier.abort()
            raise

    tasks = [asyncio.create_task(client(share)) for share in shares(total, clients)]
    try:
        await barrier.wait()
    except asyncio.BrokenBarrierError:
        await asyncio.gather(*tasks)  # raises the client's own error
        raise
    start = time.perf_counter()
    await asyncio.gather(*tasks)
    row.calls_per_s = total / (max(finished) - start)


async def effect_visible(agent: Agent, watcher: ThreadWatcher, markers: Markers, make_args, row: Row, n: int) -> None:
    """One call at a time; the next only once this one's message reached the websocket (or 10 s)."""
    for _ in range(n):
        await agent.prepare()
        marker = markers.new()
        future = watcher.expect(marker)
        _, returned, result = await agent.call(make_args(marker))
        row.note(result)
        try:
            arrived = await asyncio.wait_for(future, timeout=10)
        except TimeoutError:
            row.effect_missing += 1
            watcher.waiting.pop(marker, None)
            continue
        row.effect.append(arrived - returned)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.2f}"


# ---------------------------------------------------------------- the run


def machine_info() -> dict:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }


async def bench(plan: Plan, procs: Processes) -> dict:
    markers = Markers()
    rows = {
        "noop": Row("bare no-op"),
        "post_card": Row("post_card"),
        "send_file": Row("send_file"),
        "send_message": Row("send_message"),
    }
    phase_seconds: dict[str, float] = {}

    def phase(name: str):
        print(f"  {name} ...", flush=True)
        phase_seconds[name] = time.monotonic()

    def phase_end(name: str):
        phase_seconds[name] = time.monotonic() - phase_seconds[name]

    # -- baseline
    bare_port = free_port()
    procs.start("bare", uvicorn_cmd("bare_server:app", bare_port, "--app-dir", str(ROOT / "bench")))
    wait_port(procs, "bare", bare_port)
    bare_url = f"http://127.0.0.1:{bare_port}/mcp"
    print(f"bare MCPServer on :{bare_port}", flush=True)

    def noop_args(_marker: str | None = None) -> dict:
        return {}

    phase("bare sequential")
    async with Agent(bare_url, "noop") as agent:
        await sequential(agent, noop_args, rows["noop"], plan.warmup, plan.sequential)
    phase_end("bare sequential")
    phase(f"bare {plan.clients} clients")
    await concurrent(lambda: Agent(bare_url, "noop"), noop_args, rows["noop"], plan.clients, plan.concurrent_total)
    phase_end(f"bare {plan.clients} clients")

    # -- Calvin
    env = {**os.environ, **CALVIN_ENV}
    t = time.monotonic()
    fixtures = prepare_calvin(env, tokens_needed(plan), secret_tokens_needed(plan))
    secret_count = fixtures["secrets_per_session"]
    print(
        f"calvin_bench migrated, {len(fixtures['runners'])} runner tokens issued, and "
        f"{len(fixtures['secret_runners'])} more whose sessions each have {secret_count} secrets "
        f"({time.monotonic() - t:.1f} s)"
    )
    pool = TokenPool(fixtures["runners"])
    secret_pool = TokenPool(fixtures["secret_runners"])
    with_secrets = Row(f"post_card, {secret_count} secrets")
    port = free_port()
    # Calvin as it is deployed: uvicorn through calvin.http_server (its capped-head protocol).
    calvin_cmd = [str(BIN / "python"), "-m", "calvin.http_server", "--port", str(port), "--workers", str(WORKERS)]
    procs.start("calvin", [*calvin_cmd, "--log-level", "warning", "--no-access-log"], env)
    procs.start(
        "worker",
        [
            str(BIN / "celery"),
            "-A",
            "calvin",
            "worker",
            *(["--pool", "solo"] if WORKERS == 1 else ["--pool", "prefork", "--concurrency", str(WORKERS)]),
            "-Q",
            QUEUE,
            "-n",
            f"bench-{markers.run}@%h",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "warning",
        ],
        env,
    )
    wait_port(procs, "calvin", port)
    url = f"http://127.0.0.1:{port}/mcp"
    print(f"calvin.asgi on :{port} ({WORKERS} web processes), {worker_words()} on queue {QUEUE}", flush=True)

    watcher = ThreadWatcher(port, fixtures["cookie"], markers.pattern)
    file_name = fixtures["file"]

    def post_card_args(marker: str | None = None) -> dict:
        return card_arguments(marker or markers.new())

    def send_file_args(marker: str | None = None) -> dict:
        return {"path": file_name, "comment": f"Report {marker or markers.new()}"}

    def send_message_args(marker: str | None = None) -> dict:
        return {"text": f"Update {marker or markers.new()}", "to": "thread"}

    # The calvin server's tools at /mcp; send_message is the nanoclaw server's, at /mcp/nanoclaw.
    tools = {"post_card": post_card_args, "send_file": send_file_args, "send_message": send_message_args}
    urls = {"post_card": url, "send_file": url, "send_message": f"{url}/nanoclaw"}
    try:
        # The worker and websocket path answer before anything is timed (first effect: up to 60 s).
        async with Agent(url, "post_card", pool, on_rotate=watcher.watch) as probe:
            marker = markers.new()
            future = watcher.expect(marker)
            _, _, result = await probe.call(post_card_args(marker))
            if result.is_error:
                raise RuntimeError(f"post_card failed: {error_text(result)}")
            await asyncio.wait_for(future, timeout=60)
        # The sessions with secrets are checked: a card holding one of the values is refused
        # (on a session of its own, not one of the timed ones).
        probe = fixtures["secret_probe"]
        async with Agent(url, "post_card", TokenPool([probe])) as agent:
            _, _, result = await agent.call(card_arguments(f"leak {probe['secret_value']}"))
        if not result.is_error or probe["secret_name"] not in error_text(result):
            raise RuntimeError(f"a card holding {probe['secret_name']}'s value was not refused: {error_text(result)}")

        for name, make_args in tools.items():
            phase(f"{name} sequential")
            async with Agent(urls[name], name, pool) as agent:
                await sequential(agent, make_args, rows[name], plan.warmup, plan.sequential)
            phase_end(f"{name} sequential")
            await wait_drained()
            if name == "post_card":
                # Not a column: the same again on sessions with secrets in scope, so every call
                # also reads, decrypts and scans for them; right after the row without secrets,
                # so both see the same machine state.
                phase(f"post_card sequential, {secret_count} secrets")
                async with Agent(url, "post_card", secret_pool) as agent:
                    await sequential(agent, post_card_args, with_secrets, plan.warmup, plan.sequential)
                phase_end(f"post_card sequential, {secret_count} secrets")
                await wait_drained()

        # Not a column: the same sequential post_card with the worker stopped (SIGSTOP), to tell
        # the web process's own cost from the CPU the worker takes beside it on this machine.
        phase("post_card sequential, worker paused")
        paused = Row("post_card, worker paused")
        worker_pids = process_tree(procs.procs["worker"].pid)  # a prefork pool's children too
        for pid in worker_pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            async with Agent(url, "post_card", pool) as agent:
                await sequential(agent, post_card_args, paused, plan.warmup, plan.sequential)
        finally:
            for pid in worker_pids:
                os.kill(pid, signal.SIGCONT)
        phase_end("post_card sequential, worker paused")
        await wait_drained()

        for name, make_args in tools.items():
            phase(f"{name} {plan.clients} clients")
            after = max_tool_call_id()
            await concurrent(
                lambda name=name: Agent(urls[name], name, pool),
                make_args,
                rows[name],
                plan.clients,
                plan.concurrent_total,
            )
            phase_end(f"{name} {plan.clients} clients")
            await wait_drained()
            rows[name].worker = worker_stats(after, name)

        for name, make_args in tools.items():
            phase(f"{name} effect visible")
            after = max_tool_call_id()
            async with Agent(urls[name], name, pool, on_rotate=watcher.watch) as agent:
                await effect_visible(agent, watcher, markers, make_args, rows[name], plan.effect)
            phase_end(f"{name} effect visible")
            await wait_drained()
            rows[name].effect_path = worker_stats(after, name)
    finally:
        await watcher.close()
    procs.check("calvin")
    procs.check("worker")
    return {
        "rows": rows,
        "paused": paused,
        "with_secrets": with_secrets,
        "secrets_per_session": secret_count,
        "phase_seconds": phase_seconds,
    }


def report(plan: Plan, info: dict, out: dict, elapsed: float) -> dict:
    rows: dict[str, Row] = out["rows"]
    print()
    print(
        f"Machine: {info['cpus']} CPUs ({info['cpu_model']}), Python {info['python']}, "
        f"load at start {', '.join(f'{x:.2f}' for x in info['loadavg_at_start'])}"
    )
    print(
        f"N = {plan.sequential} sequential calls per tool (after {plan.warmup} warm-up calls), "
        f"{plan.concurrent_total} calls per tool over {plan.clients} concurrent clients, "
        f"{plan.effect} effect-visible calls per Calvin tool"
    )
    print(f"Servers: uvicorn, {WORKERS} web processes each (uvloop, httptools); Calvin's effects: {worker_words()}")
    print()
    header = (
        f"{'':<12}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}{'effect p50':>12}{'effect p99':>12}"
        f"{'p50 ms':>10}{'errors':>8}"
    )
    print(header)
    print(f"{'':<12}{'(seq)':>9}{'(seq)':>9}{'(20 cl)':>10}{'ms':>12}{'ms':>12}{'(20 cl)':>10}{'':>8}")
    print("-" * len(header))
    for row in rows.values():
        cps = f"{row.calls_per_s:.0f}" if row.calls_per_s else "-"
        errors = row.errors + row.effect_missing
        print(
            f"{row.name:<12}{ms(pct(row.latencies, 50)):>9}{ms(pct(row.latencies, 99)):>9}{cps:>10}"
            f"{ms(pct(row.effect, 50)):>12}{ms(pct(row.effect, 99)):>12}"
            f"{ms(pct(row.concurrent_latencies, 50)):>10}{errors:>8}"
        )
    print()
    bare = pct(rows["noop"].latencies, 50)
    card = pct(rows["post_card"].latencies, 50)
    ratio = card / bare
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    secret_count = out["secrets_per_session"]
    with_secrets: Row = out["with_secrets"]
    secrets_p50 = pct(with_secrets.latencies, 50)
    secrets_ratio = secrets_p50 / bare
    secrets_verdict = "met" if secrets_ratio <= TARGET_RATIO else "NOT met"
    print(
        f"post_card p50 / bare p50 = {ratio:.2f}x without secrets, {secrets_ratio:.2f}x with {secret_count} "
        f"secrets in scope   (target <= {TARGET_RATIO:g}x: {verdict}, {secrets_verdict})"
    )
    for row in (rows["post_card"], with_secrets):
        print(
            f"  {row.name}: p50 {ms(pct(row.latencies, 50))} ms, p99 {ms(pct(row.latencies, 99))} ms "
            f"({row.errors} errors); a fresh session's first call ({len(row.first_calls)} of them): "
            f"p50 {ms(pct(row.first_calls, 50))} ms"
        )
    for name in ("send_file", "send_message"):
        other = pct(rows[name].latencies, 50) / bare
        verdict = "met" if other <= TARGET_OTHER_RATIO else "NOT met"
        print(f"{name} p50 / bare p50 = {other:.2f}x   (target <= {TARGET_OTHER_RATIO:g}x: {verdict})")
    paused = out["paused"]
    paused_p50 = pct(paused.latencies, 50)
    print(
        f"post_card with the worker paused: p50 {ms(paused_p50)} ms, p99 {ms(pct(paused.latencies, 99))} ms "
        f"= {paused_p50 / bare:.2f}x bare ({paused.errors} errors)"
    )
    for name in ("post_card", "send_file", "send_message"):
        p50 = pct(rows[name].effect, 50)
        verdict = "met" if p50 is not None and p50 * 1000 < TARGET_EFFECT_MS else "NOT met"
        print(f"{name} effect visible p50 = {ms(p50)} ms   (target < {TARGET_EFFECT_MS:g} ms: {verdict})")
    bare_cps = rows["noop"].calls_per_s
    for name in ("post_card", "send_file", "send_message"):
        share = 100 * rows[name].calls_per_s / bare_cps
        verdict = "met" if share >= TARGET_SHARE else "NOT met"
        print(
            f"{name} calls/s at {plan.clients} clients = {share:.0f} % of bare   "
            f"(target >= {TARGET_SHARE:g} %: {verdict})"
        )
    print()
    print("From the database (created = recorded by the web process, claimed = picked up by the worker):")
    for name in ("post_card", "send_file", "send_message"):
        e = rows[name].effect_path
        print(
            f"  {name}, one call at a time: created->claimed p50 {e['queue_p50_ms']:.1f} ms, "
            f"claimed->applied p50 {e['apply_p50_ms']:.1f} ms"
        )
    for name in ("post_card", "send_file", "send_message"):
        w = rows[name].worker
        keeps_up = w["effects_per_s"] >= rows[name].calls_per_s and w["lag_p99_ms"] < TARGET_LAG_P99_MS
        print(
            f"  {name}, {plan.clients} clients: worker applied {w['applied']} ({w['not_applied']} not applied) "
            f"at {w['effects_per_s']:.0f} effects/s against {rows[name].calls_per_s:.0f} calls/s accepted; "
            f"created->applied p50 {w['lag_p50_ms']:.0f} ms, p99 {w['lag_p99_ms']:.0f} ms   (target: keeps up, "
            f"p99 < {TARGET_LAG_P99_MS:g} ms: {'met' if keeps_up else 'NOT met'})"
        )
    for row in (*rows.values(), paused, with_secrets):
        if row.first_error:
            print(f"first error from {row.name}: {row.first_error}")
        if row.effect_missing:
            print(f"{row.name}: {row.effect_missing} effects not seen on the websocket within 10 s")
    print()
    print("Phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in out["phase_seconds"].items()))
    print(f"Total run time: {elapsed:.1f} s")
    summary = {
        "machine": info,
        "plan": plan.__dict__,
        "workers": WORKERS,
        "elapsed_s": elapsed,
        "phase_seconds": out["phase_seconds"],
        "ratio_post_card_to_bare_p50": ratio,
        "ratio_post_card_secrets_to_bare_p50": secrets_ratio,
        "post_card_secrets": {
            "secrets_per_session": secret_count,
            "p50_ms": secrets_p50 * 1000,
            "p99_ms": pct(with_secrets.latencies, 99) * 1000,
            "errors": with_secrets.errors,
            "first_call_p50_ms": (pct(with_secrets.first_calls, 50) or 0) * 1000,
            "first_calls": len(with_secrets.first_calls),
            "without_secrets_first_call_p50_ms": (pct(rows["post_card"].first_calls, 50) or 0) * 1000,
        },
        "post_card_worker_paused": {
            "p50_ms": paused_p50 * 1000,
            "p99_ms": pct(paused.latencies, 99) * 1000,
            "errors": paused.errors,
        },
        "rows": {
            key: {
                "p50_ms": (pct(r.latencies, 50) or 0) * 1000,
                "p99_ms": (pct(r.latencies, 99) or 0) * 1000,
                "calls_per_s_20_clients": r.calls_per_s,
                "p50_ms_under_20_clients": (pct(r.concurrent_latencies, 50) or 0) * 1000,
                "effect_p50_ms": pct(r.effect, 50) * 1000 if r.effect else None,
                "effect_p99_ms": pct(r.effect, 99) * 1000 if r.effect else None,
                "errors": r.errors,
                "effects_missing": r.effect_missing,
                "worker_20_clients": r.worker,
                "effect_path": r.effect_path,
            }
            for key, r in rows.items()
        },
    }
    (VAR / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"(also written to {VAR.relative_to(ROOT) / 'results.json'}; process logs in {LOGS.relative_to(ROOT)})")
    return summary


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller run (N=200; 400 calls over 20 clients)")
    parser.add_argument(
        "--workers", type=int, default=1, help="web processes for each server, and Celery worker processes (default 1)"
    )
    args = parser.parse_args()
    global WORKERS
    WORKERS = max(1, args.workers)
    plan = QUICK if args.quick else FULL
    os.chdir(ROOT)
    VAR.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    info = machine_info()
    procs = Processes()
    started = time.monotonic()
    try:
        out = asyncio.run(bench(plan, procs))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
    report(plan, info, out, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
