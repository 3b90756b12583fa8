"""Previews, measured: a request through a preview against the same server reached directly.

    .venv/bin/python bench/previews.py [--quick]

Starts a gateway (uvicorn serving calvin.asgi, one worker) and one `manage.py host` daemon on a
fresh database `calvin_bench_previews` and Redis db 12. A `command` agent runs a small HTTP
server inside its bubblewrap sandbox; a preview publishes it. The same server program also runs
outside any sandbox on a port of this machine: the baseline. One client process measures both,
alternating, in one run: sequential request latency (p50, p99), requests/s with 20 clients, and
MB/s for one 100 MB body. Targets (issue 23): p50 added under 5 ms; throughput at least half.
"""

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from hosts import bench_environment  # noqa: E402

VAR = ROOT / "var" / "bench-previews"
DB_NAME = "calvin_bench_previews"
REDIS_URL = "redis://127.0.0.1:6379/12"
ENV = bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name="calvin-bench-previews", var=VAR)
ENV["CALVIN_PREVIEW_REQUESTS_PER_MINUTE"] = str(10**9)  # the bench measures the path, not the limit
os.environ.update(ENV)

from hosts import gateway_and_host_start, pct, prepare, wait  # noqa: E402
from run import Processes, free_port  # noqa: E402

# The server both ways: GET / answers a small page, GET /big/N streams N bytes.
SERVER = r"""
import http.server, sys

class Page(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes: with Nagle on, a kept-alive client waits out
    # its peer's delayed ACK (40 ms) on every request.
    disable_nagle_algorithm = True
    def do_GET(self):
        if self.path.startswith("/big/"):
            left = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(left))
            self.end_headers()
            block = b"x" * 262144
            while left:
                self.wfile.write(block[: min(left, len(block))])
                left -= min(left, len(block))
            return
        body = b"<h1>preview</h1>" * 64
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Page).serve_forever()
"""
SANDBOX_PORT = 5173
BIG = 100 * 1024 * 1024
CLIENTS = 20


class Target:
    def __init__(self, name: str, base: str, host: str | None = None):
        self.name, self.base = name, base
        self.headers = {"host": host} if host else {}
        self.processes: dict[str, int] = {}  # whose CPU time is counted, by role
        self.cpu_per_request: dict[str, float] = {}


async def sequential(target: Target, n: int) -> list[float]:
    import httpx2

    times = []
    async with httpx2.AsyncClient(headers=target.headers, timeout=60) as http:
        for i in range(n + 20):
            t0 = time.perf_counter()
            response = await http.get(target.base + "/")
            elapsed = (time.perf_counter() - t0) * 1000
            assert response.status_code == 200, (target.name, response.status_code, response.text[:200])
            if i >= 20:  # warm-up
                times.append(elapsed)
    return times


def cpu_seconds(roots: dict[str, int]) -> dict[str, float]:
    """CPU time used so far by each root process and its descendants (from /proc), and by
    this client process."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents, used = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
            used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    totals = dict.fromkeys(roots, 0.0)
    by_pid = {pid: name for name, pid in roots.items()}
    for pid, seconds in used.items():
        ancestor = pid
        while ancestor not in by_pid and ancestor > 1:
            ancestor = parents.get(ancestor, 1)
        if ancestor in by_pid:
            totals[by_pid[ancestor]] += seconds
    totals["client (this process)"] = time.process_time()
    return totals


async def concurrent(target: Target, seconds: float) -> float:
    import httpx2

    done, deadline = 0, time.perf_counter() + seconds
    target.cpu_before = cpu_seconds(target.processes)

    async def client():
        nonlocal done
        async with httpx2.AsyncClient(headers=target.headers, timeout=60) as http:
            while time.perf_counter() < deadline:
                response = await http.get(target.base + "/")
                assert response.status_code == 200, response.status_code
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    rate = done / (time.perf_counter() - started)
    after = cpu_seconds(target.processes)
    target.cpu_per_request = {name: (after[name] - target.cpu_before[name]) * 1000 / done for name in after}
    return rate


async def download(target: Target) -> float:
    import httpx2

    async with httpx2.AsyncClient(headers=target.headers, timeout=300) as http:
        t0 = time.perf_counter()
        received = 0
        async with http.stream("GET", target.base + f"/big/{BIG}") as response:
            async for chunk in response.aiter_bytes():
                received += len(chunk)
        elapsed = time.perf_counter() - t0
    assert received == BIG, received
    return BIG / 1e6 / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, seconds, rounds = (100, 2.0, 1) if args.quick else (400, 5.0, 2)
    prepare(db_name=DB_NAME, redis_url=REDIS_URL, var=VAR)

    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    from calvin.previews.models import Preview
    from calvin.workspaces.models import Agent, Member
    from calvin.workspaces.services import workspace_create
    from sessions.hosts import host_create
    from sessions.models import Turn
    from sessions.services import message_post_by_person, session_start

    workspace = workspace_create(name="Bench", slug="bench")
    owner = Member.objects.create(workspace=workspace, display_name="bench")
    server = [sys.executable, "-c", SERVER, str(SANDBOX_PORT)]
    agent = Agent.objects.create(
        workspace=workspace, name="server", provider="command", provider_command=server, tool_sets=["calvin"]
    )
    host, token = host_create(name="bench-host")
    procs = Processes()
    try:
        port, _ = gateway_and_host_start(procs, host=host, token=token, directory=VAR / "host")
        session = session_start(workspace=workspace, owner=owner, agent=agent, title="server")
        message_post_by_person(thread=session.thread, member=owner, text="serve")
        wait(lambda: Turn.objects.filter(session=session, status="running").exists(), timeout=60)
        Preview.objects.create(workspace=workspace, session=session, name="bench", port=SANDBOX_PORT)
        direct_port = free_port()
        procs.start("direct", [sys.executable, "-c", SERVER, str(direct_port)])
        preview = Target("through the preview", f"http://127.0.0.1:{port}", host=f"bench.preview.localhost:{port}")
        direct = Target("direct (same server, no sandbox)", f"http://127.0.0.1:{direct_port}")
        preview.processes = {
            "gateway": procs.procs["gateway"].pid,
            "host daemon, its sandbox and the server": procs.procs["host"].pid,
        }
        direct.processes = {"the server": procs.procs["direct"].pid}
        wait(lambda: asyncio.run(_answers(preview)) and asyncio.run(_answers(direct)), timeout=60)

        latency = {preview.name: [], direct.name: []}
        rate = {preview.name: [], direct.name: []}
        speed = {preview.name: [], direct.name: []}
        for _ in range(rounds):  # alternating, so a change of machine load falls on both
            for target in (preview, direct):
                latency[target.name] += asyncio.run(sequential(target, n))
                rate[target.name].append(asyncio.run(concurrent(target, seconds)))
                speed[target.name].append(asyncio.run(download(target)))
        report(latency, rate, speed, preview.name, direct.name)
        for target in (preview, direct):
            spent = ", ".join(f"{name} {ms:.2f}" for name, ms in target.cpu_per_request.items())
            print(f"  CPU ms per request at {CLIENTS} clients, {target.name}: {spent}")
    finally:
        procs.stop_all()


async def _answers(target: Target) -> bool:
    import httpx2

    try:
        async with httpx2.AsyncClient(headers=target.headers, timeout=5) as http:
            return (await http.get(target.base + "/")).status_code == 200
    except httpx2.HTTPError:
        return False


def report(latency, rate, speed, via: str, direct: str) -> None:
    load = os.getloadavg()[0]
    print(f"\nPreviews: one gateway process, one host daemon, {os.cpu_count()} CPUs, load {load:.1f} at the end")
    for name in (via, direct):
        values = latency[name]
        print(
            f"  {name:<34} GET / p50 {pct(values, 0.5):6.2f} ms  p99 {pct(values, 0.99):6.2f} ms"
            f"   {max(rate[name]):7.0f} req/s at {CLIENTS} clients   {max(speed[name]):7.1f} MB/s (100 MB body)"
        )
    added = pct(latency[via], 0.5) - pct(latency[direct], 0.5)
    share = max(rate[via]) / max(rate[direct])
    speed_share = max(speed[via]) / max(speed[direct])
    print(f"  p50 added by the preview: {added:.2f} ms (target under 5 ms)")
    print(f"  requests/s through the preview: {share:.0%} of direct (target at least 50 %)")
    print(f"  MB/s through the preview: {speed_share:.0%} of direct (target at least 50 %)")


if __name__ == "__main__":
    main()
