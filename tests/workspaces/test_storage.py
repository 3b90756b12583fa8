"""The storage quota (Quota.storage_mib): files are counted before their bytes are stored, a file
past the quota is refused with the quota's wording and nothing stored, two uploads racing for the
last MiB cannot both pass, a refused copy gives its bytes back, and each workspace counts its own."""

import threading

import pytest
from django.core.files.storage import default_storage
from django.db import connection

from calvin.workspaces.models import Quota, StorageUsage
from calvin.workspaces.storage import MIB, storage_give_back, storage_take, storage_used
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import other_workspace  # noqa: F401 (a fixture)
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def limit(workspace, mib: int) -> None:
    Quota.objects.filter(workspace=workspace).update(storage_mib=mib)


def stored_files(session_id: int) -> list[str]:
    try:
        return default_storage.listdir(f"tool-files/{session_id}")[1]
    except FileNotFoundError:
        return []


def test_a_file_is_counted_and_its_message_records_its_size(agent, workspace):
    (agent.directory / "report.txt").write_bytes(b"x" * 1000)
    result = agent.call("send_file", {"path": "report.txt"})
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED)
    assert ToolCall.objects.get(id=call_id).message.file_size == 1000
    assert storage_used(workspace_id=workspace.id) == 1000


def test_a_file_past_the_quota_is_refused_before_anything_is_stored(agent, workspace):
    limit(workspace, 1)
    (agent.directory / "small.bin").write_bytes(b"a" * (MIB // 2))
    assert not agent.call("send_file", {"path": "small.bin"}).is_error
    (agent.directory / "big.bin").write_bytes(b"b" * (MIB // 2 + 1))
    result = agent.call("send_file", {"path": "big.bin"})
    text = text_of(result)
    assert result.is_error
    assert "workspace quota reached: 1 MiB of stored files (0.5 MiB used); big.bin (0.5 MiB) would pass it" in text
    assert "nothing was stored" in text
    assert len(stored_files(agent.session.id)) == 1  # only the first file's copy
    assert storage_used(workspace_id=workspace.id) == MIB // 2
    assert ToolCall.objects.filter(session=agent.session).count() == 1


def test_a_refused_copy_gives_its_bytes_back(agent, workspace, vault):
    from secrets_vault.services import secret_set

    secret_set(session=agent.session, name="TOKEN", value="s3cr3t-value-123456")
    (agent.directory / "leak.txt").write_text("the token is s3cr3t-value-123456")
    result = agent.call("send_file", {"path": "leak.txt"})
    assert result.is_error and "secret" in text_of(result)
    assert storage_used(workspace_id=workspace.id) == 0


def test_two_uploads_racing_for_the_last_mib_cannot_both_pass(workspace):
    limit(workspace, 1)
    results, start = [], threading.Barrier(10)

    def take():
        try:
            start.wait()
            results.append(storage_take(workspace_id=workspace.id, size=MIB // 2 + 1))
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 1
    assert StorageUsage.objects.get(workspace=workspace).bytes == MIB // 2 + 1


def test_each_workspace_counts_its_own(workspace, other_workspace):  # noqa: F811
    limit(workspace, 1)
    assert storage_take(workspace_id=other_workspace.id, size=50 * MIB) is None  # its default 10 GiB
    assert storage_take(workspace_id=workspace.id, size=MIB) is None
    assert storage_take(workspace_id=workspace.id, size=1).startswith("workspace quota reached: 1 MiB")
    storage_give_back(workspace_id=workspace.id, size=MIB)
    assert storage_used(workspace_id=workspace.id) == 0
    assert storage_used(workspace_id=other_workspace.id) == 50 * MIB
