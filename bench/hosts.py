"""Hosts and runners, measured: message → agent process started, host memory per idle
session, and send_file's bytes through the host connection next to the direct read.

    .venv/bin/python bench/hosts.py [--quick]

Starts a gateway (uvicorn serving calvin.asgi, one worker) and one `manage.py host` daemon
(capacity 8, its own directory, none of the gateway's credentials) on a fresh database
`calvin_bench_hosts` and Redis db 13. This process is Django too (same database), so it
posts messages through the same service the web view calls. See bench/README.md.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
VAR = ROOT / "var" / "bench-hosts"
DB_NAME = "calvin_bench_hosts"
REDIS_URL = "redis://127.0.0.1:6379/13"


def bench_environment(*, db_name: str, redis_url: str, name: str, var: Path, sessions: str = "gateway-sessions"):
    """A bench's processes' environment: a database, Redis db, queue and var directory of its
    own; the vault key is read from `var` (prepare makes it)."""
    return {
        "DJANGO_SETTINGS_MODULE": "calvin.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db_name}",
        "REDIS_URL": redis_url,
        "CALVIN_QUEUE": name,
        "CALVIN_CHANNEL_PREFIX": name,
        "CALVIN_VAR_DIR": str(var),
        "CALVIN_SESSIONS_DIR": str(var / sessions),
        "SP_STORE_KEY": "",
        "PYTHONUNBUFFERED": "1",
    }


ENV = bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name="calvin-bench-hosts", var=VAR)
os.environ.update(ENV)

from run import BIN, Processes, free_port, uvicorn_cmd, wait_port  # noqa: E402


def solo_worker_cmd(queue: str, node: str) -> list[str]:
    """One quiet Celery worker (solo pool) on the bench's queue."""
    quiet = ["--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "warning"]
    return [str(BIN / "celery"), "-A", "calvin", "worker", "--pool", "solo", "-Q", queue, "-n", node, *quiet]


def prepare(db_name: str = DB_NAME, redis_url: str = REDIS_URL, var: Path = VAR) -> None:
    """A fresh database, Redis db and var directory, a vault key, and the schema."""
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {db_name}")
    redis.Redis.from_url(redis_url).flushdb()
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    key = var / "vault_key"
    key.write_text(
        subprocess.check_output(
            [sys.executable, "manage.py", "vault_key"], cwd=ROOT, text=True, stderr=subprocess.DEVNULL
        )
    )
    key.chmod(0o600)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=os.environ, check=True
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float]) -> str:
    return f"{name:<48} p50 {pct(values, 0.5):8.1f} ms   p99 {pct(values, 0.99):8.1f} ms   n={len(values)}"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.005)
    return value


async def call_many(url: str, token: str, tool: str, arguments: dict, calls: int) -> list[float]:
    """`calls` sequential calls on one MCP client session; each call's round trip in ms."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    latencies = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            for _ in range(calls):
                t0 = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                latencies.append((time.perf_counter() - t0) * 1000)
                if result.is_error:
                    raise RuntimeError(f"{tool} refused: {result.content}")
    return latencies


def gateway_and_host_start(procs: Processes, *, host, token: str, directory: Path, capacity: int = 8):
    """A gateway (uvicorn, one worker) and one `manage.py host` daemon holding none of the
    gateway's credentials; returns the gateway's port and the daemon once it is connected."""
    port = free_port()
    procs.start("gateway", uvicorn_cmd("calvin.asgi:application", port), env=os.environ.copy())
    wait_port(procs, "gateway", port)
    host_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SP_STORE_KEY")}
    host_env["CALVIN_HOST_TOKEN"] = token
    daemon = procs.start(
        "host",
        [sys.executable, "manage.py", "host", "--gateway", f"http://127.0.0.1:{port}", "--name", host.name]
        + ["--capacity", str(capacity), "--dir", str(directory)],
        env=host_env,
    )
    wait(lambda: host.__class__.objects.get(id=host.id).channel_name, timeout=30)
    return port, daemon


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 30 if args.quick else 100
    idle = 40 if args.quick else 200
    prepare()

    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per MCP request otherwise
    from calvin.workspaces.models import Agent, Member
    from calvin.workspaces.services import workspace_create
    from sessions.hosts import host_create
    from sessions.models import Message, Turn
    from sessions.services import message_post_by_person, runner_start, session_start

    workspace = workspace_create(name="Bench", slug="bench")
    owner = Member.objects.create(workspace=workspace, display_name="bench")
    workspace.quota.turns_per_day = workspace.quota.tool_calls_per_day = 10**6
    workspace.quota.concurrent_sessions = 1000
    workspace.quota.save()
    # The agent prints when its process began: `date` runs right after exec.
    agent = Agent.objects.create(
        workspace=workspace, name="clock", provider="command", provider_command=["date", "+%s.%N"], tool_sets=["calvin"]
    )
    host, token = host_create(name="bench-host")

    procs = Processes()
    try:
        port, daemon = gateway_and_host_start(procs, host=host, token=token, directory=VAR / "host")
        print(f"host daemon connected (pid {daemon.pid}); sandbox {host.__class__.objects.get(id=host.id).sandbox}")

        # 1. message → agent process started, against spawning the same command directly.
        started = []
        session = session_start(workspace=workspace, owner=owner, agent=agent, title="clock")
        for i in range(n + 3):
            before = Message.objects.filter(thread=session.thread, author="agent").count()
            t0 = time.time()
            message_post_by_person(thread=session.thread, member=owner, text=f"tick {i}")
            reply = wait(
                lambda b=before: (
                    Message.objects.filter(thread=session.thread, author="agent").order_by("id")[b:].first()
                )
            )
            if i >= 3:  # warm-up: the first turns start the runner
                started.append((float(reply.text.strip()) - t0) * 1000)
            wait(lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists())
        direct = []
        for _ in range(n):
            t0 = time.time()
            out = subprocess.run(["date", "+%s.%N"], capture_output=True, text=True, env={}).stdout
            direct.append((float(out) - t0) * 1000)
        print(row("thread message → agent process started", started))
        print(row("baseline: subprocess.run of the same command", direct))

        # 2. host memory per idle session: sessions that ran one turn and wait for the next.
        base_rss = rss_kib(daemon.pid)
        sessions = [
            session_start(workspace=workspace, owner=owner, agent=agent, title=f"idle {i}") for i in range(idle)
        ]
        for s in sessions:
            message_post_by_person(thread=s.thread, member=owner, text="once")
        wait(lambda: Turn.objects.filter(session__in=sessions, status="done").count() == idle, timeout=600)
        time.sleep(1)
        after_rss = rss_kib(daemon.pid)
        per = (after_rss - base_rss) / idle
        print(
            f"host memory per idle session: {per:.1f} KiB ({idle} sessions; daemon RSS {base_rss / 1024:.1f} →"
            f" {after_rss / 1024:.1f} MiB)"
        )

        # 3. send_file: bytes through the host connection against a session whose directory is local.
        from sessions.models import Session

        hosted = Session.objects.get(id=session.id)  # runs on the host; its directory is there
        (VAR / "host" / "sessions" / f"session-{hosted.id}" / "f.bin").write_bytes(os.urandom(64 * 1024))
        local = session_start(workspace=workspace, owner=owner, agent=agent, title="local")
        Path(local.directory, "f.bin").write_bytes(os.urandom(64 * 1024))
        url = f"http://127.0.0.1:{port}/mcp"
        results = {}
        for name, target in (("via host", hosted), ("direct read (gateway-local session)", local)):
            latencies = []
            for _ in range(max(1, n // 50) + 1):
                _, tok = runner_start(session=target, host=target.host)
                latencies += asyncio.run(call_many(url, tok, "send_file", {"path": "f.bin"}, 50))
            results[name] = latencies[3:]
        for name, latencies in results.items():
            print(row(f"send_file 64 KiB, {name}", latencies))
        summary = {
            "message_to_process_ms": {"p50": pct(started, 0.5), "p99": pct(started, 0.99)},
            "direct_spawn_ms": {"p50": pct(direct, 0.5), "p99": pct(direct, 0.99)},
            "idle_session_kib": per,
            "send_file_ms": {k: {"p50": pct(v, 0.5), "p99": pct(v, 0.99)} for k, v in results.items()},
            "stdev_message_ms": statistics.pstdev(started),
        }
        (VAR / "results.json").write_text(json.dumps(summary, indent=2))
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
