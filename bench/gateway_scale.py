"""The gateway at the scale of many hosts: simulated host daemons on /ws/host/, turns driven
through them at a steady rate, and what that costs the gateway as the host count grows.

    .venv/bin/python bench/gateway_scale.py            # 20, 100, 200 hosts; 5,000 sessions; 50 turns/s for 30 s
    .venv/bin/python bench/gateway_scale.py --quick    # 10, 20 hosts; 500 sessions; 50 turns/s for 12 s

On a fresh database `calvin_bench_scale`, Redis db 12, queue and channel prefix
`calvin-bench-scale`, files in var/bench-scale/ (process logs in var/bench-scale/logs/, the
figures in var/bench-scale/results.json). Up front, not timed: the workspaces and sessions
(their agent a `command` one, which a real host runs), the hosts and their tokens
(host_create), and a calibration: the services the host consumer calls (an empty claim, a
heartbeat and its sweep, a turn claimed, started and finished), timed one at a time here
with no gateway running, with their query counts. Then for each host count, a phase:

1. a gateway, `python -m calvin.http_server` (uvicorn, one process) as deployed;
2. two client processes (this file, `--hosts-client`), each holding half the hosts: light
   asyncio clients of the real protocol (websockets, its default keepalive as the daemon's),
   each with its own token. A host registers (capacity 25), heartbeats at the interval the
   gateway gives it, and answers a turn at once as the daemon would: turn.started, then
   turn.finished (done, with a reply); it reconnects after a drop, as the daemon does;
3. an idle window (hosts connected and heartbeating, no turns), then the driven window: four
   threads of this process post person messages with message_post_by_person (the service the
   thread page calls), paced together at the rate, each into the next session;
4. the drain (every posted turn finished, or the bound); turns still unfinished are counted,
   then ended here so the next phase starts clean; the clients and the gateway stop.

No Celery worker runs: the host's consumer claims turns itself (on host.wake, heartbeat,
register and turn.finished). See bench/README.md for the columns.
"""

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench-scale"
LOGS = VAR / "logs"
DB_NAME = "calvin_bench_scale"
REDIS_URL = "redis://127.0.0.1:6379/12"
PREFIX = "calvin-bench-scale"
PG = f"postgresql://postgres@127.0.0.1:5432/{DB_NAME}"
DRIVER_APP = "gateway-scale-driver"  # application_name of this process's connections: not the gateway's
CLIENT_PROCESSES = 2
CLK_TCK = os.sysconf("SC_CLK_TCK")

sys.path.insert(0, str(ROOT / "bench"))
from run import Processes, free_port  # noqa: E402


@dataclass(frozen=True)
class Plan:
    host_counts: tuple[int, ...]
    sessions: int
    workspaces: int
    capacity: int  # each host's, as it registers
    rate: float  # turns offered per second
    drive_seconds: float
    idle_seconds: float  # hosts connected, no turns: the heartbeats' own cost
    drain_seconds: float  # bound on waiting for the last turns


FULL = Plan((20, 100, 200), 5000, 10, 25, 50.0, 30.0, 10.0, 30.0)
QUICK = Plan((10, 20), 500, 5, 25, 50.0, 12.0, 10.0, 20.0)


# ---------------------------------------------------------------- simulated hosts (client processes, no Django)


class SimulatedHost:
    """One host daemon's side of /ws/host/, without running anything: a turn is started and
    finished as soon as it arrives. Reconnects after a drop, as the daemon does."""

    def __init__(self, *, url: str, host_id: int, token: str, capacity: int):
        self.url, self.host_id, self.token, self.capacity = url, host_id, token, capacity
        self.told: list[tuple[float, list[int], int]] = []  # (when, the batch's turn ids, its size in bytes)
        self.heartbeats: list[float] = []
        self.closes: list[tuple[float, int | None, int | None, str]] = []  # (when, code received, code sent, reason)
        self.notices: list[str] = []  # what the gateway said besides turns: error, closing, stop
        self.connects = 0
        self.connected = False  # at the moment: registered on an open connection

    async def run(self, stop: asyncio.Event) -> None:
        from websockets.asyncio.client import connect

        backoff = 0.5
        while not stop.is_set():
            try:
                async with connect(
                    self.url,
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                    compression=None,
                    open_timeout=60,
                    max_size=16 * 1024 * 1024,
                ) as ws:
                    self.connects += 1
                    backoff = 0.5
                    await self._until_stopped(ws, stop)
                    self.connected = self.connected and stop.is_set()  # still up when the bench stopped it
                if not stop.is_set():  # the gateway, or the keepalive, ended it
                    self.closes.append(close_record(ws))
            except Exception as exc:  # a refused or dropped connection: noted, and tried again
                self.notices.append(f"connection: {type(exc).__name__}: {exc}"[:200])
            if not stop.is_set():
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _until_stopped(self, ws, stop: asyncio.Event) -> None:
        serve = asyncio.create_task(self._serve(ws))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({serve, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not serve.done():
            await ws.close()
            serve.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await serve

    async def _serve(self, ws) -> None:
        register = {"type": "register", "name": f"sim-{self.host_id}", "capacity": self.capacity}
        await ws.send(json.dumps({**register, "version": "1", "sandbox": "bench", "running": [], "runners": []}))
        heartbeat = None
        try:
            async for raw in ws:
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "turn":
                    self.told.append((time.time(), list(message.get("turns") or [message["turn"]]), len(raw)))
                    await self._run_turn(ws, message)
                elif kind == "registered" and heartbeat is None:
                    self.connected = True
                    heartbeat = asyncio.create_task(self._heartbeat(ws, float(message["heartbeat_seconds"])))
                else:
                    self.notices.append(f"{kind}: {message.get('reason') or message.get('error') or ''}"[:200])
        finally:
            if heartbeat is not None:
                heartbeat.cancel()

    async def _heartbeat(self, ws, interval: float) -> None:
        # Hosts of a fleet connected at different times: the first beat at a random phase.
        await asyncio.sleep(random.uniform(0.2, interval))
        while True:
            await ws.send(json.dumps({"type": "heartbeat"}))
            self.heartbeats.append(time.time())
            await asyncio.sleep(interval)

    async def _run_turn(self, ws, message: dict) -> None:
        turn, session = message["turn"], message["session"]
        directory = f"/srv/calvin-host/sessions/session-{session}"
        started = {"type": "turn.started", "turn": turn, "session": session, "pid": 0}
        await ws.send(json.dumps({**started, "directory": directory, "temp_directory": directory + "-tmp"}))
        finished = {"type": "turn.finished", "turn": turn, "status": "done", "reply": f"done: turn {turn}"}
        await ws.send(json.dumps({**finished, "error": "", "agent_session_id": ""}))

    def record(self) -> dict:
        """What the bench process reads back: tellings, beats, closes."""
        return {
            "told": self.told,
            "heartbeats": self.heartbeats,
            "closes": self.closes,
            "notices": self.notices,
            "connects": self.connects,
            "connected_at_stop": self.connected,
        }


def close_record(ws) -> tuple[float, int | None, int | None, str]:
    """How a connection ended: the close code the gateway sent (None: none arrived), the one this
    side sent (1011: its keepalive ping went unanswered), and the reason given."""
    received, sent = ws.protocol.close_rcvd, ws.protocol.close_sent
    reason = (received.reason if received else "") or (sent.reason if sent else "")
    return (time.time(), received.code if received else None, sent.code if sent else None, reason[:80])


async def hosts_client(spec_path: Path, out_path: Path) -> None:
    """A client process: every host of the spec connected until SIGTERM, then its record written."""
    spec = json.loads(spec_path.read_text())
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    hosts = [
        SimulatedHost(url=spec["url"], host_id=h["id"], token=h["token"], capacity=spec["capacity"])
        for h in spec["hosts"]
    ]
    tasks = []
    for host in hosts:  # a fleet does not connect in one instant: 5 ms apart
        tasks.append(asyncio.create_task(host.run(stop)))
        await asyncio.sleep(0.005)
    await stop.wait()
    await asyncio.wait(tasks, timeout=3)  # the close handshakes: a busy gateway answers late
    cpu = cpu_seconds(os.getpid())
    out_path.write_text(json.dumps({"cpu_seconds": cpu, "hosts": {h.host_id: h.record() for h in hosts}}))


# ---------------------------------------------------------------- /proc


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """utime + stime of a process (all its threads), or of one of its threads."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu(pid: int) -> dict[int, float]:
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            threads[int(tid)] = cpu_seconds(pid, int(tid))
    return threads


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- processes


def wait_for(predicate, *, timeout: float, what: str, check=None, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if check:
            check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
    return value


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------- the database, outside Django


def pg():
    import psycopg

    return psycopg.connect(PG, autocommit=True, application_name="gateway-scale-sampler")


def committed_transactions(conn) -> int:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (DB_NAME,)).fetchone()[0]


def backend_cpu(conn) -> dict[int, tuple[bool, float]]:
    """The database's client backends: pid -> (serves the gateway, CPU seconds so far)."""
    rows = conn.execute(
        "SELECT pid, application_name FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'",
        (DB_NAME,),
    ).fetchall()
    found = {}
    for pid, application in rows:
        with contextlib.suppress(OSError):
            found[pid] = (not application.startswith("gateway-scale"), cpu_seconds(pid))
    return found


def heartbeat_times(conn) -> dict[int, float]:
    rows = conn.execute(
        "SELECT id, extract(epoch FROM last_heartbeat_at) FROM agent_sessions_host WHERE last_heartbeat_at IS NOT NULL"
    ).fetchall()
    return {host_id: float(at) for host_id, at in rows}


# ---------------------------------------------------------------- a measured window


class Window:
    """What the gateway process, its database backends and the clients spent over a window,
    sampled every half second; and each heartbeat the gateway handled (a host's
    last_heartbeat_at changing), with when."""

    def __init__(self, gateway_pid: int, client_pids: list[int]):
        self.gateway_pid, self.client_pids = gateway_pid, client_pids
        self.conn = pg()
        self.done = threading.Event()
        self.handled: list[tuple[int, float]] = []
        self.peak_cpu = 0.0
        self.peak_rss = 0
        self.backends: dict[int, list] = {}  # pid -> [gateway's, first seen, last seen]
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self.start = time.time()
        self.cpu0 = cpu_seconds(self.gateway_pid)
        self.threads0 = thread_cpu(self.gateway_pid)
        self.clients0 = sum(cpu_seconds(pid) for pid in self.client_pids)
        self.xacts0 = committed_transactions(self.conn)
        self.beats = heartbeat_times(self.conn)
        self.initial = dict(self.beats)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self.end = time.time()
        self.cpu1 = cpu_seconds(self.gateway_pid)
        self.threads1 = thread_cpu(self.gateway_pid)
        self.clients1 = sum(cpu_seconds(pid) for pid in self.client_pids)
        time.sleep(0.6)  # backends report their transactions to the statistics within 0.5 s
        self.xacts1 = committed_transactions(self.conn)
        self.conn.close()

    def _sample(self) -> None:
        last_cpu, last_at = cpu_seconds(self.gateway_pid), time.monotonic()
        while not self.done.wait(0.5):
            now_cpu, now = cpu_seconds(self.gateway_pid), time.monotonic()
            if now - last_at >= 1.0:
                self.peak_cpu = max(self.peak_cpu, (now_cpu - last_cpu) / (now - last_at))
                last_cpu, last_at = now_cpu, now
            self.peak_rss = max(self.peak_rss, rss_kib(self.gateway_pid))
            for host_id, at in heartbeat_times(self.conn).items():
                if self.beats.get(host_id) != at:
                    self.handled.append((host_id, at))
                    self.beats[host_id] = at
            for pid, (gateways, cpu) in backend_cpu(self.conn).items():
                self.backends.setdefault(pid, [gateways, cpu, cpu])[2] = cpu

    def figures(self) -> dict:
        seconds = self.end - self.start
        threads = {tid: cpu - self.threads0.get(tid, 0.0) for tid, cpu in self.threads1.items()}
        loop = threads.pop(self.gateway_pid, 0.0)  # the main thread runs the event loop

        def db(gateways: bool) -> float:
            spent = sum(last - first for own, first, last in self.backends.values() if own == gateways)
            return 100 * spent / seconds

        return {
            "seconds": seconds,
            "gateway_cpu_pct": 100 * (self.cpu1 - self.cpu0) / seconds,
            "gateway_cpu_peak_pct": 100 * self.peak_cpu,
            "loop_thread_pct": 100 * loop / seconds,
            "busiest_other_thread_pct": 100 * max(threads.values(), default=0.0) / seconds,
            "gateway_rss_peak_kib": self.peak_rss,
            "db_gateway_cpu_pct": db(True),
            "db_bench_cpu_pct": db(False),
            "clients_cpu_pct": 100 * (self.clients1 - self.clients0) / seconds,
            "transactions_per_s": (self.xacts1 - self.xacts0) / seconds,
            "heartbeats_handled": len(self.handled),
            "heartbeats_handled_per_s": len(self.handled) / seconds,
        }


class DroppedWakes(logging.Handler):
    """channels_redis logs (at INFO) each group_send that found a channel's Redis key at its
    capacity, the message being dropped for it: the bench's posts' wakes, counted, not printed."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "over capacity" in record.getMessage():
            self.count += 1

    @classmethod
    def install(cls) -> "DroppedWakes":
        handler = cls()
        layer_log = logging.getLogger("channels_redis.core")
        layer_log.setLevel(logging.INFO)
        layer_log.propagate = False
        layer_log.addHandler(handler)
        return handler


# ---------------------------------------------------------------- fixtures (Django, in this process)


def environment() -> dict:
    """The bench's own database, Redis db, queue, channel prefix and var directory (bench/hosts.py's helpers)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from hosts import bench_environment

    os.environ.update(bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name=PREFIX, var=VAR))
    return os.environ.copy()  # the child processes' (PATH and the rest of this one's too)


def workspace_with_sessions(name: str, sessions: int) -> tuple[object, list[int]]:
    """A workspace whose quotas let every session run at once, its member, and `sessions`
    threads of an agent a host runs (`command`)."""
    from calvin.workspaces.models import Agent, Member
    from calvin.workspaces.services import workspace_create
    from sessions.services import session_start

    workspace = workspace_create(name=name, slug=name.lower().replace(" ", "-"))
    quota = workspace.quota
    quota.turns_per_day = quota.tool_calls_per_day = 10**7
    quota.concurrent_sessions = sessions
    quota.save()
    member = Member.objects.create(workspace=workspace, display_name="bench")
    agent = Agent.objects.create(workspace=workspace, name="echo", provider="command", provider_command=["cat"])
    threads = [
        session_start(workspace=workspace, owner=member, agent=agent, title=f"s{i}").thread_id for i in range(sessions)
    ]
    return member, threads


def fixtures_create(plan: Plan) -> dict:
    """The driven sessions over plan.workspaces workspaces, the simulated hosts with their
    tokens, and apart from them a calibration workspace (50 sessions) and host."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from sessions.hosts import host_create
    from sessions.models import Thread

    def workspace(w: int):
        try:
            return workspace_with_sessions(f"Scale {w}", plan.sessions // plan.workspaces)
        finally:
            connection.close()  # this pool thread's

    threads, members = [], {}
    with ThreadPoolExecutor(4) as pool:  # not timed; a session_start is some ms of waiting on the database
        for member, made in pool.map(workspace, range(plan.workspaces)):
            members[member.workspace_id] = member
            threads += made
    hosts = []
    for h in range(max(plan.host_counts)):
        host, token = host_create(name=f"sim-{h:04d}")
        hosts.append({"id": host.id, "token": token})
    calibration_member, calibration_threads = workspace_with_sessions("Calibration", CALIBRATION_TURNS)
    members[calibration_member.workspace_id] = calibration_member
    by_id = Thread.objects.select_related("session").in_bulk(threads + calibration_threads)
    return {
        "threads": [by_id[t] for t in threads],
        "members": members,
        "hosts": hosts,
        "calibration_threads": [by_id[t] for t in calibration_threads],
        "calibration_host": host_create(name="calibration")[0].id,
    }


# ---------------------------------------------------------------- calibration: what the consumer's calls cost


CALIBRATION_TURNS = 50


def measured(call, per: int = 1) -> tuple[float, float]:
    """Wall ms and database queries of `call`, each divided by `per` (the operations it makes)."""
    from django.db import connection

    queries = 0

    def count(execute, sql, params, many, context):
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        t0 = time.perf_counter()
        call()
        ms = 1000 * (time.perf_counter() - t0)
    return ms / per, queries / per


def calibrate(fixtures: dict) -> dict:
    """The services HostConsumer calls, timed in this process on the same database while no
    gateway runs, one at a time: what one of them holds the gateway's database thread for,
    and its queries. A calibration host registers (host_register, as the consumer does), its
    50 sessions get a message each, one claim takes them all, and each is started and finished."""
    from sessions import hosts, scheduling
    from sessions.services import message_post_by_person

    host_id, channel = fixtures["calibration_host"], "calibration.bench!1"
    registration = {"capacity": CALIBRATION_TURNS, "version": "1", "sandbox": "bench", "running": [], "runners": []}
    hosts.host_register(host_id=host_id, channel_name=channel, **registration)
    n, threads, members, messages = CALIBRATION_TURNS, fixtures["calibration_threads"], fixtures["members"], []

    def post_all():
        for t in threads:
            message_post_by_person(thread=t, member=members[t.workspace_id], text="calibration")

    def n_times(call):
        return lambda: [call() for _ in range(n)]

    ops = {
        "empty_claim": measured(n_times(lambda: scheduling.turns_claim(host_id=host_id)), n),
        "heartbeat": measured(n_times(lambda: hosts.host_heartbeat(host_id=host_id, channel_name=channel)), n),
        "sweep": measured(n_times(hosts.hosts_sweep), n),
        "post": measured(post_all, n),
        "claim_per_turn": measured(lambda: messages.extend(scheduling.turns_claim(host_id=host_id)), n),
        "started": measured(lambda: [started_report(host_id, m["turn"]) for m in messages], n),
        "finished": measured(lambda: [finished_report(host_id, m["turn"]) for m in messages], n),
    }
    hosts.host_disconnected(host_id=host_id, channel_name=channel)
    if len(messages) != n:
        raise RuntimeError(f"calibration: one claim took {len(messages)} of {n} queued turns")
    return {"ms": {k: ms for k, (ms, _) in ops.items()}, "queries": {k: q for k, (_, q) in ops.items()}}


def calibration_best(before: dict, after: dict) -> dict:
    """Per call, the lesser of the two calibrations: other processes on the machine only add time."""
    return {
        "ms": {k: min(v, after["ms"][k]) for k, v in before["ms"].items()},
        "queries": after["queries"],
    }


def calibration_line(when: str, cal: dict) -> str:
    calls = ", ".join(f"{k} {v:.1f}" for k, v in cal["ms"].items())
    return f"calibration {when} (ms): {calls}"


def started_report(host_id: int, turn_id: int) -> None:
    from sessions import turns

    turns.turn_started(host_id=host_id, turn_id=turn_id, directory="/d", temp_directory="/t")


def finished_report(host_id: int, turn_id: int) -> None:
    from sessions import turns

    turns.turn_finish(host_id=host_id, turn_id=turn_id, status="done", reply="ok")


def woken_per_turn(hosts: int) -> int:
    """Hosts a queued turn wakes (sessions.scheduling.hosts_to_wake): at most two, the session's
    own host alone when it has one; one of them claims the turn, the other finds nothing."""
    return min(hosts, WOKEN_AT_MOST)


def thread_demand(cal: dict, *, hosts: int, rate: float, heartbeat_seconds: float, fan_out: bool = False) -> float:
    """Seconds of database-thread time per second the consumers' calls need, from the calibration:
    every queued turn wakes at most two hosts (fan_out: every host, as before 7af4563), each
    woken host but the one that claims runs an empty claim, the turn itself is claimed, started
    and finished (and the finish claims again), and every host's heartbeat updates its row,
    sweeps and claims."""
    ms = cal["ms"]
    woken = hosts if fan_out else woken_per_turn(hosts)
    wakes = rate * (woken - 1) * ms["empty_claim"]
    turn = rate * (ms["claim_per_turn"] + ms["started"] + ms["finished"] + ms["empty_claim"])
    beats = hosts / heartbeat_seconds * (ms["heartbeat"] + ms["sweep"] + ms["empty_claim"])
    return (wakes + turn + beats) / 1000


# ---------------------------------------------------------------- one phase


def gateway_start(procs: Processes, env: dict) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [sys.executable, "-m", "calvin.http_server", "--port", str(port), "--log-level", "warning"]
    gateway = procs.start("gateway", [*cmd, "--no-access-log"], env)
    wait_for(lambda: port_open(port), timeout=60, what="the gateway's port", check=lambda: procs.check("gateway"))
    return gateway, port


def clients_start(procs: Processes, port: int, hosts: list[dict], plan: Plan, env: dict) -> list[Path]:
    """The hosts split over the client processes; returns where each writes its record."""
    outs = []
    for i in range(CLIENT_PROCESSES):
        spec = VAR / f"client-{i}.json"
        out = VAR / f"client-{i}.out.json"
        out.unlink(missing_ok=True)
        share = hosts[i::CLIENT_PROCESSES]
        spec.write_text(
            json.dumps({"url": f"ws://127.0.0.1:{port}/ws/host/", "capacity": plan.capacity, "hosts": share})
        )
        spec.chmod(0o600)  # host tokens
        procs.start(f"client-{i}", [sys.executable, __file__, "--hosts-client", str(spec), str(out)], env)
        outs.append(out)
    return outs


def connected_hosts() -> int:
    with pg() as conn:
        return conn.execute("SELECT count(*) FROM agent_sessions_host WHERE channel_name <> ''").fetchone()[0]


SENDERS = 4  # threads posting: one post is tens of ms on a busy machine, 50/s needs more than one


def drive(threads: list, members: dict, cursor: int, plan: Plan) -> tuple[list[int], int, list[float]]:
    """Person messages posted at the plan's rate by SENDERS threads, each message into the next
    session (each session gets one turn per pass); returns the turns made, the cursor after
    them, and each post's own ms."""
    from django.db import connection

    from sessions.models import Turn
    from sessions.services import message_post_by_person

    count = int(plan.rate * plan.drive_seconds)
    before = Turn.objects.order_by("-id").values_list("id", flat=True).first() or 0
    start = time.monotonic() + 0.1
    post_ms: list[float] = []

    def sender(first: int) -> None:
        try:
            for i in range(first, count, SENDERS):
                time.sleep(max(0.0, start + i / plan.rate - time.monotonic()))
                thread = threads[(cursor + i) % len(threads)]
                member = members[thread.workspace_id]
                t0 = time.perf_counter()
                message_post_by_person(thread=thread, member=member, text=f"turn {cursor + i}")
                post_ms.append(1000 * (time.perf_counter() - t0))
        finally:
            connection.close()

    senders = [threading.Thread(target=sender, args=(k,)) for k in range(SENDERS)]
    for s in senders:
        s.start()
    for s in senders:
        s.join()
    made = list(Turn.objects.filter(id__gt=before, prompt__isnull=False).values_list("id", flat=True))
    return made, cursor + count, post_ms


def unfinished(turn_ids: list[int]):
    from sessions.models import Turn

    return Turn.objects.filter(id__in=turn_ids, status__in=[Turn.Status.QUEUED, Turn.Status.RUNNING])


def leftovers_end(turn_ids: list[int]) -> int:
    """Turns still queued or running at the drain bound are ended (failed) once counted, so the
    next phase starts with none waiting (its hosts would take them over first)."""
    from django.utils import timezone

    from sessions.models import Turn

    return unfinished(turn_ids).update(
        status=Turn.Status.FAILED, error="bench: unfinished at the drain bound", finished_at=timezone.now()
    )


def clients_stop(procs: Processes, outs: list[Path]) -> dict:
    """SIGTERM to each client; their hosts' records, merged."""
    hosts = {}
    for i, out in enumerate(outs):
        procs.stop(f"client-{i}")
        hosts.update({int(k): v for k, v in json.loads(out.read_text())["hosts"].items()})
    return hosts


def phase(plan: Plan, n_hosts: int, fixtures: dict, cursor: int, env: dict, dropped: DroppedWakes) -> tuple[dict, int]:
    """One host count: gateway and clients up, an idle window, the driven window, the drain."""
    procs = Processes(LOGS)
    load_start = load_average()
    try:
        gateway, port = gateway_start(procs, env)
        rss_before = rss_kib(gateway.pid)
        outs = clients_start(procs, port, fixtures["hosts"][:n_hosts], plan, env)
        client_pids = [procs.procs[f"client-{i}"].pid for i in range(CLIENT_PROCESSES)]
        wait_for(lambda: connected_hosts() == n_hosts, timeout=120, what=f"{n_hosts} hosts registered", every=0.5)
        time.sleep(1)
        rss_connected = rss_kib(gateway.pid)
        with Window(gateway.pid, client_pids) as idle:
            time.sleep(plan.idle_seconds)
        dropped.count = 0
        with Window(gateway.pid, client_pids) as driven:
            turn_ids, cursor, post_ms = drive(fixtures["threads"], fixtures["members"], cursor, plan)
        drive_end = time.time()
        with contextlib.suppress(RuntimeError):
            wait_for(lambda: not unfinished(turn_ids).exists(), timeout=plan.drain_seconds, what="drain", every=0.2)
        drain_seconds = time.time() - drive_end
        time.sleep(1)  # a late second telling of a turn would still arrive
        rss_end = rss_kib(gateway.pid)
        hosts = clients_stop(procs, outs)
        procs.stop("gateway", timeout=10)
    finally:
        procs.stop_all()
    result = {
        "hosts": n_hosts,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "rss_kib": {"before_hosts": rss_before, "hosts_connected": rss_connected, "after_drive": rss_end},
        "idle": idle.figures(),
        "driven": driven.figures(),
        "drain_seconds": drain_seconds,
        "posts_per_s": len(turn_ids) / (driven.end - driven.start),
        "wakes_dropped": dropped.count,
        "post_ms": {"p50": pct(post_ms, 0.5), "p99": pct(post_ms, 0.99)},
        **turn_figures(turn_ids, hosts),
        **heartbeat_figures(driven, hosts),
        **connection_figures(hosts),
        "gateway_log": log_problems(LOGS / "gateway.log"),
    }
    result["ended_at_drain_bound"] = leftovers_end(turn_ids)
    return result, cursor


# ---------------------------------------------------------------- figures of a phase


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def tellings(hosts: dict) -> tuple[dict[int, list[float]], list[int]]:
    """When each turn was told to a host (a turn told twice ran twice), and the messages' sizes."""
    told: dict[int, list[float]] = {}
    sizes = []
    for record in hosts.values():
        for at, turns, size in record["told"]:
            sizes.append(size)
            for turn_id in turns:
                told.setdefault(turn_id, []).append(at)
    return told, sizes


def turn_figures(turn_ids: list[int], hosts: dict) -> dict:
    """Message → host told, from each turn's created_at (in the post's transaction) to the moment
    a simulated host read its first turn message; message → done (finished_at); and whether
    every turn ran exactly once."""
    from collections import Counter

    from sessions.models import Message, Turn

    rows = {
        t["id"]: t
        for t in Turn.objects.filter(id__in=turn_ids).values(
            "id", "status", "attempts", "error", "created_at", "finished_at"
        )
    }
    told, sizes = tellings(hosts)
    latencies = [1000 * (min(told[t]) - rows[t]["created_at"].timestamp()) for t in turn_ids if t in told]
    done = [
        1000 * (r["finished_at"] - r["created_at"]).total_seconds()
        for r in rows.values()
        if r["status"] == Turn.Status.DONE
    ]
    texts = [f"done: turn {t}" for t in turn_ids]  # what a simulated host replies for a batch
    return {
        "turns_posted": len(turn_ids),
        "turns_told": len([t for t in turn_ids if t in told]),
        "turns_done": len(done),
        "turn_statuses": dict(Counter(r["status"] for r in rows.values())),
        "turn_errors": dict(Counter(r["error"][:60] for r in rows.values() if r["error"]).most_common(3)),
        "turns_told_twice": len([t for t in turn_ids if len(told.get(t, [])) > 1]),
        "turns_attempted_twice": len([r for r in rows.values() if r["attempts"] > 1]),
        "batches_done": Turn.objects.filter(id__in=turn_ids, status=Turn.Status.DONE)
        .values("batch")
        .distinct()
        .count(),
        "agent_replies": Message.objects.filter(author=Message.Author.AGENT, text__in=texts).count(),
        "told_ms": {"p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "max": max(latencies, default=None)},
        "done_ms": {"p50": pct(done, 0.5), "p99": pct(done, 0.99)},
        "turn_message_bytes_mean": statistics.fmean(sizes) if sizes else None,
    }


def heartbeat_figures(window: Window, hosts: dict) -> dict:
    """Heartbeats sent in the driven window, and for each host the longest it went without one
    recorded (its last_heartbeat_at unchanged; from its last before the window, up to the
    window's end): past CALVIN_HOST_LAPSE_SECONDS another host's sweep takes its turns."""
    sent = [at for record in hosts.values() for at in record["heartbeats"] if window.start <= at <= window.end]
    handled: dict[int, list[float]] = {}
    for host_id, at in window.handled:
        handled.setdefault(host_id, []).append(at)
    gaps = []
    for host_id in hosts:
        times = sorted([window.initial.get(host_id, window.start), *handled.get(host_id, []), window.end])
        gaps.append(max(b - a for a, b in zip(times, times[1:], strict=False)))
    return {
        "heartbeats_sent_per_s": len(sent) / (window.end - window.start),
        "heartbeat_gap_s": {"p50": pct(gaps, 0.5), "max": max(gaps, default=None)},
    }


def connection_figures(hosts: dict) -> dict:
    """Connections that ended while the bench had not stopped them, by (code received, code sent, reason)."""
    from collections import Counter

    closes = Counter(f"{rcvd}/{sent} {reason}".strip() for r in hosts.values() for _, rcvd, sent, reason in r["closes"])
    notices = [n for record in hosts.values() for n in record["notices"]]
    return {
        "reconnects": sum(max(0, record["connects"] - 1) for record in hosts.values()),
        "connected_at_stop": sum(1 for record in hosts.values() if record["connected_at_stop"]),
        "closes": dict(closes),
        "notices": dict(Counter(notices).most_common(5)),
    }


def log_problems(path: Path) -> dict:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    words = ("WARNING", "ERROR", "Traceback", "CRITICAL", "HostConsumer:")
    problems = [line for line in lines if any(w in line for w in words)]
    from collections import Counter

    return {"lines": len(problems), "most": dict(Counter(p[:160] for p in problems).most_common(5))}


# ---------------------------------------------------------------- the report


def fmt(value, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def heartbeat_cell(r: dict) -> str:
    idle, driven = r["idle"]["heartbeats_handled_per_s"], r["driven"]["heartbeats_handled_per_s"]
    return f"{idle:.1f}|{r['heartbeats_sent_per_s']:.1f}/{driven:.1f}"


COLUMNS = [
    ("hosts", lambda r: str(r["hosts"])),
    ("posted/s", lambda r: f"{r['posts_per_s']:.1f}"),
    ("told ms p50/p99", lambda r: f"{fmt(r['told_ms']['p50'])}/{fmt(r['told_ms']['p99'])}"),
    ("done ms p50/p99", lambda r: f"{fmt(r['done_ms']['p50'])}/{fmt(r['done_ms']['p99'])}"),
    ("told/done/posted", lambda r: f"{r['turns_told']}/{r['turns_done']}/{r['turns_posted']}"),
    ("told 2x", lambda r: str(r["turns_told_twice"])),
    ("drops", lambda r: str(sum(r["closes"].values()))),
    ("hb/s idle|sent/handled", heartbeat_cell),
    ("hb gap s p50/max", lambda r: f"{fmt(r['heartbeat_gap_s']['p50'])}/{fmt(r['heartbeat_gap_s']['max'])}"),
    ("wakes dropped", lambda r: str(r["wakes_dropped"])),
    ("CPU % idle/driven", lambda r: f"{r['idle']['gateway_cpu_pct']:.0f}/{r['driven']['gateway_cpu_pct']:.0f}"),
    ("loop/db thr %", lambda r: f"{r['driven']['loop_thread_pct']:.0f}/{r['driven']['busiest_other_thread_pct']:.0f}"),
    ("RSS MiB idle/peak", lambda r: f"{r['rss_kib']['hosts_connected'] / 1024:.0f}/{r['peak_rss_mib']:.0f}"),
    ("pg CPU %", lambda r: f"{r['driven']['db_gateway_cpu_pct']:.0f}"),
    ("xact/s", lambda r: f"{r['driven']['transactions_per_s']:.0f}"),
    ("db thr need", lambda r: f"{r['thread_demand']:.1f}x"),
]


def table(results: list[dict]) -> str:
    for r in results:
        r["peak_rss_mib"] = max(r["driven"]["gateway_rss_peak_kib"], r["rss_kib"]["after_drive"]) / 1024
    cells = [[name for name, _ in COLUMNS]] + [[cell(r) for _, cell in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


TURNS_PER_HOST = 50 / 200  # the issue's load: 50 turns/s through 200 hosts
WOKEN_AT_MOST = 2  # sessions/scheduling.py WAKE_AT_MOST
BUDGET = 0.7  # a web process's database thread kept at most 70 % busy


def sizing(results: list[dict], cal: dict, heartbeat_seconds: float) -> dict:
    """1,000 hosts at the issue's turns per host: database-thread seconds per second, the web
    processes that makes at BUDGET, with the wake as it is and were it one claim per turn; memory."""
    small, large = results[0], results[-1]
    hosts = 1000
    rate = TURNS_PER_HOST * hosts
    if large["hosts"] > small["hosts"]:  # the slope between the phases
        grown = large["rss_kib"]["hosts_connected"] - small["rss_kib"]["hosts_connected"]
        rss_per_host = grown / (large["hosts"] - small["hosts"])
    else:
        rss_per_host = (large["rss_kib"]["hosts_connected"] - large["rss_kib"]["before_hosts"]) / large["hosts"]
    demand = thread_demand(cal, hosts=hosts, rate=rate, heartbeat_seconds=heartbeat_seconds)
    every_host = thread_demand(cal, hosts=hosts, rate=rate, heartbeat_seconds=heartbeat_seconds, fan_out=True)
    return {
        "hosts": hosts,
        "turns_per_s": rate,
        "rss_kib_per_host": rss_per_host,
        "thread_seconds_per_s": demand,
        "processes": demand / BUDGET,
        "thread_seconds_per_s_every_host": every_host,
        "processes_every_host": every_host / BUDGET,
        "post_seconds_per_s": rate * cal["ms"]["post"] / 1000,
    }


def max_rate(cal: dict, hosts: int, heartbeat_seconds: float) -> float:
    """The turns/s one process sustains with `hosts` connected, its database thread at BUDGET."""
    c = cal["ms"]
    per_turn = c["claim_per_turn"] + c["started"] + c["finished"] + c["empty_claim"]
    beats = hosts / heartbeat_seconds * (c["heartbeat"] + c["sweep"] + c["empty_claim"])
    return max(0.0, (BUDGET * 1000 - beats) / ((woken_per_turn(hosts) - 1) * c["empty_claim"] + per_turn))


def sizing_text(results: list[dict], cal: dict, s: dict, heartbeat_seconds: float) -> str:
    """The paragraph: what limits one gateway process, and 1,000 hosts' processes, from the figures."""
    c, q = cal["ms"], cal["queries"]
    per_turn = c["claim_per_turn"] + c["started"] + c["finished"] + c["empty_claim"]
    turn_queries = q["claim_per_turn"] + q["started"] + q["finished"] + q["empty_claim"]
    per_beat = c["heartbeat"] + c["sweep"] + c["empty_claim"]
    beats = s["hosts"] / heartbeat_seconds
    demands = ", ".join(f"{r['thread_demand']:.1f}x at {r['hosts']} hosts" for r in results)
    saturated = [str(r["hosts"]) for r in results if r["thread_demand"] > 1]
    return "\n".join(
        [
            "What limits one gateway process: its host consumers' database calls. They ran on one thread"
            " (Channels' default) until 3ebb088 and run in the thread pool since; the model below keeps one"
            " second of them per second per process (two cores, shared with PostgreSQL), whatever the pool.",
            f"Calibrated (one call at a time, no gateway running; per call the lesser of before and after the"
            f" phases): an empty claim {c['empty_claim']:.1f} ms"
            f" ({q['empty_claim']:.0f} queries); a turn: claimed {c['claim_per_turn']:.1f} ms, started"
            f" {c['started']:.1f}, finished {c['finished']:.1f}, plus the claim after the finish = {per_turn:.1f} ms"
            f" ({turn_queries:.0f} queries); a heartbeat {c['heartbeat']:.1f} + its sweep {c['sweep']:.1f} + its claim"
            f" = {per_beat:.1f} ms; posting the message {c['post']:.1f} ms ({q['post']:.0f} queries, in whichever web"
            " process takes it, not in the consumers).",
            "A queued turn wakes at most two hosts' consumers (sessions.scheduling.hosts_to_wake: the session's own"
            " host, or the two least loaded with room; until 7af4563 it woke every host), one of which claims it,"
            f" so R turns/s through H hosts need R x {c['empty_claim']:.1f} + R x {per_turn:.1f}"
            f" + H/{heartbeat_seconds:g} x {per_beat:.1f} ms of database calls per second: {demands}"
            + (f"; over 1x ({', '.join(saturated)} hosts) the consumers queue for the database." if saturated else "."),
            "So one process, at most "
            f"{BUDGET:.0%} busy, sustains R = ({BUDGET:g} x 1000 - H/{heartbeat_seconds:g} x {per_beat:.1f}) /"
            f" ({c['empty_claim']:.1f} + {per_turn:.1f}) turns/s: "
            + ", ".join(
                f"{max_rate(cal, h, heartbeat_seconds):.2f} with {h} host{'s' if h > 1 else ''}" for h in (1, 20, 200)
            )
            + ".",
            f"1,000 hosts at the issue's {TURNS_PER_HOST:g} turns/s per host ({s['turns_per_s']:.0f} turns/s):"
            f" {s['turns_per_s']:.0f} x ({c['empty_claim']:.1f} + {per_turn:.1f}) + {beats:.0f} x {per_beat:.1f} ms ="
            f" {s['thread_seconds_per_s']:.1f} s per s, {s['processes']:.1f} -> "
            f"{max(2, math.ceil(s['processes']))} web processes at {BUDGET:.0%} (at least 2 for failover); their"
            f" memory for the connections {s['rss_kib_per_host']:.0f} KiB per host,"
            f" {s['rss_kib_per_host'] * 1000 / 1024:.0f} MiB for 1,000; posting {s['turns_per_s']:.0f} messages/s"
            f" takes another {s['post_seconds_per_s']:.1f} s per s of request threads wherever messages arrive."
            f" Waking every host, as before, it was {s['thread_seconds_per_s_every_host']:.0f} s per s"
            f" ({s['processes_every_host']:.0f} processes).",
            "Workers: none is on this path (the consumers claim, start and finish turns in the web process), so"
            " Celery workers are sized by the tools' effects (docs/deploy.md), not by hosts.",
        ]
    )


def phase_lines(r: dict) -> str:
    """What the table has no room for, for one phase."""
    driven = r["driven"]
    return "\n".join(
        [
            f"  {r['hosts']} hosts: load average {r['load_average_start']} -> {r['load_average_end']};"
            f" drain {r['drain_seconds']:.1f} s; post p50/p99 {fmt(r['post_ms']['p50'], '.1f')}/"
            f"{fmt(r['post_ms']['p99'], '.1f')} ms; turn message {fmt(r['turn_message_bytes_mean'])} B",
            f"    turns: {r['turn_statuses']}, {r['turns_attempted_twice']} attempted more than once, errors"
            f" {r['turn_errors'] or '{}'}; {r['ended_at_drain_bound']} ended by the bench at the drain bound;"
            f" {r['batches_done']} batches done, {r['agent_replies']} replies posted",
            f"    connections dropped (code received/sent reason): {r['closes'] or '{}'}, reconnects {r['reconnects']},"
            f" connected when stopped {r['connected_at_stop']}/{r['hosts']};"
            f" told besides turns: {r['notices'] or '{}'}",
            f"    gateway: CPU peak {driven['gateway_cpu_peak_pct']:.0f} %, RSS"
            f" {r['rss_kib']['before_hosts'] / 1024:.0f} MiB before the hosts;"
            f" its log: {r['gateway_log']['most'] or '{}'}; clients' CPU"
            f" {driven['clients_cpu_pct']:.1f} %, PostgreSQL for this process {driven['db_bench_cpu_pct']:.0f} %",
        ]
    )


def report(results: list[dict], plan: Plan, cal: dict, heartbeat_seconds: float) -> dict:
    print()
    print(
        f"Gateway at scale: {plan.sessions} sessions, {plan.rate:g} turns/s offered for {plan.drive_seconds:g} s,"
        f" capacity {plan.capacity} per host, heartbeat every {heartbeat_seconds:g} s, {CLIENT_PROCESSES} client"
        f" processes, idle window {plan.idle_seconds:g} s, drain bound {plan.drain_seconds:g} s"
    )
    print(table(results))
    print(
        "Targets: the issue gives none in numbers; each turn told once and done, no dropped connection, heartbeats"
        " handled as sent."
    )
    for r in results:
        print(phase_lines(r))
    s = sizing(results, cal, heartbeat_seconds)
    print()
    print(sizing_text(results, cal, s, heartbeat_seconds))
    return s


# ---------------------------------------------------------------- main


def plan_from(args) -> Plan:
    plan = QUICK if args.quick else FULL
    if args.hosts:
        plan = replace(plan, host_counts=tuple(int(n) for n in args.hosts.split(",")))
    if args.rate:
        plan = replace(plan, rate=args.rate)
    if args.seconds:
        plan = replace(plan, drive_seconds=args.seconds)
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--hosts", help="host counts, comma-separated (default 20,100,200; quick 10,20)")
    parser.add_argument("--rate", type=float, help="turns offered per second (default 50)")
    parser.add_argument("--seconds", type=float, help="the driven window (default 30; quick 12)")
    parser.add_argument("--hosts-client", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hosts_client:
        asyncio.run(hosts_client(Path(args.hosts_client[0]), Path(args.hosts_client[1])))
        return
    plan = plan_from(args)
    started = time.monotonic()
    load_start = load_average()
    print(f"load average at start: {load_start}", flush=True)
    env = environment()
    from hosts import prepare

    prepare(DB_NAME, REDIS_URL, VAR)
    os.environ["DATABASE_URL"] = f"{env['DATABASE_URL']}?application_name={DRIVER_APP}"
    import django

    django.setup()
    from django.conf import settings

    heartbeat_seconds = settings.CALVIN_HOST_HEARTBEAT_SECONDS
    dropped = DroppedWakes.install()
    fixtures = fixtures_create(plan)
    cal_before = calibrate(fixtures)
    print(f"fixtures made in {time.monotonic() - started:.0f} s; {calibration_line('before', cal_before)}", flush=True)
    results, cursor = [], 0
    for n_hosts in plan.host_counts:
        result, cursor = phase(plan, n_hosts, fixtures, cursor, env, dropped)
        results.append(result)
        print(
            f"{n_hosts} hosts: told p50 {fmt(result['told_ms']['p50'])} ms, done {result['turns_done']}/"
            f"{result['turns_posted']} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    cal_after = calibrate(fixtures)
    print(calibration_line("after the phases", cal_after))
    cal = calibration_best(cal_before, cal_after)
    for r in results:
        r["thread_demand"] = thread_demand(cal, hosts=r["hosts"], rate=plan.rate, heartbeat_seconds=heartbeat_seconds)
    sizes = report(results, plan, cal, heartbeat_seconds)
    load_end = load_average()
    print(f"\nload average: {load_start} at start, {load_end} at end; took {time.monotonic() - started:.0f} s")
    summary = {
        "plan": plan.__dict__,
        "heartbeat_seconds": heartbeat_seconds,
        "calibration": {"before": cal_before, "after": cal_after, "used": cal},
        "phases": results,
        "sizing_1000_hosts": sizes,
        "load_average": {"start": load_start, "end": load_end},
    }
    (VAR / "results.json").write_text(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
