"""The deployment shape a growing customer runs: 2 web processes behind a round-robin proxy,
2 Celery workers, beat, 2 host daemons, one PostgreSQL, one Redis (the cluster of conftest.py).

Nothing a single process would remember may be lost: a session's tool calls land on both web
processes, a thread's live socket on either sees every update, turns spread over both hosts
and a killed host's sessions move to the other, a runner refused through one web process is
paused on the other, and a secret set or replaced by another process is caught at once by a
web process that had its scanner cached (also when the writer's clock lags).
"""

import asyncio
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.dashboard.conftest import ws_connect
from tests.reliability.calls import card_arguments
from tests.reliability.cluster import free_port
from tests.reliability.experiments import report
from tests.reliability.processes import wait_until
from tests.reliability.test_faults_hosts import (
    all_running,
    connected,
    each_replied_once,
    replies,
    say,
    sessions_scripted,
    turns,
)

pytestmark = pytest.mark.slow

REFUSALS_PER_MINUTE = 5


class RoundRobinProxy:
    """A TCP proxy that sends each new connection to the next backend (websockets pass through
    as the bytes they are). It counts, per backend, connections, MCP requests and their answers."""

    def __init__(self, backends: list[str]):
        self.backends = [url.removeprefix("http://").split(":") for url in backends]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections, self.mcp_requests, self.mcp_answers = Counter(), Counter(), Counter()
        self._next = 0
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        assert started.wait(10), "the proxy did not start"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        started.set()
        self._loop.run_forever()

    async def _serve(self, client_reader, client_writer):
        index = self._next % len(self.backends)
        self._next += 1
        self.connections[index] += 1
        host, port = self.backends[index]
        try:
            backend_reader, backend_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return

        async def pipe(reader, writer, upstream: bool):
            try:
                while data := await reader.read(65536):
                    if upstream:
                        self.mcp_requests[index] += data.count(b"POST /mcp")
                    else:
                        self.mcp_answers[index] += data.count(b"HTTP/1.1 200")
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        await asyncio.gather(pipe(client_reader, backend_writer, True), pipe(backend_reader, client_writer, False))

    def stop(self) -> None:
        """Close the listener and every connection still open (the survivor host's socket)."""

        async def close():
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)


@dataclass
class Endpoint:
    url: str


def call(base_url: str, token: str, tool: str, arguments: dict) -> tuple[bool, str]:
    """One tool call on a connection of its own: (is_error, text)."""

    async def run():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode="legacy") as mcp:
                result = await mcp.call_tool(tool, arguments)
                return result.is_error, " ".join(getattr(p, "text", "") for p in result.content)

    return asyncio.run(run())


def people_sessions(stack, count: int) -> dict:
    """A workspace whose owner is logged in (a session cookie), and `count` sessions with runner tokens."""
    return stack.django(
        f"""
        import uuid
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client
        from calvin.workspaces.models import Member
        from calvin.workspaces.services import workspace_create
        from sessions.services import runner_start, session_start

        tag = uuid.uuid4().hex[:8]
        user = get_user_model().objects.create_user(f"scale-{{tag}}", password=uuid.uuid4().hex)
        workspace = workspace_create(name=f"Scale {{tag}}", slug=f"scale-{{tag}}", owner_user=user)
        member = Member.objects.get(workspace=workspace, user=user)
        sessions = []
        for i in range({count}):
            session = session_start(workspace=workspace, owner=member, title=f"scale {{i}}")
            _, token = runner_start(session=session)
            sessions.append({{"session_id": session.id, "thread_id": session.thread_id, "token": token}})
        browser = Client()
        browser.force_login(user)
        result = {{"cookie": browser.cookies[settings.SESSION_COOKIE_NAME].value, "sessions": sessions}}
        """
    )


def secret_set(stack, session_id: int, name: str, value: str, clock_behind_s: float = 0) -> None:
    """Set (or replace) a session's secret from a Django process of its own, whose clock may lag."""
    stack.django(
        f"""
        from datetime import timedelta
        from django.utils import timezone
        from secrets_vault.services import secret_set
        from sessions.models import Session

        real_now = timezone.now
        timezone.now = lambda: real_now() - timedelta(seconds={clock_behind_s!r})
        secret_set(session=Session.objects.get(id={session_id}), name={name!r}, value={value!r})
        """
    )


def thread_seqs(stack, thread_id: int) -> set[int]:
    """The seqs of the thread's numbered live events, as the log holds them."""
    rows = stack.query(
        "SELECT seq FROM dashboard_liveevent WHERE stream = %s AND seq IS NOT NULL", (f"thread:{thread_id}",)
    )
    return {seq for (seq,) in rows}


def live_socket(base_url: str, thread_id: int, cookie: str, since: int):
    socket = ws_connect(base_url, thread_id, sessionid=cookie)
    socket.send(json.dumps({"since": since}))
    return socket


def frames_until(socket, done, timeout: float) -> set[int]:
    """The seq of every frame the socket receives until done(seen) or the time is up."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        try:
            frame = json.loads(socket.recv(timeout=max(0.05, deadline - time.monotonic())))
        except TimeoutError:
            break
        if "seq" in frame:
            seen.add(frame["seq"])
    return seen


@pytest.fixture
def shape(stack):
    """Both web processes, the proxy in front of them, two workers and beat."""
    env = {"CALVIN_REFUSALS_PER_MINUTE": str(REFUSALS_PER_MINUTE)}
    web_a, web_b = stack.gateway(**env), stack.gateway(**env)
    proxy = RoundRobinProxy([web_a.url, web_b.url])
    stack.worker()
    stack.worker()
    stack.beat()
    yield web_a, web_b, proxy
    stack.stop()  # the hosts first, while the proxy still carries their goodbyes
    proxy.stop()


def test_two_web_processes_two_workers_two_hosts_share_everything(stack, shape, capsys):
    web_a, web_b, proxy = shape
    started = time.monotonic()
    # Hosts dial the proxy like any client: one lands on each web process.
    first, second = (stack.host(stack.host_create(name), Endpoint(proxy.url), capacity=2) for name in ("one", "two"))
    scripted = sessions_scripted(stack, 4)
    people = people_sessions(stack, 3)
    talk, refused, secretive = people["sessions"]
    wait_until(lambda: connected(stack, first, second), timeout=30, what="both hosts connected")

    # Turns spread over both hosts (each takes two at a time), and a host's loss moves its sessions.
    say(stack, scripted, "work")
    wait_until(
        lambda: all_running(stack, scripted),
        timeout=30,
        what="every turn running",
        state=lambda: turns(stack, scripted),
    )
    on = Counter(host for _, _, host, _ in turns(stack, scripted))
    assert on == {"one": 2, "two": 2}, on
    moved = {session for session, _, host, _ in turns(stack, scripted) if host == "one"}
    first.kill()

    # Meanwhile: a session's tool calls through the proxy land on both web processes, and a
    # live socket on each web process sees every update of the thread.
    since = max(thread_seqs(stack, talk["thread_id"]), default=0)
    sockets = [live_socket(web.url, talk["thread_id"], people["cookie"], since) for web in (web_a, web_b)]
    requests_before = Counter(proxy.mcp_requests)
    for n in range(8):
        is_error, text = call(proxy.url, talk["token"], "post_card", card_arguments(f"scale-{n}"))
        assert not is_error, text
    served = proxy.mcp_requests - requests_before
    assert served[0] >= 4 and served[1] >= 4, f"MCP requests per web process: {served}"
    assert proxy.mcp_answers[0] >= 4 and proxy.mcp_answers[1] >= 4, proxy.mcp_answers
    delivered = "SELECT count(*) FROM agent_sessions_message WHERE thread_id = %s AND delivered_at IS NOT NULL"
    wait_until(lambda: stack.query(delivered, (talk["thread_id"],))[0][0] >= 8, timeout=20, what="8 cards delivered")

    def logged():
        return {seq for seq in thread_seqs(stack, talk["thread_id"]) if seq > since}

    for web, socket in zip((web_a, web_b), sockets, strict=True):
        with socket:
            seen = frames_until(socket, lambda seen: seen >= logged(), timeout=15)
            expected = logged()
            assert len(expected) >= 8 and seen >= expected, f"{web.url} missed {sorted(expected - seen)}"

    wait_until(
        lambda: each_replied_once(stack, scripted, "work"),
        timeout=40,
        what="every turn replied once",
        state=lambda: (turns(stack, scripted), replies(stack, scripted)),
    )
    expected_turns = {(s["session_id"], "done", "two", 2 if s["session_id"] in moved else 1) for s in scripted}
    assert set(turns(stack, scripted)) == expected_turns, turns(stack, scripted)

    # The refusal pause: refused through web A, paused on web B at once.
    if time.time() % 60 > 45:  # counted per clock minute: all of it in one
        time.sleep(61 - time.time() % 60)
    for _ in range(REFUSALS_PER_MINUTE + 1):
        is_error, text = call(web_a.url, refused["token"], "send_file", {"path": "missing.txt"})
        assert is_error and "no file at missing.txt" in text, text
    is_error, text = call(web_b.url, refused["token"], "post_card", card_arguments("after the refusals"))
    assert is_error and f"more than {REFUSALS_PER_MINUTE} refused calls in a minute" in text, text

    # The secret scanner: each web process has its scanner cached; a secret added by another
    # process, or replaced by one whose clock lags by an hour, is caught at once by both.
    older, newer, added = (f"{uuid.uuid4().hex[:10]}-secret-{k}" for k in ("older", "newer", "added"))
    secret_set(stack, secretive["session_id"], "OLDER", older)
    secret_set(stack, secretive["session_id"], "NEWER", newer)
    for web in (web_a, web_b):
        assert not call(web.url, secretive["token"], "post_card", card_arguments("nothing secret"))[0]
    secret_set(stack, secretive["session_id"], "ADDED", added)
    for web in (web_a, web_b):  # caught, and each caches the scanner of the three
        is_error, text = call(web.url, secretive["token"], "post_card", card_arguments(added))
        assert is_error and "contains the value of the secret ADDED" in text, (web.url, text)
    # Replaced in place (as many secrets as before) by a process whose clock is an hour behind.
    replaced = f"{uuid.uuid4().hex[:10]}-secret-replaced"
    secret_set(stack, secretive["session_id"], "OLDER", replaced, clock_behind_s=3600)
    for web in (web_a, web_b):
        is_error, text = call(web.url, secretive["token"], "post_card", card_arguments(replaced))
        assert is_error and "contains the value of the secret OLDER" in text, (web.url, text)

    report(
        capsys,
        f"scale-out: MCP requests per web process {dict(served)}, turns over both hosts {dict(on)},"
        f" {len(moved)} moved after a host kill; {time.monotonic() - started:.1f} s",
    )
