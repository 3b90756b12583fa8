"""send_file from a session whose directory is on a real host: the nanoclaw server's too, the
host's own refusals, the runner's limit before any read, and a file that grows while read."""

import io
import os
import threading
import time

import pytest
from django.core.files.storage import default_storage

from sessions.models import Message, RunnerCount, Turn
from sessions.services import runner_start
from tests.conftest import Agent as McpAgent
from tests.conftest import text_of, wait_for
from tests.sessions.host_processes import agent_texts, scripted, wait_connected
from tests.sessions.test_hosts import new_session, say
from tools.models import ToolCall
from tools.services import files
from tools.services.paths import MAX_FILE_BYTES

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_heartbeats(settings):
    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    settings.CALVIN_HOST_LAPSE_SECONDS = 3.0


@pytest.fixture
def on_host(hosts, workspace, gateway):
    """A session that ran one turn on a real host (which made its directory there), and an
    agent of it (a runner of that host) calling the gateway's real /mcp."""
    session = new_session(workspace)
    scripted(session.agent, [{"reply": "ready"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "warm up")
    wait_for(lambda: agent_texts(session) == ["ready"], timeout=30)
    session.refresh_from_db()
    runner, token = runner_start(session=session, host=session.host)
    agent = McpAgent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    return host, host.session_directory(session.id), agent


def refused(result, expected: str) -> str:
    text = text_of(result)
    assert result.is_error and expected in text, text
    return text


def test_nanoclaw_send_file_from_a_script_turn_comes_through_the_host(hosts, workspace, celery_worker):
    session = new_session(workspace)
    step = {"path": "{prompt}", "to": "thread", "text": "the data", "filename": "data.csv"}
    scripted(session.agent, [{"server": "nanoclaw", "tool": "send_file", "arguments": step}, {"reply": "sent"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "warm-up.txt")  # the first turn makes the session directory on the host
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.DONE).exists(), timeout=30)
    (host.session_directory(session.id) / "plot.csv").write_bytes(b"a,b\n1,2\n")
    say(session, "plot.csv")
    call = wait_for(lambda: ToolCall.objects.filter(session=session, tool="send_file").first(), timeout=30)
    assert call.server == "nanoclaw" and call.arguments["to"] == "thread"
    message = wait_for(lambda: Message.objects.filter(tool_call=call).first(), timeout=20)
    assert message.file.read() == b"a,b\n1,2\n"
    assert (message.thread_id, message.file_name, message.text) == (session.thread_id, "data.csv", "the data")


@pytest.mark.parametrize("server", ["calvin", "nanoclaw"])
def test_the_host_refuses_a_fifo_and_a_directory(on_host, server):
    host, directory, agent = on_host
    os.mkfifo(directory / "pipe")
    (directory / "folder").mkdir()
    client = agent.nanoclaw if server == "nanoclaw" else agent
    extra = {"to": "thread"} if server == "nanoclaw" else {}
    refused(client.call("send_file", {"path": "pipe", **extra}), "pipe is not a regular file")
    refused(client.call("send_file", {"path": "folder", **extra}), "is not a regular file")
    refused(client.call("send_file", {"path": str(directory / "folder"), **extra}), "is not a regular file")
    assert not ToolCall.objects.filter(tool="send_file").exists()


def test_a_spent_runner_is_refused_before_the_host_reads_its_file(on_host, monkeypatch):
    host, directory, agent = on_host
    (directory / "big.bin").write_bytes(b"x" * 1024)
    asked = []
    from sessions import host_link

    real = host_link.host_request
    monkeypatch.setattr(host_link, "host_request", lambda **kw: asked.append(kw) or real(**kw))
    # One call that reads, to show the count below is the host being asked.
    assert not agent.call("send_file", {"path": "big.bin"}).is_error
    assert len(asked) == 1
    RunnerCount.objects.filter(runner=agent.runner, tool="send_file").update(used=50)
    refused(agent.call("send_file", {"path": "big.bin"}), "limit of 50 files per runner reached")
    refused(agent.nanoclaw.call("send_file", {"path": "big.bin", "to": "thread"}), "limit of 50 files per runner")
    assert len(asked) == 1  # the host was not asked for the bytes


def _reading(pid: int, path: str) -> bool:
    """Whether process `pid` holds `path` open for reading (not only the O_PATH the walk judges)."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != path:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                flags = int(next(line for line in info if line.startswith("flags:")).split()[1], 8)
            if not flags & os.O_PATH:
                return True
        except (OSError, StopIteration):
            continue
    return False


def test_a_file_that_grows_while_the_host_reads_it_is_cut_one_byte_past_the_limit_and_refused(on_host, monkeypatch):
    host, directory, agent = on_host
    growing = directory / "growing.log"
    with open(growing, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES - 1024 * 1024)  # under the limit when the host judges it
    received, kept = [], []

    class RecordingSink(files._CappedSink):
        def write(self, data):
            received.append(len(data))
            before = self.remaining
            super().write(data)
            kept.append(max(before, 0) - max(self.remaining, 0))

    monkeypatch.setattr(files, "_CappedSink", RecordingSink)
    stop = threading.Event()

    def grow():
        deadline = time.monotonic() + 60
        while not _reading(host.process.pid, str(growing)) and time.monotonic() < deadline and not stop.is_set():
            time.sleep(0.001)
        with open(growing, "ab") as handle:
            handle.write(b"y" * (50 * 1024 * 1024))  # while the host reads: well past the limit

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        result = agent.call("send_file", {"path": "growing.log"})
    finally:
        stop.set()
        writer.join(timeout=60)
    refused(result, "growing.log is larger than 100 MiB, the limit")
    assert growing.stat().st_size > MAX_FILE_BYTES + 40 * 1024 * 1024  # it did grow, well past
    assert sum(received) == MAX_FILE_BYTES + 1  # the host stopped one byte past the limit
    assert sum(kept) == MAX_FILE_BYTES + 1
    assert not ToolCall.objects.filter(tool="send_file").exists()
    stored = f"tool-files/{agent.session.id}"
    assert not default_storage.exists(stored) or default_storage.listdir(stored)[1] == []  # the copy is gone


def test_the_gateway_keeps_no_more_than_one_byte_past_the_limit_whatever_a_host_sends():
    spool = io.BytesIO()
    sink = files._CappedSink(spool)
    chunk = b"z" * (8 * 1024 * 1024)
    for _ in range(14):  # 112 MiB from a host that ignores its own cap
        sink.write(chunk)
    assert len(spool.getvalue()) == MAX_FILE_BYTES + 1
