"""The web process's memory: with many live sessions, and per thread-page websocket.

    .venv/bin/python bench/memory.py            # 1,000 live sessions, then 500 websockets (about 3 min)
    .venv/bin/python bench/memory.py --quick    # 250 sessions, then 250 websockets (about 2 min)
    .venv/bin/python bench/memory.py --no-deflate   # the websockets do not offer permessage-deflate
    .venv/bin/python bench/memory.py --quick --trace  # diagnostic: under tracemalloc (about 8 min)

Options: --sessions N, --sockets N, --clients N (MCP clients calling at once, 8),
--at-once N (websockets opening and closing at once, 20); BENCH_MEMORY_TRACE_FRAMES (8) is
the depth of tracemalloc's tracebacks with --trace.

Targets (the performance issue): the web process's RSS with 1,000 live sessions (each with a
token used in the last minute) under 200 MB; one websocket per thread page under 100 KB.

Starts Calvin as bench/run.py does (`python -m calvin.http_server`, one uvicorn worker, and
one Celery worker, solo pool, for post_card's effects) on a database, Redis db, prefix and
var directory of its own (calvin_bench_memory, Redis db 11, calvin-bench-memory,
var/bench-memory/, vault key var/bench-memory/vault_key made once, mode 0600), so it can run
beside bench/run.py. The fixtures are bench/setup_calvin.py's: one member, and sessions each
with its own runner token and thread (issued before anything is measured).

1. Live sessions. RSS (VmRSS of /proc/<pid>/status) once listening and after a warm-up
   (a few sessions' calls); then every session's token makes a real MCP call (an initialized
   client of its own, then one post_card, as an agent's first call), a few clients at a time,
   in four equal steps with the RSS after each; then the same sessions call once more
   (all within a minute) and the RSS is read again. Printed: RSS at each step, growth per
   session, against the 200 MB target (MiB: 1 MB = 2^20 bytes here, as RSS is counted).
2. Websockets. After the worker has applied every card (so each thread has a logged event),
   the member's browser session (setup_calvin's cookie) opens `ws://.../ws/threads/<id>/`
   on different threads, a few at a time, each sending {"since": 0} as the page does on
   open; a socket counts as accepted once its first frame (the catch-up) arrived. In four
   steps with the RSS after each; held for a few seconds (the consumer's 5 s look for lost
   pushes runs), checked still open and in their Channels groups (Redis), RSS read again:
   (RSS with them - RSS before) / count = bytes per websocket, against 100 KB (KiB). Then
   closed (as many at a time as opened), and once the server left their groups (or 15 s)
   the RSS read again; then the same threads opened again, held, and closed all at once
   (a proxy or network dropping them): whether what the first wave kept is reused or kept
   again. The thread-group members the server did not remove after each close, and the
   web process's logged exceptions, are printed too.

With --trace the web process runs under tracemalloc (this file's --serve-traced wrapper
around calvin.http_server): snapshots at the checkpoints, and the growth between them is
printed by line, file and stack; at the end one more snapshot after a full gc.collect() in
the web process (what is still alive: a leak, or garbage waiting for the cyclic collector).
Its RSS figures include tracemalloc's own cost: read them for where the memory goes, not
against the targets (the verdicts say "not judged").

Figures also go to var/bench-memory/results.json; process logs to var/bench-memory/logs/.
"""

import argparse
import asyncio
import base64
import contextlib
import gc
import json
import os
import resource
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VAR = ROOT / "var" / "bench-memory"
LOGS = VAR / "logs"
TRACES = VAR / "traces"
DB_NAME = "calvin_bench_memory"
REDIS_URL = "redis://127.0.0.1:6379/11"
PREFIX = "calvin-bench-memory"
QUEUE = "calvin-bench-memory"

ENV = {
    "DJANGO_SETTINGS_MODULE": "calvin.settings",
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": REDIS_URL,
    "CALVIN_QUEUE": QUEUE,
    "CALVIN_CHANNEL_PREFIX": PREFIX,
    "CALVIN_VAR_DIR": str(VAR),
    "CALVIN_SESSIONS_DIR": str(VAR / "sessions"),
    # Empty: the settings read CALVIN_VAR_DIR/vault_key (made below), never the shell's key.
    # A hosted gateway with DATABASE_URL does not start without one.
    "SP_STORE_KEY": "",
    "PYTHONUNBUFFERED": "1",
}

MiB = 1024 * 1024
TARGET_RSS = 200 * MiB  # web process with 1,000 live sessions
TARGET_SOCKET = 100 * 1024  # per thread-page websocket
TARGET_SESSIONS = 1000
LIVE_SECONDS = 60  # "a token used in the last minute"
WARMUP_SESSIONS = 5
STEPS = 4


# ---------------------------------------------------------------- the traced web process


def serve_traced(argv: list[str]) -> None:
    """Diagnostic entry point: calvin.http_server under tracemalloc; SIGUSR1 writes a snapshot
    to var/bench-memory/traces/<n>.snap (n = 1, 2, ...), whole once its name appears; SIGUSR2
    runs a full gc.collect() first (and writes what it freed to <n>.gc)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")
    tracemalloc.start(int(os.environ.get("BENCH_MEMORY_TRACE_FRAMES", "8")))
    count = 0

    def dump(signum, _frame):
        nonlocal count
        count += 1
        if signum == signal.SIGUSR2:
            (TRACES / f"{count}.gc").write_text(str(gc.collect()))
        snapshot = tracemalloc.take_snapshot()
        tmp = TRACES / f"{count}.tmp"
        snapshot.dump(str(tmp))
        tmp.rename(TRACES / f"{count}.snap")

    signal.signal(signal.SIGUSR1, dump)
    signal.signal(signal.SIGUSR2, dump)
    from calvin.http_server import main as http_main

    http_main(argv)


if __name__ == "__main__" and sys.argv[1:2] == ["--serve-traced"]:
    serve_traced(sys.argv[2:])
    sys.exit(0)


# ---------------------------------------------------------------- the bench

import httpx2  # noqa: E402
import psycopg  # noqa: E402
import redis  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from websockets.asyncio.client import connect as ws_connect  # noqa: E402
from websockets.protocol import State  # noqa: E402

sys.path.insert(0, str(BENCH))

import run  # noqa: E402
from run import BIN, PG_ADMIN, card_arguments, error_text, free_port, machine_info, wait_port  # noqa: E402


def memory_of(pid: int) -> dict:
    """VmRSS, VmHWM (peak RSS), RssAnon, RssFile, RssShmem in bytes, and Threads, from /proc."""
    wanted = {"VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"}
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            parts = value.split()
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / MiB:.1f}"


def kib(n: float | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f}"


def vault_key_ensure() -> None:
    """var/bench-memory/vault_key: made once (mode 0600, O_EXCL) as bench/run.py makes its own."""
    VAR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(VAR / "vault_key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(base64.urlsafe_b64encode(os.urandom(32)).decode() + "\n")


def redis_clear() -> int:
    """Only this bench's keys: Redis db 11 is also bench/api.py's and bench/repositories.py's."""
    client = redis.Redis.from_url(REDIS_URL)
    keys = [*client.scan_iter(f"{PREFIX}*", count=1000), *client.scan_iter(f"_kombu.binding.{QUEUE}*")]
    for i in range(0, len(keys), 500):
        client.delete(*keys[i : i + 500])
    return len(keys)


def prepare(env: dict, sessions: int) -> dict:
    """A fresh calvin_bench_memory, this bench's Redis keys gone, and the fixtures."""
    vault_key_ensure()
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    redis_clear()
    for sub in ("sessions", "media", "traces"):
        subprocess.run(["rm", "-rf", str(VAR / sub)], check=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    out = VAR / "fixtures.json"
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / "setup.log", "wb") as log:  # its logins' lines (django-axes) go there, not here
        subprocess.run(
            [sys.executable, str(BENCH / "setup_calvin.py"), str(sessions), str(out)],
            env=env,
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return json.loads(out.read_text())


def import_only_rss(env: dict) -> int:
    """RSS of a Python process that imported calvin.asgi (Django set up, both MCP servers built)
    and served nothing: what the code alone costs."""
    code = (
        "import calvin.asgi, pathlib\n"
        "for line in pathlib.Path('/proc/self/status').read_text().splitlines():\n"
        "    if line.startswith('VmRSS:'): print(int(line.split()[1]) * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


def db_scalar(sql: str):
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{DB_NAME}", autocommit=True) as conn:
        return conn.execute(sql).fetchone()[0]


async def wait_applied(expected: int, timeout: float = 180) -> None:
    """Until the worker applied every card (each thread then has its logged message event)."""
    deadline = time.monotonic() + timeout
    while True:
        applied = db_scalar("SELECT count(*) FROM tools_toolcall WHERE status = 'applied'")
        left = db_scalar("SELECT count(*) FROM tools_toolcall WHERE status IN ('pending', 'applying')")
        if left == 0 and applied >= expected:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{left} tool calls not applied after {timeout} s ({applied} applied)")
        await asyncio.sleep(0.2)


# With --trace, the checkpoints that get a tracemalloc snapshot (each takes seconds).
SNAPSHOT_AT = {
    "sessions: after warm-up",
    "sessions: all, second call",
    "websockets: before",
    "websockets: held",
    "websockets: closed",
    "websockets: closed again",
}


COLLECTED = "websockets: closed again, after gc.collect()"


class Web:
    """The web process: its memory, and (with --trace) its tracemalloc snapshots."""

    def __init__(self, pid: int, traced: bool):
        self.pid, self.traced = pid, traced
        self.snapshots: dict[str, Path] = {}

    async def measure(self, label: str, settle: float = 1.0, collect: bool = False) -> dict:
        """RSS now; with --trace, a snapshot at SNAPSHOT_AT's labels (after a full collection
        in the web process when `collect`)."""
        await asyncio.sleep(settle)  # calls' threads finish, buffers are let go
        if self.traced and (label in SNAPSHOT_AT or collect):
            number = len(self.snapshots) + 1
            os.kill(self.pid, signal.SIGUSR2 if collect else signal.SIGUSR1)
            path = TRACES / f"{number}.snap"
            deadline = time.monotonic() + 120
            while not path.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no tracemalloc snapshot {path} within 120 s")
                await asyncio.sleep(0.1)
            self.snapshots[label] = path
        return {"label": label, "at": time.monotonic(), **memory_of(self.pid)}


# ---------------------------------------------------------------- phase 1: live sessions


async def use_tokens(url: str, runners: list[dict], clients: int, used: dict, errors: list) -> None:
    """Each runner: an MCP client of its own (initialize), then one post_card; `clients` at a time."""
    pending = iter(runners)

    async def client() -> None:
        async with httpx2.AsyncClient(timeout=60) as http:
            for runner in pending:
                # The transport reads the client's headers on every request: this token's calls.
                http.headers["Authorization"] = f"Bearer {runner['token']}"
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as mcp:
                    result = await mcp.call_tool("post_card", card_arguments(f"memory {runner['session_id']}"))
                used[runner["token"]] = time.monotonic()
                if result.is_error:
                    errors.append(error_text(result))

    await asyncio.gather(*(client() for _ in range(clients)))


async def phase_sessions(web: Web, url: str, fixtures: dict, sessions: int, clients: int) -> dict:
    runners = fixtures["runners"][WARMUP_SESSIONS : WARMUP_SESSIONS + sessions]
    used: dict[str, float] = {}
    errors: list[str] = []
    points = []
    await use_tokens(url, fixtures["runners"][:WARMUP_SESSIONS], 1, {}, errors)
    baseline = await web.measure("sessions: after warm-up")
    points.append({**baseline, "sessions": 0})
    print(f"  after warm-up ({WARMUP_SESSIONS} sessions' calls): RSS {mib(baseline['VmRSS'])} MiB", flush=True)
    started = time.monotonic()
    step = -(-len(runners) // STEPS)
    for i in range(0, len(runners), step):
        part = runners[i : i + step]
        await use_tokens(url, part, clients, used, errors)
        point = await web.measure(f"sessions: {i + len(part)}")
        points.append({**point, "sessions": i + len(part)})
        print(f"  {i + len(part):>5} sessions used: RSS {mib(point['VmRSS'])} MiB", flush=True)
    first_round_s = time.monotonic() - started
    # Every session calls once more: all still live, each token used again within the minute.
    again_started = time.monotonic()
    await use_tokens(url, runners, clients, used, errors)
    again = await web.measure("sessions: all, second call")
    oldest = again["at"] - min(used.values())
    points.append({**again, "sessions": len(runners), "second_call": True})
    print(
        f"  {len(runners):>5} sessions, each called again: RSS {mib(again['VmRSS'])} MiB "
        f"(oldest last use {oldest:.1f} s before)",
        flush=True,
    )
    return {
        "sessions": len(runners),
        "calls": 2 * len(runners),
        "clients": clients,
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "first_round_s": first_round_s,
        "second_round_s": time.monotonic() - again_started,
        "oldest_last_use_s": oldest,
        "points": points,
        "baseline": baseline,
        "at_all": points[STEPS] if len(points) > STEPS else points[-1],
        "again": again,
    }


# ---------------------------------------------------------------- phase 2: websockets


class PageSockets:
    """Thread-page websockets as one logged-in member's browser tabs."""

    def __init__(self, port: int, cookie: str, deflate: bool):
        self.port, self.cookie, self.deflate = port, cookie, deflate
        self.open: list = []
        self.readers: list[asyncio.Task] = []
        self.refused = 0
        self.no_frame = 0
        self.failed: list[str] = []
        self.extensions: set[str] = set()

    async def _drain(self, ws) -> None:
        with contextlib.suppress(Exception):
            async for _ in ws:
                pass

    async def open_one(self, thread_id: int) -> None:
        try:
            ws = await ws_connect(
                f"ws://127.0.0.1:{self.port}/ws/threads/{thread_id}/",
                origin=f"http://127.0.0.1:{self.port}",
                additional_headers={"Cookie": self.cookie},
                compression="deflate" if self.deflate else None,  # browsers offer permessage-deflate
                max_size=None,
                open_timeout=60,
            )
        except Exception as exc:
            self.failed.append(f"{type(exc).__name__}: {exc}"[:200])
            return
        self.extensions.add(ws.response.headers.get("Sec-WebSocket-Extensions", ""))
        try:
            await ws.send(json.dumps({"since": 0}))  # as thread.js on open (a page rendered before any event)
            frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=30))
        except TimeoutError:
            self.no_frame += 1
            frame = {}
        except Exception:
            self.refused += 1  # closed (4403) right after the handshake
            return
        if "seq" not in frame and "html" not in frame and frame:
            self.failed.append(f"first frame: {json.dumps(frame)[:200]}")
        self.open.append(ws)
        self.readers.append(asyncio.create_task(self._drain(ws)))

    async def open_many(self, thread_ids: list[int], at_once: int) -> None:
        pending = iter(thread_ids)

        async def opener():
            for thread_id in pending:
                await self.open_one(thread_id)

        await asyncio.gather(*(opener() for _ in range(at_once)))

    def still_open(self) -> int:
        return sum(1 for ws in self.open if ws.state is State.OPEN)

    async def close(self, at_once: int | None = None) -> None:
        """All at once (as when a proxy or the network drops them), or `at_once` at a time."""
        step = at_once or max(1, len(self.open))
        for i in range(0, len(self.open), step):
            await asyncio.gather(*(ws.close() for ws in self.open[i : i + step]), return_exceptions=True)
        for task in self.readers:
            task.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)
        self.open.clear()
        self.readers.clear()


def thread_group_members() -> int:
    """Members of the thread.<id> Channels groups in Redis: the sockets the server joined."""
    client = redis.Redis.from_url(REDIS_URL)
    return sum(client.zcard(key) for key in client.scan_iter(f"{PREFIX}:group:thread.*", count=1000))


async def groups_emptied(timeout: float = 15) -> tuple[int, float]:
    """(members left, seconds waited): until the server's consumers left their thread groups."""
    started = time.monotonic()
    while (left := thread_group_members()) and time.monotonic() - started < timeout:
        await asyncio.sleep(0.2)
    return left, time.monotonic() - started


async def phase_websockets(web: Web, port: int, fixtures: dict, count: int, at_once: int, deflate: bool) -> dict:
    runners = fixtures["runners"][WARMUP_SESSIONS:]
    if count > len(runners):
        raise RuntimeError(f"{count} websockets need as many threads; the fixtures have {len(runners)}")
    thread_ids = [r["thread_id"] for r in runners[:count]]
    sockets = PageSockets(port, fixtures["cookie"], deflate)
    # Warm-up: a few sockets opened and closed, so the first socket's one-time costs (imports,
    # the thread for database calls, the channel layer's connection) are not counted per socket.
    warm = PageSockets(port, fixtures["cookie"], deflate)
    await warm.open_many([r["thread_id"] for r in fixtures["runners"][:WARMUP_SESSIONS]], 1)
    await warm.close()
    points = []
    before = await web.measure("websockets: before", settle=2.0)
    points.append({**before, "sockets": 0})
    print(f"  before: RSS {mib(before['VmRSS'])} MiB", flush=True)
    step = -(-count // STEPS)
    started = time.monotonic()
    try:
        for i in range(0, count, step):
            await sockets.open_many(thread_ids[i : i + step], at_once)
            point = await web.measure(f"websockets: {len(sockets.open)}")
            points.append({**point, "sockets": len(sockets.open)})
            print(f"  {len(sockets.open):>5} open: RSS {mib(point['VmRSS'])} MiB", flush=True)
        opened_s = time.monotonic() - started
        # Held past the consumer's 5 s look for lost pushes (CALVIN_LIVE_CHECK_SECONDS): a steady state.
        held = await web.measure("websockets: held", settle=7.0)
        still_open = sockets.still_open()
        members = thread_group_members()
        print(
            f"  held 7 s: RSS {mib(held['VmRSS'])} MiB; {still_open} still open, "
            f"{members} in thread groups on the server",
            flush=True,
        )
        opened = len(sockets.open)
    finally:
        await sockets.close(at_once)  # as many at a time as opened at a time
    left, left_after = await groups_emptied()
    closed = await web.measure("websockets: closed", settle=2.0)
    print(
        f"  closed, {at_once} at a time: RSS {mib(closed['VmRSS'])} MiB; thread-group members left on the "
        f"server: {left} (waited {left_after:.1f} s)",
        flush=True,
    )
    # Once more, the same threads: memory the first wave freed is reused, and what it kept is
    # kept again (a leak grows by the same amount per wave).
    again = PageSockets(port, fixtures["cookie"], deflate)
    try:
        await again.open_many(thread_ids, at_once)
        held_again = await web.measure("websockets: held again", settle=7.0)
        opened_again, still_open_again = len(again.open), again.still_open()
        print(
            f"  opened again ({opened_again}, {still_open_again} open after 7 s): RSS {mib(held_again['VmRSS'])} MiB",
            flush=True,
        )
    finally:
        await again.close()  # all at once
    left_again, left_again_after = await groups_emptied()
    closed_again = await web.measure("websockets: closed again", settle=2.0)
    print(
        f"  closed again, all at once: RSS {mib(closed_again['VmRSS'])} MiB; thread-group members left on "
        f"the server: {left_again} (waited {left_again_after:.1f} s)",
        flush=True,
    )
    if web.traced:  # what is still alive once the cyclic garbage is collected: a leak, or not
        await web.measure(COLLECTED, settle=0, collect=True)
        freed = (TRACES / f"{len(web.snapshots)}.gc").read_text().strip()
        print(f"  gc.collect() in the web process freed {freed} unreachable objects", flush=True)
    per_socket = (held["VmRSS"] - before["VmRSS"]) / opened if opened else None
    return {
        "asked": count,
        "at_once": at_once,
        "opened": opened,
        "first_frame_missing": sockets.no_frame,
        "refused": sockets.refused,
        "failed": len(sockets.failed),
        "first_failure": sockets.failed[0] if sockets.failed else "",
        "still_open_after_hold": still_open,
        "server_group_members": members,
        "deflate_offered": deflate,
        "extensions_negotiated": sorted(sockets.extensions),
        "open_seconds": opened_s,
        "points": points,
        "before": before,
        "held": held,
        "closed": closed,
        "group_members_left_after_close": left,
        "seconds_until_groups_left": left_after,
        "opened_again": opened_again,
        "still_open_again": still_open_again,
        "held_again": held_again,
        "closed_again": closed_again,
        "group_members_left_after_second_close": left_again,
        "bytes_per_socket_second_wave": (held_again["VmRSS"] - closed["VmRSS"]) / opened_again
        if opened_again
        else None,
        "bytes_kept_per_socket_per_wave": (closed_again["VmRSS"] - closed["VmRSS"]) / opened_again
        if opened_again
        else None,
        "bytes_per_socket": per_socket,
        "anon_bytes_per_socket": (held["RssAnon"] - before["RssAnon"]) / opened if opened else None,
    }


# ---------------------------------------------------------------- tracemalloc diff


def trace_diff(older: Path, newer: Path, limit: int = 12) -> dict:
    """Growth between two snapshots, by line (the allocating line) and by file."""
    filters = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<unknown>"),
    ]
    old = tracemalloc.Snapshot.load(str(older)).filter_traces(filters)
    new = tracemalloc.Snapshot.load(str(newer)).filter_traces(filters)

    def short(name: str) -> str:
        for marker in ("site-packages/", str(ROOT) + "/", "lib/python3"):
            if marker in name:
                return name.split(marker, 1)[1]
        return name

    def rows(key: str) -> list[dict]:
        stats = new.compare_to(old, key)
        return [
            {
                "where": f"{short(s.traceback[0].filename)}:{s.traceback[0].lineno}"
                if key == "lineno"
                else short(s.traceback[0].filename),
                "size_diff": s.size_diff,
                "count_diff": s.count_diff,
            }
            for s in stats[:limit]
        ]

    def stacks(top: int = 6, depth: int = 6) -> list[dict]:
        stats = new.compare_to(old, "traceback")
        return [
            {
                "size_diff": s.size_diff,
                "count_diff": s.count_diff,
                "stack": [f"{short(f.filename)}:{f.lineno}" for f in list(s.traceback)[-depth:]],
            }
            for s in stats[:top]
        ]

    total_old = sum(s.size for s in old.statistics("filename"))
    total_new = sum(s.size for s in new.statistics("filename"))
    return {
        "traced_growth": total_new - total_old,
        "by_line": rows("lineno"),
        "by_file": rows("filename"),
        "by_stack": stacks(),
    }


def trace_report(web: Web, sessions: int, sockets: int) -> dict:
    out = {}
    labels = list(web.snapshots)
    pairs = [
        ("sessions", "sessions: after warm-up", "sessions: all, second call", sessions, "session"),
        ("websockets", "websockets: before", "websockets: held", sockets, "socket"),
        ("websockets_closed", "websockets: before", "websockets: closed", sockets, "socket, after closing"),
        ("websockets_second_wave", "websockets: closed", "websockets: closed again", sockets, "socket, per wave"),
        ("websockets_collected", "websockets: before", COLLECTED, sockets, "socket, after a full collection"),
    ]
    for name, a, b, n, unit in pairs:
        if a not in web.snapshots or b not in web.snapshots:
            continue
        diff = trace_diff(web.snapshots[a], web.snapshots[b])
        out[name] = diff
        print(
            f"\ntracemalloc, {a} -> {b}: Python allocations +{mib(diff['traced_growth'])} MiB "
            f"({kib(diff['traced_growth'] / max(n, 1))} KiB per {unit})"
        )
        for row in diff["by_line"]:
            print(f"  {kib(row['size_diff']):>10} KiB  {row['count_diff']:>+8}  {row['where']}")
        print("  by file:")
        for row in diff["by_file"][:8]:
            print(f"  {kib(row['size_diff']):>10} KiB  {row['count_diff']:>+8}  {row['where']}")
        print("  largest stacks (most recent call first):")
        for row in diff["by_stack"]:
            print(f"  {kib(row['size_diff']):>10} KiB  {row['count_diff']:>+8}  " + " <- ".join(row["stack"][::-1]))
    out["snapshots"] = labels
    return out


# ---------------------------------------------------------------- the run


async def bench(args, procs: run.Processes) -> dict:
    env = {**os.environ, **ENV}
    began = t = time.monotonic()
    fixtures = prepare(env, WARMUP_SESSIONS + args.sessions)
    print(
        f"{DB_NAME} migrated, {len(fixtures['runners'])} sessions with runner tokens issued "
        f"({time.monotonic() - t:.1f} s)",
        flush=True,
    )
    code_rss = import_only_rss(env)
    port = free_port()
    serve = ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    if args.trace:
        TRACES.mkdir(parents=True, exist_ok=True)
        web_cmd = [str(BIN / "python"), str(Path(__file__).resolve()), "--serve-traced", *serve]
    else:
        web_cmd = [str(BIN / "python"), "-m", "calvin.http_server", *serve]
    proc = procs.start("calvin", web_cmd, env)
    procs.start(
        "worker",
        [
            *(str(BIN / "celery"), "-A", "calvin", "worker", "--pool", "solo", "-Q", QUEUE),
            *("-n", f"bench-memory-{os.getpid()}@%h", "--without-heartbeat", "--without-mingle"),
            *("--without-gossip", "-l", "warning"),
        ],
        env,
    )
    wait_port(procs, "calvin", port)
    if children_of(proc.pid):
        raise RuntimeError(f"the web process {proc.pid} has children {children_of(proc.pid)}: not one process")
    web = Web(proc.pid, args.trace)
    listening = await web.measure("listening", settle=0.5)
    setup_s = time.monotonic() - began
    print(
        f"calvin.http_server on :{port} (pid {proc.pid}, one process); Celery worker on {QUEUE}"
        f"{'; under tracemalloc' if args.trace else ''}",
        flush=True,
    )
    print(
        f"RSS: a process that only imported calvin.asgi {mib(code_rss)} MiB; the web process once listening "
        f"{mib(listening['VmRSS'])} MiB",
        flush=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    print(f"Phase 1: {args.sessions} live sessions, post_card with each token, {args.clients} clients", flush=True)
    t = time.monotonic()
    sessions = await phase_sessions(web, url, fixtures, args.sessions, args.clients)
    sessions["seconds"] = time.monotonic() - t
    procs.check("calvin")
    t = time.monotonic()
    await wait_applied(WARMUP_SESSIONS + 2 * args.sessions)
    print(f"  the worker applied every card ({time.monotonic() - t:.1f} s after the last call)", flush=True)
    print(
        f"Phase 2: {args.sockets} thread-page websockets, {args.at_once} opening at a time, "
        f"permessage-deflate {'offered' if not args.no_deflate else 'not offered'}",
        flush=True,
    )
    t = time.monotonic()
    sockets = await phase_websockets(web, port, fixtures, args.sockets, args.at_once, not args.no_deflate)
    sockets["seconds"] = time.monotonic() - t
    procs.check("calvin")
    procs.check("worker")
    log = (LOGS / "calvin.log").read_text(errors="replace")
    sockets["server_log"] = {
        "exceptions_in_asgi_application": log.count("Exception in ASGI application"),
        "redis_too_many_connections": log.count("MaxConnectionsError: Too many connections"),
    }
    out = {
        "setup_s": setup_s,
        "code_rss": code_rss,
        "listening": listening,
        "sessions": sessions,
        "websockets": sockets,
    }
    if args.trace:
        out["trace"] = trace_report(web, args.sessions, sockets["opened"])
    return out


def report(args, info: dict, out: dict, elapsed: float) -> dict:
    s, w = out["sessions"], out["websockets"]
    at_all, again, base = s["at_all"], s["again"], s["baseline"]
    per_session = (at_all["VmRSS"] - base["VmRSS"]) / s["sessions"]
    # After the first step: what one more session costs once the process's threads and pools exist.
    first = s["points"][1]
    marginal = (again["VmRSS"] - first["VmRSS"]) / max(1, s["sessions"] - first["sessions"])
    # The target speaks of 1,000 sessions: a smaller run is extrapolated by the marginal cost.
    at_target = again["VmRSS"] + marginal * max(0, TARGET_SESSIONS - s["sessions"])
    print()
    print(
        f"Machine: {info['cpus']} CPUs ({info['cpu_model']}), Python {info['python']}, "
        f"load average at start {', '.join(f'{x:.2f}' for x in info['loadavg_at_start'])}, "
        f"at end {', '.join(f'{x:.2f}' for x in info['loadavg_at_end'])}"
    )
    print("Web process: python -m calvin.http_server, one uvicorn worker (uvloop, httptools, websockets-sansio)")
    if args.trace:
        print("UNDER TRACEMALLOC: RSS includes tracemalloc's own cost; not comparable with the targets")
    print()
    header = f"{'web process':<44}{'RSS MiB':>9}{'anon MiB':>10}{'file MiB':>10}{'threads':>9}"
    print(header)
    print("-" * len(header))
    print(f"{'only imported calvin.asgi (another process)':<44}{mib(out['code_rss']):>9}")
    rows = [("listening, nothing served", out["listening"])]
    rows += [
        (
            f"{p['sessions']} sessions" + (", each called again" if p.get("second_call") else "")
            if p["sessions"]
            else "after warm-up",
            p,
        )
        for p in s["points"]
    ]
    rows += [(f"{p['sockets']} websockets open" if p["sockets"] else "before websockets", p) for p in w["points"]]
    rows += [(f"{w['opened']} websockets, held 7 s", w["held"]), ("websockets closed", w["closed"])]
    rows += [(f"{w['opened_again']} opened again, held 7 s", w["held_again"]), ("closed again", w["closed_again"])]
    for name, p in rows:
        print(f"{name:<44}{mib(p['VmRSS']):>9}{mib(p['RssAnon']):>10}{mib(p['RssFile']):>10}{p['Threads']:>9}")
    print(f"{'peak RSS (VmHWM) at the end':<44}{mib(w['closed_again']['VmHWM']):>9}")
    print()
    live = s["oldest_last_use_s"] <= LIVE_SECONDS and s["errors"] == 0
    if s["sessions"] >= TARGET_SESSIONS:
        verdict = "met" if again["VmRSS"] < TARGET_RSS and live else "NOT met"
    else:
        verdict = f"{'met' if at_target < TARGET_RSS else 'NOT met'} if extrapolated"
    if args.trace:
        verdict = "not judged under tracemalloc"
    print(
        f"{s['sessions']} live sessions ({s['calls']} post_card calls, {s['errors']} errors; every token used "
        f"within the last {s['oldest_last_use_s']:.0f} s): RSS {mib(again['VmRSS'])} MiB   "
        f"(target < {TARGET_RSS // MiB} MiB at {TARGET_SESSIONS}: {verdict})"
    )
    print(
        f"  per session: {kib(per_session)} KiB over the warm-up figure after one call each; "
        f"{kib(marginal)} KiB from the first step ({first['sessions']} sessions) to all, called twice"
        + (f"; at {TARGET_SESSIONS}, extrapolated: {mib(at_target)} MiB" if s["sessions"] < TARGET_SESSIONS else "")
    )
    per_socket = w["bytes_per_socket"]
    ok = (
        per_socket is not None
        and per_socket < TARGET_SOCKET
        and w["opened"] == w["asked"]
        and w["still_open_after_hold"] == w["opened"]
    )
    socket_verdict = "not judged under tracemalloc" if args.trace else "met" if ok else "NOT met"
    print(
        f"{w['opened']} of {w['asked']} websockets accepted ({w['first_frame_missing']} without a first frame, "
        f"{w['refused']} refused, {w['failed']} failed), {w['still_open_after_hold']} still open after 7 s, "
        f"{w['server_group_members']} in the server's thread groups; extension: "
        f"{', '.join(e or 'none' for e in w['extensions_negotiated'])}"
    )
    print(
        f"  per websocket: {kib(per_socket)} KiB RSS ({kib(w['anon_bytes_per_socket'])} KiB anonymous)   "
        f"(target < {TARGET_SOCKET // 1024} KiB: {socket_verdict}); after closing all: "
        f"{mib(w['closed']['VmRSS'] - w['before']['VmRSS'])} MiB above the figure before"
    )
    print(
        f"  opened again on the same threads: {kib(w['bytes_per_socket_second_wave'])} KiB per websocket over the "
        f"figure after the first close; after the second close RSS is {kib(w['bytes_kept_per_socket_per_wave'])} "
        f"KiB per websocket above the first close. Thread-group members the server did not remove: "
        f"{w['group_members_left_after_close']} after closing {w['at_once']} at a time, "
        f"{w['group_members_left_after_second_close'] - w['group_members_left_after_close']} more after closing "
        "all at once"
    )
    errors = w["server_log"]
    print(
        f"  the web process's log: {errors['exceptions_in_asgi_application']} 'Exception in ASGI application', "
        f"{errors['redis_too_many_connections']} of them redis MaxConnectionsError (the channel layer's pool)"
    )
    if s["first_error"]:
        print(f"first post_card error: {s['first_error']}")
    if w["first_failure"]:
        print(f"first websocket failure: {w['first_failure']}")
    print()
    print(
        f"Phases (s): setup and start {out['setup_s']:.1f}, sessions {s['seconds']:.1f} "
        f"(first round {s['first_round_s']:.1f}, second {s['second_round_s']:.1f}), "
        f"websockets {w['seconds']:.1f} (opening {w['open_seconds']:.1f}); total {elapsed:.1f}"
    )
    summary = {
        "machine": info,
        "plan": vars(args),
        "elapsed_s": elapsed,
        "targets": {"rss_bytes_1000_sessions": TARGET_RSS, "bytes_per_websocket": TARGET_SOCKET},
        "rss_1000_sessions_verdict": verdict,
        "bytes_per_session_one_call": per_session,
        "bytes_per_session_marginal": marginal,
        "rss_at_1000_sessions_extrapolated": at_target,
        "websocket_verdict": socket_verdict,
        **out,
    }
    (VAR / "results.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"(also written to {(VAR / 'results.json').relative_to(ROOT)}; process logs in {LOGS.relative_to(ROOT)})")
    return summary


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="250 sessions and 250 websockets")
    parser.add_argument("--sessions", type=int, help="live sessions (default 1000; --quick 250)")
    parser.add_argument("--sockets", type=int, help="thread-page websockets (default 500; --quick 250)")
    parser.add_argument("--clients", type=int, default=8, help="MCP clients calling at once (default 8)")
    parser.add_argument("--at-once", type=int, default=20, help="websockets opening at once (default 20)")
    parser.add_argument("--no-deflate", action="store_true", help="the websockets do not offer permessage-deflate")
    parser.add_argument("--trace", action="store_true", help="diagnostic: the web process under tracemalloc")
    args = parser.parse_args()
    args.sessions = args.sessions or (250 if args.quick else TARGET_SESSIONS)
    args.sockets = args.sockets or (250 if args.quick else 500)
    if args.sockets > args.sessions:
        parser.error("--sockets: at most one websocket per session's thread (raise --sessions)")
    os.chdir(ROOT)
    VAR.mkdir(parents=True, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 <= hard or (soft < 4096 and hard == resource.RLIM_INFINITY):
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))  # the sockets' both ends
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    info = machine_info()
    procs = run.Processes(LOGS)
    started = time.monotonic()
    try:
        out = asyncio.run(bench(args, procs))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
    info["loadavg_at_end"] = os.getloadavg()
    report(args, info, out, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
