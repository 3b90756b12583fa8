"""Real components for every test: PostgreSQL, Redis, a Celery worker, uvicorn, the MCP SDK client."""

import asyncio
import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
import uvicorn
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test import TransactionTestCase
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from calvin.celery import app as celery_app
from calvin.dashboard.live import NUMBERER
from calvin.http_server import uvicorn_config
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from secrets_vault.crypto import new_key
from sessions.services import runner_start, session_start
from tests.support.ports import free_port
from tools.dispatcher import DISPATCHER
from tools.models import ToolCall

_fixture_teardown = TransactionTestCase._fixture_teardown


def _fixture_teardown_past_a_deadlock(self):
    """A transactional test's TRUNCATE, again if PostgreSQL chose it as a deadlock's victim.

    A worker's or the gateway's numbering of live events (calvin/dashboard/live.py), which runs
    just after their commits, may still hold the live tables when a test ends: the TRUNCATE and
    it can deadlock, and PostgreSQL may end the TRUNCATE rather than the numbering.
    """
    for attempt in range(3):
        try:
            return _fixture_teardown(self)
        except Exception as error:
            if "deadlock detected" not in str(error.__cause__ or error) or attempt == 2:
                raise
            time.sleep(0.2)


TransactionTestCase._fixture_teardown = _fixture_teardown_past_a_deadlock


@pytest.fixture(scope="session", autouse=True)
def _real_services(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        assert connection.vendor == "postgresql", "run the tests with scripts/test (PostgreSQL and Redis)"
    assert settings.CELERY_BROKER_URL.startswith("redis://"), "run the tests with scripts/test (Redis broker)"
    # Session ids start again with a new test database: start from empty directories too.
    for leftover in (settings.CALVIN_SESSIONS_DIR, settings.CALVIN_SESSIONS_TMP_DIR, settings.MEDIA_ROOT):
        shutil.rmtree(leftover, ignore_errors=True)
    # Runner ids start again too: drop counters an earlier run left in the shared cache.
    client = cache._cache.get_client()
    stale = list(client.scan_iter(match=cache.make_key("refusals:*")))
    if stale:
        client.delete(*stale)
    yield
    NUMBERER.stop()
    if not connection.settings_dict["NAME"].startswith("test_"):
        return  # no test in this run used the database
    # Server and worker threads keep pooled connections; let the test database be dropped.
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def _live_events_numbered():
    """What a test's commits named is numbered before the next test (calvin/dashboard/numberer.py)."""
    yield
    NUMBERER.drain()


@pytest.fixture(autouse=True)
def _email_limits_forgotten():
    """Sign-up and "send the link again" emails are limited per address and per client address
    (127.0.0.1 for every test): each test starts with none counted. Only these keys: the cache
    is shared Redis, never clear() it."""
    client = cache._cache.get_client()
    stale = list(client.scan_iter(match=cache.make_key("verify-resend:*")))
    if stale:
        client.delete(*stale)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2's 1M rounds cost ~0.4 s per user and per login; no test here is about hashing."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker):
    celery_app.control.purge()  # tasks left in the test queue by an aborted run
    with django_db_blocker.unblock():
        with start_worker(
            celery_app,
            pool="solo",
            perform_ping_check=False,
            shutdown_timeout=10,
            queues=[settings.CELERY_TASK_DEFAULT_QUEUE],
        ) as worker:
            # What `celery worker` starts on worker_ready (calvin/celery.py), which the test
            # worker does not send: the thread that applies new calls' effects.
            DISPATCHER.start()
            yield worker
            DISPATCHER.stop()


@pytest.fixture(scope="session")
def gateway(django_db_setup, django_db_blocker):
    """uvicorn serving calvin.asgi on a free loopback port, as in production."""
    port = free_port()
    server = uvicorn.Server(uvicorn_config(host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    with django_db_blocker.unblock():
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class Agent:
    """One runner of one session, as an agent sees it: a token and a directory."""

    session: object
    runner: object
    token: str
    url: str

    @property
    def directory(self) -> Path:
        return Path(self.session.directory)

    @property
    def nanoclaw(self) -> "Agent":
        """The same runner, talking to the `nanoclaw` server (/mcp/nanoclaw) with the same token."""
        return Agent(
            session=self.session,
            runner=self.runner,
            token=self.token,
            url=self.url.rsplit("/mcp", 1)[0] + "/mcp/nanoclaw",
        )

    async def _call(self, tool: str, arguments: dict):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=60) as http:
            async with Client(streamable_http_client(self.url, http_client=http), mode="legacy") as client:
                return await client.call_tool(tool, arguments)

    def call(self, tool: str, arguments: dict):
        return asyncio.run(self._call(tool, arguments))

    def call_many(self, tool: str, arguments_list: list[dict]):
        async def run_all():
            return await asyncio.gather(*(self._call(tool, a) for a in arguments_list))

        return asyncio.run(run_all())

    def raw_call(self, tool: str, arguments_json: str) -> dict:
        """tools/call with the arguments as JSON text exactly as written (NaN, lone
        surrogates...), over plain HTTP: the SDK client would normalise them first."""
        body = (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
            + json.dumps(tool)
            + ', "arguments": '
            + arguments_json
            + "}}"
        )
        response = httpx2.post(
            self.url,
            content=body.encode("utf-8", "surrogatepass"),
            headers={
                "authorization": f"Bearer {self.token}",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
            timeout=60,
        )
        assert response.status_code == 200, response.text
        return response.json()["result"]

    def list_tools(self):
        async def run():
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}) as http:
                async with Client(streamable_http_client(self.url, http_client=http), mode="legacy") as client:
                    return (await client.list_tools()).tools

        return asyncio.run(run())


def text_of(result) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


@pytest.fixture
def vault(settings) -> str:
    """A vault key of the test's own (a test that wants none sets SP_STORE_KEY = [])."""
    settings.SP_STORE_KEY = [new_key()]
    return settings.SP_STORE_KEY[0]


@pytest.fixture
def workspace(django_user_model):
    user = django_user_model.objects.create_user("owner", password="pw-owner-123")
    return workspace_create(name="Acme", slug="acme", owner_user=user)


@pytest.fixture
def make_agent(gateway, workspace):
    def make(ws=None) -> Agent:
        ws = ws or workspace
        session = session_start(workspace=ws, owner=Member.objects.filter(workspace=ws).first(), title="test")
        runner, token = runner_start(session=session)
        return Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")

    return make


@pytest.fixture
def agent(make_agent, celery_worker):
    yield make_agent()
    # Let the worker finish this test's effects before the tables are truncated under it.
    wait_for(lambda: not ToolCall.objects.filter(status__in=["pending", "applying"]).exists(), timeout=30)


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


@pytest.fixture
def hosts(gateway, tmp_path, settings):
    """Start real `manage.py host` daemons (tests/sessions/host_processes.py), with quick
    heartbeats; each is stopped when the test ends."""
    from tests.sessions.host_processes import host_start

    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    settings.CALVIN_HOST_LAPSE_SECONDS = 3.0
    started = []

    def start(name: str, **options):
        handle = host_start(gateway=gateway, name=name, directory=tmp_path / name, **options)
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop()
