"""The REST API, measured: a list and a write through /api/v1/, next to an MCP tool call on the
same gateway in the same run.

    .venv/bin/python bench/api.py [--quick]

Starts a gateway (uvicorn serving calvin.asgi, one worker) on a fresh database `calvin_bench_api`
and Redis db 11, with a workspace of 200 sessions. Measures, sequentially on one kept-alive
client: GET /api/v1/sessions?limit=50 as a person, PATCH /api/v1/tasks/<id> (a change with its
audit row) as a person, GET /api/v1/sessions as an agent (cli_scope group), and the MCP tool
`post_card` (the call accepted and recorded; no worker runs); then requests/s with 20 clients
for the list and the write.
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

VAR = ROOT / "var" / "bench-api"
DB_NAME = "calvin_bench_api"
REDIS_URL = "redis://127.0.0.1:6379/11"
os.environ.update(bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name="calvin-bench-api", var=VAR))

from hosts import call_many, pct, prepare  # noqa: E402
from run import Processes, card_arguments, free_port, uvicorn_cmd, wait_port  # noqa: E402


def seed(sessions: int) -> dict:
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from calvin.api.tokens import api_token_create
    from calvin.schedules.services import task_create
    from calvin.schedules.specs import TaskCreate
    from calvin.workspaces.models import Agent, Member
    from calvin.workspaces.services import workspace_create
    from sessions.services import runner_start, session_start

    user = get_user_model().objects.create_user("owner", password="bench-owner-pw")
    workspace = workspace_create(name="Bench", slug="bench", owner_user=user)
    owner = Member.objects.get(workspace=workspace, user=user)
    agent = Agent.objects.create(workspace=workspace, name="helper")
    first = None
    for n in range(sessions):
        session = session_start(workspace=workspace, owner=owner, title=f"session {n}", agent=agent)
        first = first or session
    _, person = api_token_create(member=owner, name="bench")
    _, runner = runner_start(session=first)
    task = task_create(agent=agent, spec=TaskCreate(name="bench", prompt="p", recurrence="0 * * * *"), member=owner)
    return {"person": person, "runner": runner, "task": task.id}


async def sequential(base: str, token: str, method: str, path: str, n: int, body_of=None) -> list[float]:
    import httpx2

    latencies = []
    async with httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        for i in range(n):
            t0 = time.perf_counter()
            answer = await http.request(method, path, json=body_of(i) if body_of else None)
            latencies.append((time.perf_counter() - t0) * 1000)
            if answer.status_code >= 300:
                raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:200]}")
    return latencies


async def rate(base: str, token: str, method: str, path: str, seconds: float, clients: int, body_of=None) -> float:
    import httpx2

    done = 0
    stop = time.perf_counter() + seconds

    async def client(k: int):
        nonlocal done
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
            i = 0
            while time.perf_counter() < stop:
                answer = await http.request(method, path, json=body_of(k * 1_000_000 + i) if body_of else None)
                if answer.status_code >= 300:
                    raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:200]}")
                done += 1
                i += 1

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return done / (time.perf_counter() - started)


def row(name: str, values: list[float]) -> str:
    return f"{name:<52} p50 {pct(values, 0.5):7.2f} ms   p99 {pct(values, 0.99):7.2f} ms   n={len(values)}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    n, seconds = (50, 2.0) if options.quick else (300, 5.0)
    prepare(DB_NAME, REDIS_URL, VAR)
    tokens = seed(200)
    procs = Processes()
    try:
        port = free_port()
        procs.start("gateway", uvicorn_cmd("calvin.asgi:application", port), env=os.environ.copy())
        wait_port(procs, "gateway", port)
        base = f"http://127.0.0.1:{port}"
        task = f"/api/v1/tasks/{tokens['task']}"

        def prompt(i: int) -> dict:
            return {"prompt": f"prompt {i}"}

        card = card_arguments("api-bench")
        run = asyncio.run
        run(sequential(base, tokens["person"], "GET", "/api/v1/sessions?limit=50", 20))  # warm
        listing = "/api/v1/sessions?limit=50"
        person, runner = tokens["person"], tokens["runner"]
        results = [
            ("API list: GET /sessions?limit=50 (person)", run(sequential(base, person, "GET", listing, n))),
            ("API list: GET /sessions?limit=50 (agent, group)", run(sequential(base, runner, "GET", listing, n))),
            ("API write: PATCH /tasks/<id> (person)", run(sequential(base, person, "PATCH", task, n, prompt))),
            (
                "MCP post_card (same gateway, runner token)",
                run(call_many(f"{base}/mcp", runner, "post_card", card, 45)),
            ),
        ]
        print(f"sequential, one client ({n} requests each; post_card at most 45: its per-runner limit is 50)")
        for name, values in results:
            print(row(name, values))
        list_rate = run(rate(base, tokens["person"], "GET", "/api/v1/sessions?limit=50", seconds, 20))
        write_rate = run(rate(base, tokens["person"], "PATCH", task, seconds, 20, prompt))
        print(f"20 clients for {seconds:g} s: list {list_rate:7.1f} req/s   write {write_rate:7.1f} req/s")
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
