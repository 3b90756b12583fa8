"""From a tap on an ask_user_question button to the waiting tool call returning.

    .venv/bin/python bench/ask_tap.py [--questions 50]

Starts Calvin as bench/run.py does (`python -m calvin.http_server`, one Celery worker, the
calvin_bench database dropped and migrated, Redis db 14), then asks one question at a time
over MCP (`/mcp/nanoclaw`); once its card is posted, taps an option with an HTTP POST to the
web channel's action URL as a logged-in member's page does (session cookie, CSRF token), and
times the POST's start to the MCP call returning. Prints p50/p99; the target is p50 <= 30 ms.
Shares calvin_bench and var/bench with bench/run.py: run one at a time.
"""

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from run import BIN, CALVIN_ENV, LOGS, QUEUE, ROOT, Processes, db, free_port, machine_info, ms, pct, prepare_calvin

TARGET_MS = 30.0  # issue 26: tap -> return p50 under 30 ms
WARMUP = 5


def start_calvin(procs: Processes, env: dict) -> int:
    port = free_port()
    procs.start(
        "calvin",
        [
            str(BIN / "python"),
            "-m",
            "calvin.http_server",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env,
    )
    procs.start(
        "worker",
        [
            *(str(BIN / "celery"), "-A", "calvin", "worker", "--pool", "solo", "-Q", QUEUE),
            *("-n", f"bench-ask-{uuid.uuid4().hex[:6]}@%h", "--without-heartbeat", "--without-mingle"),
            *("--without-gossip", "-l", "warning"),
        ],
        env,
    )
    return port


async def wait_listening(procs: Processes, port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check("calvin")
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"calvin did not listen on {port} within {timeout} s")


async def posted_card(title: str, timeout: float = 20) -> int:
    """The question's call id once the worker has posted its card (what a person would tap)."""
    deadline = time.monotonic() + timeout
    with db() as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT q.tool_call_id FROM tools_question q JOIN tools_toolcall t ON t.id = q.tool_call_id"
                " WHERE q.title = %s AND t.status = 'applied'",
                (title,),
            ).fetchone()
            if row:
                return row[0]
            await asyncio.sleep(0.002)
    raise RuntimeError(f"the card of {title!r} was not posted within {timeout} s")


class Person:
    """A logged-in member's browser page on the thread: its cookie and the page's CSRF token."""

    def __init__(self, base: str, cookie: str, thread_id: int):
        name, _, value = cookie.partition("=")
        self.http = httpx2.AsyncClient(base_url=base, cookies={name: value}, timeout=30)
        self.thread_id = thread_id
        self.token = ""

    async def open_page(self) -> None:
        page = await self.http.get(f"/threads/{self.thread_id}/")
        page.raise_for_status()
        self.token = self.http.cookies["csrftoken"]

    async def tap(self, call_id: int, value: int) -> httpx2.Response:
        return await self.http.post(
            f"/threads/{self.thread_id}/actions/question/{call_id}/",
            data={"value": str(value)},
            headers={"X-CSRFToken": self.token, "Accept": "application/json"},
        )


async def one_question(client: Client, person: Person, n: int, run: str) -> tuple[float, float]:
    """(tap -> call returned, tap POST round trip), in seconds."""
    title = f"Deploy {run}-{n}?"
    value = n % 3
    returned: list[float] = []

    async def call():
        result = await client.call_tool(
            "ask_user_question", {"title": title, "question": "Ship it?", "options": ["a", "b", "c"], "timeout": 60}
        )
        returned.append(time.perf_counter())
        return result

    task = asyncio.create_task(call())
    call_id = await posted_card(title)
    await asyncio.sleep(0.02)  # a person takes longer than this to see the card and tap
    tapped = time.perf_counter()
    response = await person.tap(call_id, value)
    answered = time.perf_counter()
    result = await task
    if response.status_code != 200 or result.is_error or result.content[0].text != "abc"[value]:
        raise RuntimeError(f"question {n}: tap {response.status_code} {response.text[:200]}; call {result.content}")
    return returned[0] - tapped, answered - tapped


async def bench(procs: Processes, questions: int) -> dict:
    env = {**os.environ, **CALVIN_ENV}
    fixtures = prepare_calvin(env, 1)
    runner = fixtures["runners"][0]
    port = start_calvin(procs, env)
    await wait_listening(procs, port)
    base = f"http://127.0.0.1:{port}"
    print(f"calvin.http_server on :{port}, Celery worker (solo pool) on queue {QUEUE}", flush=True)

    person = Person(base, fixtures["cookie"], runner["thread_id"])
    await person.open_page()
    run = uuid.uuid4().hex[:6]
    to_return, post = [], []
    headers = {"Authorization": f"Bearer {runner['token']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=90) as http:
        async with Client(streamable_http_client(f"{base}/mcp/nanoclaw", http_client=http), mode="legacy") as client:
            for n in range(WARMUP + questions):
                returned, answered = await one_question(client, person, n, run)
                if n >= WARMUP:
                    to_return.append(returned)
                    post.append(answered)
    await person.http.aclose()
    procs.check("calvin")
    procs.check("worker")
    return {"to_return": to_return, "post": post}


def report(info: dict, out: dict, questions: int) -> None:
    to_return, post = out["to_return"], out["post"]
    p50 = pct(to_return, 50)
    print()
    print(f"Machine: {info['cpus']} CPUs ({info['cpu_model']}), Python {info['python']}")
    print(
        f"{questions} questions, one at a time (after {WARMUP} warm-up questions), each tapped once its card was posted"
    )
    worst = ms(max(to_return))
    print(f"tap -> ask_user_question returned: p50 {ms(p50)} ms, p99 {ms(pct(to_return, 99))} ms, max {worst} ms")
    print(f"tap POST round trip (the person's answer): p50 {ms(pct(post, 50))} ms, p99 {ms(pct(post, 99))} ms")
    verdict = "met" if p50 * 1000 <= TARGET_MS else "NOT met"
    print(f"target p50 <= {TARGET_MS:g} ms: {verdict}")
    print(f"(process logs in {LOGS.relative_to(ROOT)})")


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=50, help="timed questions (default 50)")
    args = parser.parse_args()
    os.chdir(ROOT)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    info = machine_info()
    procs = Processes()
    try:
        out = asyncio.run(bench(procs, args.questions))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
    report(info, out, args.questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
