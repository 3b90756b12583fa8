"""read_thread on a 1,000-message web thread, over real MCP HTTP, beside baselines in the same run.

    .venv/bin/python bench/read_thread.py [--calls 500] [--messages 1000]

Starts Calvin as bench/run.py does (`python -m calvin.http_server`, one worker; one Celery worker,
solo pool), but on a database, Redis db and var directory of its own (calvin_bench_threads,
Redis db 12, var/bench-threads), so it can run beside run.py or ask_tap.py. One session's thread
gets `--messages` delivered messages (people and the agent, 40 to 600 characters each); other
sessions of the same workspace read it by its link, a fresh runner every 40 calls (read_thread's
per-runner limit), outside the timed call. Timed, one call at a time and interleaved round by
round after warm-up: read_thread, a bare tools/list through the same auth, and post_card (the
call returns once recorded; its effect is the worker's). Prints p50 / p99 / max per row.
Process logs go to var/bench/logs/ (bench/run.py's Processes), overwriting an earlier run's.
"""

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import psycopg
import redis
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ask_tap import start_calvin, wait_listening  # noqa: E402
from run import PG_ADMIN, ROOT, Processes, card_arguments, machine_info, ms, pct  # noqa: E402

VAR = ROOT / "var" / "bench-threads"
DB_NAME = "calvin_bench_threads"
REDIS_URL = "redis://127.0.0.1:6379/12"
QUEUE = "calvin-bench"  # the queue ask_tap.start_calvin's worker takes, on this bench's own Redis db
ENV = {
    "DJANGO_SETTINGS_MODULE": "calvin.settings",
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": REDIS_URL,
    "CALVIN_QUEUE": QUEUE,
    "CALVIN_CHANNEL_PREFIX": "calvin-bench-threads",
    "CALVIN_VAR_DIR": str(VAR),
    "CALVIN_SESSIONS_DIR": str(VAR / "sessions"),
    "CALVIN_PUBLIC_URL": "",  # links are http://localhost:8000/threads/<id>/, which the gateway takes as its own
    "SP_STORE_KEY": "",  # the settings read CALVIN_VAR_DIR/vault_key (made below), never the shell's key
    "PYTHONUNBUFFERED": "1",
}
LIMITS = {"read_thread": 40, "post_card": 50}  # per runner (tools/limits.py)
WARMUP = 20


def prepare(env: dict, runners: int) -> dict:
    VAR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(VAR / "vault_key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(base64.urlsafe_b64encode(os.urandom(32)).decode() + "\n")
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    redis.Redis.from_url(REDIS_URL).flushdb()  # db 12 is this bench's alone
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    out = VAR / "fixtures.json"
    setup = ROOT / "bench" / "setup_calvin.py"
    subprocess.run([sys.executable, str(setup), str(runners), str(out)], env=env, check=True)
    return json.loads(out.read_text())


def fill_thread(thread_id: int, count: int) -> None:
    """Run in a child with the bench's environment: `count` delivered messages in the thread."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from calvin.workspaces.models import Member
    from sessions.models import Message, Thread

    thread = Thread.objects.get(id=thread_id)
    member = Member.objects.filter(workspace_id=thread.workspace_id).first()
    rnd = random.Random(7)
    words = "the build failed on the runner so we retried the deploy after the fix landed in main".split()
    rows = []
    for n in range(count):
        text = " ".join(rnd.choices(words, k=rnd.randint(8, 110)))[:600]
        person = n % 3 == 0
        rows.append(
            Message(thread=thread, author="person" if person else "agent", member=member if person else None, text=text)
        )
    Message.objects.bulk_create(rows, batch_size=500)


class Caller:
    """One initialized MCP client session for one tool; a fresh runner token when the last is used up."""

    def __init__(self, url: str, tool: str, runners: list[dict]):
        self.url, self.tool, self.runners = url, tool, iter(runners)
        self.used = 0

    async def __aenter__(self):
        self.stack = contextlib.AsyncExitStack()
        self.http = await self.stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        self._rotate()
        self.client = await self.stack.enter_async_context(
            Client(streamable_http_client(self.url, http_client=self.http), mode="legacy")
        )
        return self

    async def __aexit__(self, *exc):
        return await self.stack.__aexit__(*exc)

    def _rotate(self):
        self.http.headers["Authorization"] = f"Bearer {next(self.runners)['token']}"
        self.used = 0

    async def timed(self, arguments: dict | None) -> float:
        if self.tool in LIMITS and self.used >= LIMITS[self.tool]:
            self._rotate()  # untimed
        t0 = time.perf_counter()
        if arguments is None:
            await self.client.list_tools()
        else:
            result = await self.client.call_tool(self.tool, arguments)
            if result.is_error:
                raise RuntimeError(f"{self.tool}: {' '.join(getattr(p, 'text', '') for p in result.content)[:300]}")
        elapsed = time.perf_counter() - t0
        self.used += 1
        return elapsed


async def bench(procs: Processes, calls: int, messages: int) -> dict:
    env = {**os.environ, **ENV}
    per = {tool: -(-(WARMUP + calls + 1) // limit) for tool, limit in LIMITS.items()}
    fixtures = prepare(env, 1 + sum(per.values()))
    target, rest = fixtures["runners"][0], fixtures["runners"][1:]
    readers, carders = rest[: per["read_thread"]], rest[per["read_thread"] :]
    subprocess.run(
        [sys.executable, __file__, "--fill", str(target["thread_id"]), str(messages)], env=env, check=True, cwd=ROOT
    )
    port = start_calvin(procs, env)
    await wait_listening(procs, port)
    url = f"http://127.0.0.1:{port}/mcp"
    link = {"url": f"http://localhost:8000/threads/{target['thread_id']}/"}
    rows = {"read_thread": [], "tools/list": [], "post_card": []}
    async with (
        Caller(url, "read_thread", readers) as reader,
        Caller(url, "tools/list", [target]) as lister,
        Caller(url, "post_card", carders) as carder,
    ):
        sample = await reader.client.call_tool("read_thread", link)
        reader.used += 1
        answer = sample.content[0].text
        for n in range(WARMUP + calls):
            timings = (
                await reader.timed(link),
                await lister.timed(None),
                await carder.timed(card_arguments(f"bench {n}")),
            )
            if n >= WARMUP:
                for row, value in zip(rows, timings, strict=True):
                    rows[row].append(value)
    procs.check("calvin")
    return {"rows": rows, "answer_chars": len(answer), "answer_head": answer.splitlines()[3]}


def report(info: dict, out: dict, calls: int, messages: int) -> None:
    print()
    print(f"Machine: {info['cpus']} CPUs ({info['cpu_model']}), Python {info['python']}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in info['loadavg_at_start'])}")
    print(f"{calls} calls per row, one at a time, interleaved (after {WARMUP} warm-up rounds)")
    print(f"read_thread answer: {out['answer_chars']:,} characters; {out['answer_head']}")
    print(f"{'row':<34} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    names = {
        "read_thread": f"read_thread ({messages:,}-message thread)",
        "tools/list": "tools/list (baseline)",
        "post_card": "post_card (baseline)",
    }
    for row, values in out["rows"].items():
        print(f"{names[row]:<34} {ms(pct(values, 50)):>8} {ms(pct(values, 99)):>8} {ms(max(values)):>8}")
    base = pct(out["rows"]["tools/list"], 50)
    print(f"read_thread p50 / tools/list p50: {pct(out['rows']['read_thread'], 50) / base:.2f}x")


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per row (default 500)")
    parser.add_argument("--messages", type=int, default=1000, help="messages in the thread read (default 1000)")
    parser.add_argument("--fill", nargs=2, type=int, metavar=("THREAD", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill_thread(*args.fill)
        return 0
    os.chdir(ROOT)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    info = machine_info()
    procs = Processes()
    try:
        out = asyncio.run(bench(procs, args.calls, args.messages))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
    report(info, out, args.calls, args.messages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
