"""send_file over real MCP: every rule of seed 000, and the effect applied once."""

import base64
import os
import tempfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage

from secrets_vault.crypto import new_key
from secrets_vault.services import secret_set
from sessions.models import Message
from sessions.services import runner_start
from tests.conftest import Agent, text_of, wait_for
from tools.models import ToolCall
from tools.services.files import CHUNK, MAX_FILE_BYTES

pytestmark = pytest.mark.django_db(transaction=True)

PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def refused(agent: Agent, arguments: dict, expected: str) -> str:
    result = agent.call("send_file", arguments)
    text = text_of(result)
    assert result.is_error, text
    assert expected in text, text
    assert not ToolCall.objects.filter(session=agent.session).exists(), "a refused call leaves no row"
    return text


def applied_message(agent: Agent, result) -> Message:
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED)
    return Message.objects.get(tool_call_id=call_id)


@pytest.fixture
def outside_dir():
    """A directory that is neither the session directory nor under the system temp directory."""
    path = Path(settings.VAR_DIR) / "outside"
    path.mkdir(parents=True, exist_ok=True)
    assert not str(path.resolve()).startswith(os.path.realpath(tempfile.gettempdir()) + os.sep)
    return path


def test_relative_path_is_posted_with_comment_title_and_alt_text(agent):
    (agent.directory / "report.txt").write_text("all green")
    result = agent.call(
        "send_file", {"path": "report.txt", "comment": "The report", "title": "Nightly", "alt_text": "n/a"}
    )
    message = applied_message(agent, result)
    assert message.thread_id == agent.session.thread_id
    assert message.kind == Message.Kind.FILE
    assert (message.text, message.file_title, message.file_name) == ("The report", "Nightly", "report.txt")
    assert message.file.read() == b"all green"
    assert message.content_type == "text/plain"


def test_title_defaults_to_the_file_name(agent):
    (agent.directory / "notes.md").write_text("# notes")
    message = applied_message(agent, agent.call("send_file", {"path": str(agent.directory / "notes.md")}))
    assert message.file_title == "notes.md"


def test_images_are_recognised_by_their_bytes(agent):
    (agent.directory / "chart.png").write_bytes(PNG_1x1)
    (agent.directory / "fake.png").write_text("<svg onload=alert(1)>")
    real = applied_message(agent, agent.call("send_file", {"path": "chart.png"}))
    fake = applied_message(agent, agent.call("send_file", {"path": "fake.png"}))
    assert real.content_type == "image/png" and real.is_inline_image
    assert fake.content_type == "application/octet-stream" and not fake.is_inline_image


def test_a_file_in_the_sessions_own_temp_directory_is_allowed(agent):
    temp = Path(agent.session.temp_directory)
    assert temp.is_dir() and not temp.is_relative_to(agent.directory)
    assert (temp.stat().st_mode & 0o777) == 0o700  # no other user on the host reads it
    (temp / "run.log").write_text("from tmp")
    message = applied_message(agent, agent.call("send_file", {"path": str(temp / "run.log")}))
    assert message.file.read() == b"from tmp"


def test_the_machines_shared_temp_directory_is_not_the_sessions(agent):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as handle:
        handle.write("a gateway log, or another session's scratch file")
    try:
        refused(agent, {"path": handle.name}, "is outside the session directory and the system temp directory")
    finally:
        os.unlink(handle.name)


def test_another_sessions_temp_directory_is_refused(agent, make_agent):
    other = make_agent()
    theirs = Path(other.session.temp_directory) / "scratch.txt"
    theirs.write_text("theirs")
    refused(agent, {"path": str(theirs)}, "is outside the session directory and the system temp directory")
    relative = os.path.relpath(theirs, agent.session.temp_directory)
    refused(agent, {"path": str(Path(agent.session.temp_directory) / relative)}, "is outside")


def test_the_file_is_copied_at_call_time(agent):
    path = agent.directory / "draft.txt"
    path.write_text("version 1")
    result = agent.call("send_file", {"path": "draft.txt"})
    path.write_text("version 2, written after the call")
    assert applied_message(agent, result).file.read() == b"version 1"


def test_absolute_path_outside_both_roots_is_refused(agent, outside_dir):
    target = outside_dir / "private.txt"
    target.write_text("not yours")
    refused(agent, {"path": str(target)}, "is outside the session directory and the system temp directory")
    refused(agent, {"path": "/etc/passwd"}, "/etc/passwd is outside the session directory")


def test_dotdot_escape_is_refused(agent, outside_dir):
    (outside_dir / "private.txt").write_text("not yours")
    relative = os.path.relpath(outside_dir / "private.txt", agent.directory)
    assert relative.startswith("..")
    refused(agent, {"path": relative}, "is outside the session directory")


def test_symlink_to_outside_is_refused(agent, outside_dir):
    (outside_dir / "private.txt").write_text("not yours")
    (agent.directory / "innocent.txt").symlink_to(outside_dir / "private.txt")
    refused(agent, {"path": "innocent.txt"}, "innocent.txt is outside the session directory")
    (agent.directory / "escape").symlink_to(outside_dir)
    refused(agent, {"path": "escape/private.txt"}, "is outside the session directory")


def test_symlink_within_the_session_directory_is_followed(agent):
    (agent.directory / "real.txt").write_text("real")
    (agent.directory / "alias.txt").symlink_to(agent.directory / "real.txt")
    message = applied_message(agent, agent.call("send_file", {"path": "alias.txt"}))
    assert message.file.read() == b"real" and message.file_name == "real.txt"


def test_missing_file_is_refused(agent):
    refused(agent, {"path": "nothing-here.txt"}, "no file at nothing-here.txt")


def test_directory_and_fifo_are_not_regular_files(agent):
    (agent.directory / "subdir").mkdir()
    refused(agent, {"path": "subdir"}, "subdir is not a regular file")
    os.mkfifo(agent.directory / "pipe")
    refused(agent, {"path": "pipe"}, "pipe is not a regular file")


def test_empty_file_is_refused(agent):
    (agent.directory / "empty.txt").write_bytes(b"")
    refused(agent, {"path": "empty.txt"}, "empty.txt is empty")


def test_nul_in_path_is_refused(agent):
    refused(agent, {"path": "a\x00b"}, "path: contains a NUL character")


def test_more_than_100_mib_is_refused_and_exactly_100_mib_is_sent(agent):
    assert MAX_FILE_BYTES == 100 * 1024 * 1024  # seed 000's number, pinned here and not read from the code
    big = agent.directory / "big.bin"
    with open(big, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: no 100 MiB written to disk
    refused(agent, {"path": "big.bin"}, "big.bin is larger than 100 MiB, the limit")
    with open(big, "r+b") as handle:
        handle.truncate(MAX_FILE_BYTES)
    message = applied_message(agent, agent.call("send_file", {"path": "big.bin"}))
    assert message.file.size == MAX_FILE_BYTES
    message.file.delete(save=False)


@pytest.mark.parametrize(("argument", "limit"), [("comment", 3000), ("title", 200), ("alt_text", 1000)])
def test_text_arguments_have_the_seed_limits(agent, argument, limit):
    (agent.directory / "a.txt").write_text("a")
    refused(agent, {"path": "a.txt", argument: "x" * (limit + 1)}, f"at most {limit} characters")
    applied_message(agent, agent.call("send_file", {"path": "a.txt", argument: "x" * limit}))


def test_a_file_containing_a_session_secret_is_refused(agent, vault):
    secret_set(session=agent.session, name="STRIPE_API_KEY", value="sk_live_abc123XYZ")
    (agent.directory / "env.txt").write_text("KEY=sk_live_abc123XYZ\n")
    refused(agent, {"path": "env.txt"}, "contains the value of the secret")


def test_a_secret_across_a_read_chunk_boundary_is_found(agent, vault):
    secret_set(session=agent.session, name="TOKEN", value="boundary-secret-value")
    content = b"x" * (CHUNK - 5) + b"boundary-secret-value" + b"y" * 10
    (agent.directory / "dump.bin").write_bytes(content)
    refused(agent, {"path": "dump.bin"}, "contains the value of the secret")


def test_a_comment_containing_a_secret_is_refused(agent, vault):
    secret_set(session=agent.session, name="TOKEN", value="hunter2-hunter2")
    (agent.directory / "ok.txt").write_text("harmless")
    text = refused(
        agent, {"path": "ok.txt", "comment": "token is hunter2-hunter2"}, "contains the value of the secret TOKEN"
    )
    assert "hunter2-hunter2" not in text


def test_another_sessions_secret_does_not_block(agent, make_agent, vault):
    other = make_agent()
    secret_set(session=other.session, name="TOKEN", value="theirs-only-123")
    (agent.directory / "ok.txt").write_text("theirs-only-123")
    applied_message(agent, agent.call("send_file", {"path": "ok.txt"}))


def test_secrets_that_cannot_be_decrypted_fail_closed(agent, settings):
    settings.SP_STORE_KEY = [new_key()]
    secret_set(session=agent.session, name="TOKEN", value="value-123456")
    settings.SP_STORE_KEY = [new_key()]  # the key that encrypted it is gone
    (agent.directory / "ok.txt").write_text("harmless")
    refused(agent, {"path": "ok.txt"}, "cannot check this content against the session's secrets")


def test_fifty_files_per_runner_then_a_restart_resets_the_count(agent):
    (agent.directory / "f.txt").write_text("f")
    for _ in range(50):
        assert not agent.call("send_file", {"path": "f.txt"}).is_error
    result = agent.call("send_file", {"path": "f.txt"})
    assert result.is_error and "limit of 50 files per runner reached" in text_of(result)
    assert ToolCall.objects.filter(session=agent.session).count() == 50

    runner, token = runner_start(session=agent.session)
    restarted = Agent(session=agent.session, runner=runner, token=token, url=agent.url)
    assert not restarted.call("send_file", {"path": "f.txt"}).is_error
    assert ToolCall.objects.filter(session=agent.session).count() == 51


def test_sixty_concurrent_calls_apply_exactly_fifty(agent):
    (agent.directory / "f.txt").write_text("f")
    results = agent.call_many("send_file", [{"path": "f.txt"}] * 60)
    ok = [r for r in results if not r.is_error]
    refusals = [text_of(r) for r in results if r.is_error]
    assert len(ok) == 50 and len(refusals) == 10
    assert all("limit of 50 files per runner reached" in t for t in refusals)
    wait_for(lambda: ToolCall.objects.filter(session=agent.session, status=ToolCall.Status.APPLIED).count() == 50)
    assert Message.objects.filter(thread=agent.session.thread, kind="file").count() == 50
    assert agent.runner.counts.get(tool="send_file").used == 50


def test_a_refused_call_leaves_no_stored_file(agent):
    (agent.directory / "f.txt").write_text("f")
    for _ in range(50):
        agent.call("send_file", {"path": "f.txt"})
    stored_dir = f"tool-files/{agent.session.id}"
    before = len(default_storage.listdir(stored_dir)[1])
    assert agent.call("send_file", {"path": "f.txt"}).is_error
    assert len(default_storage.listdir(stored_dir)[1]) == before == 50
