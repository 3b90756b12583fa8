"""send_file against an attacker: path races, growing files, secrets in names, spent runners."""

import ctypes
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from secrets_vault.services import secret_set, secret_set_for_workspace
from sessions.models import RunnerCount
from tests.conftest import text_of
from tests.tools.test_send_file import applied_message, refused
from tools.models import ToolCall
from tools.services import files

pytestmark = pytest.mark.django_db(transaction=True)

# What a refusal of a racing path may say; anything else (a generic error) fails the test.
RACE_REFUSALS = ("is outside the session directory", "no file at", "is not a regular file", "cannot open")

SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    os.chdir(sys.argv[1])
    deadline = time.monotonic() + float(sys.argv[2])
    swaps = 0
    while time.monotonic() < deadline:
        if libc.renameat2(AT_FDCWD, b"docs", AT_FDCWD, b"swap", RENAME_EXCHANGE) == 0:
            swaps += 1
    print(swaps)
    """
)


@pytest.fixture
def many_refusals_allowed(settings):
    settings.CALVIN_REFUSALS_PER_MINUTE = 100_000


def test_swapping_a_directory_for_a_symlink_never_sends_a_file_from_outside(agent, many_refusals_allowed):
    """`docs` is swapped with a symlink to /etc (renameat2 RENAME_EXCHANGE) in a loop while
    the agent asks for docs/passwd again and again: only the session's own file is ever sent."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.fail("this C library has no renameat2; the race cannot be reproduced here")
    (agent.directory / "docs").mkdir()
    (agent.directory / "docs" / "passwd").write_text("the session's own passwd\n")
    (agent.directory / "swap").symlink_to("/etc")
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(agent.directory), "6"], stdout=subprocess.PIPE, text=True
    )
    sent, refusals = 0, []
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            paths = [{"path": "docs/passwd"}, {"path": str(agent.directory / "docs" / "passwd")}]
            results = agent.call_many("send_file", paths * 10)
            sent += sum(not r.is_error for r in results)
            refusals += [text_of(r) for r in results if r.is_error]
            RunnerCount.objects.filter(runner=agent.runner).update(used=0)  # keep well under 50 a runner
    finally:
        swaps = int(swapper.communicate(timeout=20)[0])
    assert swaps > 1000, "the swapper did not race"
    assert sent > 0 and refusals, (sent, refusals[:3])  # both sides of the race were hit
    assert all(any(reason in text for reason in RACE_REFUSALS) for text in refusals), set(refusals)
    for call in ToolCall.objects.filter(session=agent.session):
        with default_storage.open(call.file.name, "rb") as stored:
            assert stored.read() == b"the session's own passwd\n", f"call {call.id} sent a file from outside"


def test_symlinks_that_stay_inside_still_work(agent):
    (agent.directory / "real" / "deep").mkdir(parents=True)
    (agent.directory / "real" / "deep" / "data.txt").write_text("inside")
    (agent.directory / "rel").symlink_to("real/deep")  # relative, to a directory
    (agent.directory / "abs").symlink_to(agent.directory / "real")  # absolute, to a directory
    (agent.directory / "chain").symlink_to("rel/data.txt")  # a link to a path through a link
    for path in ("rel/data.txt", "abs/deep/data.txt", "chain", "rel/../deep/data.txt"):
        message = applied_message(agent, agent.call("send_file", {"path": path}))
        assert message.file.read() == b"inside" and message.file_name == "data.txt", path


def test_a_symlink_loop_is_a_clear_refusal(agent):
    (agent.directory / "a").symlink_to("b")
    (agent.directory / "b").symlink_to("a")
    refused(agent, {"path": "a"}, "too many levels of symbolic links")


class GrowingFile:
    """A real file on disk that an agent appends to while the gateway reads it."""

    def __init__(self, path: Path, grow_by: int, stop_at: int):
        self.path, self.grow_by, self.stop_at = path, grow_by, stop_at
        self.reader = open(path, "rb")

    def read(self, size: int = -1) -> bytes:
        if self.path.stat().st_size < self.stop_at:
            with open(self.path, "ab") as writer:
                writer.write(b"g" * self.grow_by)
        return self.reader.read(size)


def test_a_file_that_grows_while_it_is_copied_is_cut_at_the_limit_plus_one(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 4 << 20)
    source = tmp_path / "growing.log"
    source.write_bytes(b"start")
    growing = GrowingFile(source, grow_by=1 << 20, stop_at=16 << 20)  # would reach 16 MiB uncapped
    stored = files.file_copy_capped(handle=growing, session_id=0)
    try:
        assert default_storage.size(stored) == (4 << 20) + 1
    finally:
        default_storage.delete(stored)
        growing.reader.close()


def test_a_secret_in_the_file_name_title_or_path_is_refused(agent, vault):
    secret_set(session=agent.session, name="TOKEN", value="tok-9f8e7d6c5b")
    (agent.directory / "tok-9f8e7d6c5b.txt").write_text("harmless content")
    (agent.directory / "fine.txt").write_text("harmless content")
    (agent.directory / "alias.txt").symlink_to("tok-9f8e7d6c5b.txt")
    for arguments in (
        {"path": "tok-9f8e7d6c5b.txt"},
        {"path": "alias.txt"},  # the name shown is the target's
        {"path": "fine.txt", "title": "see tok-9f8e7d6c5b"},
        {"path": "fine.txt", "alt_text": "tok-9f8e7d6c5b"},
    ):
        text = refused(agent, arguments, "contains the value of the secret")
        assert "nothing was sent" in text
    assert (
        not default_storage.exists(f"tool-files/{agent.session.id}")
        or not default_storage.listdir(f"tool-files/{agent.session.id}")[1]
    )


def test_a_workspace_wide_secret_refuses_a_file(agent, vault):
    secret_set_for_workspace(workspace_id=agent.session.workspace_id, name="SHARED", value="ws-wide-77aa")
    (agent.directory / "env.txt").write_text("SHARED=ws-wide-77aa")
    refused(agent, {"path": "env.txt"}, "contains the value of the secret")


def test_a_spent_runner_is_refused_before_its_file_is_read(agent, vault):
    """The early limit check answers before the copy and the content check: a runner at its
    limit asking for a file holding a secret hears about the limit, not about the secret."""
    secret_set(session=agent.session, name="TOKEN", value="early-check-123")
    (agent.directory / "f.txt").write_text("early-check-123")
    RunnerCount.objects.filter(runner=agent.runner, tool="send_file").update(used=50)
    refused(agent, {"path": "f.txt"}, "limit of 50 files per runner reached")
