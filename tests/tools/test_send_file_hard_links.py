"""send_file and hard links, on both servers: a second name of a file may lie anywhere (the
gateway's var/, /etc), so a regular file with more than one link is refused, on the gateway
and on a real host; an ordinary file is still sent."""

import os
import tempfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage

from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.sessions.test_gaps_sends import on_host, quick_heartbeats  # noqa: F401
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

HARD_LINK = "is a hard link to a file that may lie outside the session directory"
SERVERS = ["calvin", "nanoclaw"]


def send_file(agent, server: str, path: str):
    if server == "nanoclaw":
        return agent.nanoclaw.call("send_file", {"path": path, "to": "thread"})
    return agent.call("send_file", {"path": path})


def refused(agent, server: str, path: str) -> str:
    result = send_file(agent, server, path)
    text = text_of(result)
    assert result.is_error, text
    assert f"{path} {HARD_LINK}" in text, text
    assert not ToolCall.objects.filter(session=agent.session).exists(), "a refused call leaves no row"
    stored = f"tool-files/{agent.session.id}"
    assert not default_storage.exists(stored) or not default_storage.listdir(stored)[1], "a file was stored"
    return text


def sent_bytes(agent, server: str, path: str) -> bytes:
    result = send_file(agent, server, path)
    assert not result.is_error, text_of(result)
    call_id = ToolCall.objects.get(session=agent.session, tool="send_file").id
    wait_for(lambda: ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED)
    return Message.objects.get(tool_call_id=call_id).file.read()


@pytest.fixture
def gateway_file():
    """A file in the gateway's var/ (as vault_key and secret_key are), outside every session."""
    path = Path(settings.VAR_DIR) / "outside" / "gateway-key"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("the gateway's key, never to be sent")
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def temp_file():
    """A file in the machine's shared temp directory, outside both of the session's roots."""
    with tempfile.NamedTemporaryFile("w", suffix=".key", delete=False) as handle:
        handle.write("someone else's scratch file")
    yield Path(handle.name)
    os.unlink(handle.name)


@pytest.mark.parametrize("server", SERVERS)
def test_a_hard_link_to_a_file_in_the_gateways_var_is_refused(agent, server, gateway_file):
    os.link(gateway_file, agent.directory / "hv")
    refused(agent, server, "hv")
    refused(agent, server, str(agent.directory / "hv"))


@pytest.mark.parametrize("server", SERVERS)
def test_a_hard_link_to_a_temp_file_outside_the_roots_is_refused(agent, server, temp_file):
    os.link(temp_file, agent.directory / "scratch.key")
    refused(agent, server, "scratch.key")
    # In the session's own temp directory too, which is a root of its own.
    os.link(temp_file, Path(agent.session.temp_directory) / "scratch.key")
    refused(agent, server, str(Path(agent.session.temp_directory) / "scratch.key"))


@pytest.mark.parametrize("server", SERVERS)
def test_a_file_linked_twice_inside_the_session_directory_is_refused_by_both_names(agent, server):
    (agent.directory / "report.txt").write_text("twice")
    (agent.directory / "copies").mkdir()
    os.link(agent.directory / "report.txt", agent.directory / "copies" / "report.txt")
    refused(agent, server, "report.txt")
    refused(agent, server, "copies/report.txt")


@pytest.mark.parametrize("server", SERVERS)
def test_the_ordinary_file_is_still_sent(agent, server):
    (agent.directory / "report.txt").write_text("one link")
    assert os.stat(agent.directory / "report.txt").st_nlink == 1
    assert sent_bytes(agent, server, "report.txt") == b"one link"


@pytest.mark.parametrize("server", SERVERS)
def test_a_host_refuses_a_hard_link_too(on_host, server):  # noqa: F811
    """The session directory is on a real host daemon: the host's own walk refuses the link, and
    the gateway stores nothing."""
    host, directory, agent = on_host
    outside = host.directory / "host-state.key"
    outside.write_text("the host's own state, never to be sent")
    os.link(outside, directory / "hv")
    refused(agent, server, "hv")
    (directory / "ordinary.txt").write_text("from the host")
    result = send_file(agent, server, "ordinary.txt")
    assert not result.is_error, text_of(result)
