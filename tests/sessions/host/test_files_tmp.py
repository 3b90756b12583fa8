"""send_file's bytes on the host: a sandboxed agent's /tmp is its session's temp directory, and
only its own; without the sandbox /tmp is the host's, which is outside the session."""

import asyncio
import base64
import shutil
import tempfile
from pathlib import Path

import pytest

from sessions.host.daemon import HostDaemon, HostUnsandboxed
from sessions.host.files import file_read_answer
from sessions.host.sandbox import Sandbox


def read(tmp_path, path: str, *, session: int = 1, sandboxed: bool) -> dict:
    sent = []

    async def send(message: dict) -> None:
        sent.append(message)

    request = {"op": "file.read", "request": "r-1", "session": session, "path": path}
    asyncio.run(
        file_read_answer(
            request=request,
            sessions_root=tmp_path / "sessions",
            temp_root=tmp_path / "tmp",
            send=send,
            sandboxed=sandboxed,
        )
    )
    reply = sent[-1]
    reply["data"] = b"".join(base64.b64decode(m["data"]) for m in sent if m["type"] == "reply.chunk")
    return reply


@pytest.fixture
def two_sessions(tmp_path):
    for session in (1, 2):
        (tmp_path / "sessions" / f"session-{session}").mkdir(parents=True)
        (tmp_path / "tmp" / f"session-{session}").mkdir(parents=True)
        (tmp_path / "tmp" / f"session-{session}" / "shot.png").write_bytes(f"shot of {session}".encode())
    return tmp_path


def test_tmp_of_a_sandboxed_agent_is_its_sessions_temp_directory(two_sessions):
    reply = read(two_sessions, "/tmp/shot.png", sandboxed=True)
    assert (reply["ok"], reply["name"], reply["data"]) == (True, "shot.png", b"shot of 1")
    assert read(two_sessions, "/tmp/shot.png", session=2, sandboxed=True)["data"] == b"shot of 2"


def test_another_sessions_temp_directory_stays_out_of_reach(two_sessions):
    for path in ("/tmp/../session-2/shot.png", f"{two_sessions}/tmp/session-2/shot.png", "/tmp/../../x"):
        reply = read(two_sessions, path, sandboxed=True)
        # Where the host's state lies under its own /tmp (a clone in /tmp), the agent's name for
        # the other session's file is a name inside its own /tmp, where there is no such file.
        refused = "outside the session directory" in reply["error"] or "no file at" in reply["error"]
        assert not reply["ok"] and refused and not reply["data"], (path, reply)
    assert read(two_sessions, "/tmp", sandboxed=True)["ok"] is False  # a directory


def test_a_sessions_own_directories_under_the_hosts_tmp_keep_their_names():
    """The sandbox binds the session's directories at their host names, over its own /tmp."""
    state = Path(tempfile.mkdtemp(prefix="calvin-host-", dir="/tmp"))
    try:
        for root in ("sessions", "tmp"):
            (state / root / "session-1").mkdir(parents=True)
        (state / "sessions" / "session-1" / "notes.txt").write_bytes(b"own notes")
        (state / "tmp" / "session-1" / "shot.png").write_bytes(b"own shot")
        for path, data in ((f"{state}/sessions/session-1/notes.txt", b"own notes"), ("/tmp/shot.png", b"own shot")):
            reply = read(state, path, sandboxed=True)
            assert (reply["ok"], reply["data"]) == (True, data), (path, reply)
        reply = read(state, f"{state}/sessions/session-1/../session-2/x", sandboxed=True)
        assert not reply["ok"] and "outside the session directory" in reply["error"], reply
    finally:
        shutil.rmtree(state)


def test_without_the_sandbox_tmp_is_the_hosts_own_and_refused(two_sessions):
    reply = read(two_sessions, "/tmp/shot.png", sandboxed=False)
    assert not reply["ok"] and "outside the session directory" in reply["error"]


def test_a_daemon_without_a_sandbox_refuses_before_it_connects(tmp_path):
    daemon = HostDaemon(gateway="http://127.0.0.1:9", token="t", name="bare", capacity=1, state_dir=tmp_path)
    daemon.sandbox = Sandbox.none("bubblewrap (bwrap) is not installed")
    with pytest.raises(HostUnsandboxed, match="CALVIN_ALLOW_UNSANDBOXED=1"):
        asyncio.run(asyncio.wait_for(daemon.run(), 5))
