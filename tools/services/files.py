"""send_file: the seed's file rules on a copy in Calvin's storage, then the outbox row (a chat) or
the agent's inbox (tools/services/inbox_files.py)."""

import mimetypes
import os
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.files import File
from django.core.files.storage import default_storage

from secrets_vault.scanner import SecretScanner
from tools.caller import Caller, file_roots
from tools.errors import ToolRefused
from tools.limits import runner_refuse_if_spent
from tools.services.common import refuse_secrets, secret_scanner_for, tool_call_record
from tools.services.paths import MAX_FILE_BYTES, OpenedFile, PathRefused, open_beneath, size_problem

CHUNK = 1024 * 1024

# Only these render inline, and only when the bytes say so (not the file name).
IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _refuse(text: str):
    raise ToolRefused(text)


def _open(caller: Caller, path: str) -> OpenedFile:
    try:
        return open_beneath(path, roots=file_roots(caller), base=caller.session_directory)
    except PathRefused as exc:
        raise ToolRefused(str(exc)) from None
    except OSError as exc:  # a racing path can fail in ways the walk did not foresee
        raise ToolRefused(f"cannot open {path}: {exc.strerror or exc}") from None


def _sniff(head: bytes, name: str) -> str:
    for magic, content_type in IMAGE_MAGIC:
        if head.startswith(magic):
            return content_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
    # A name that claims an image whose bytes are not one is served as a download.
    return "application/octet-stream" if guessed.startswith("image/") else guessed


class CappedReader:
    """Reads at most `limit` bytes, however much the file grows while it is read."""

    def __init__(self, handle, limit: int):
        self.handle, self.remaining = handle, limit

    def read(self, size: int = -1) -> bytes:
        if self.remaining <= 0:
            return b""
        chunk = self.handle.read(min(size if size > 0 else CHUNK, self.remaining))
        self.remaining -= len(chunk)
        return chunk


def file_copy_capped(*, handle, session_id: int) -> str:
    """Copy into Calvin's storage, stopping one byte past the limit, so a file that grows
    while it is copied costs at most 100 MiB + 1 byte of disk before it is refused."""
    return default_storage.save(
        f"tool-files/{session_id}/{uuid.uuid4().hex}", File(CappedReader(handle, MAX_FILE_BYTES + 1))
    )


def _storage_take(caller: Caller, size: int, path: str) -> int:
    """The workspace's storage quota, counted before the bytes are stored (refused: nothing stored)."""
    from calvin.workspaces.storage import storage_take

    refused = storage_take(workspace_id=caller.workspace_id, size=size, what=path)
    if refused:
        _refuse(refused)
    return size


def _storage_settle(caller: Caller, *, reserved: int, size: int, path: str) -> int:
    """The copy's real size (a file may grow or shrink while it is copied) replaces what was counted."""
    from calvin.workspaces.storage import storage_give_back

    if size > reserved:
        return reserved + _storage_take(caller, size - reserved, path)
    storage_give_back(workspace_id=caller.workspace_id, size=reserved - size)
    return size


def _copy_local(caller: Caller, path: str) -> tuple[str, str, int]:
    """A session whose directory is on the gateway (an issue_token runner): read it here."""
    opened = _open(caller, path)
    with os.fdopen(opened.fd, "rb") as handle:
        _check_size(opened.size, path)
        # Cheap early answer, so a runner at its limit cannot make us copy 100 MiB files.
        runner_refuse_if_spent(runner_id=caller.runner_id, tool="send_file")
        reserved = _storage_take(caller, opened.size, path)
        # Copied now, under a generated name (the real one travels in the payload): the
        # agent may change or delete its file before the worker runs.
        try:
            return file_copy_capped(handle=handle, session_id=caller.session_id), opened.name, reserved
        except BaseException:
            _storage_settle(caller, reserved=reserved, size=0, path=path)
            raise


class _CappedSink:
    """Keeps at most 100 MiB + 1 byte of what a host sends, whatever it sends."""

    def __init__(self, handle):
        self.handle, self.remaining = handle, MAX_FILE_BYTES + 1

    def write(self, data: bytes) -> None:
        data = data[: max(self.remaining, 0)]
        self.remaining -= len(data)
        self.handle.write(data)


def _copy_from_host(caller: Caller, path: str) -> tuple[str, str, int]:
    """The session directory is on its host: the host opens the file (the same walk, against
    its own directories) and sends the bytes over its connection."""
    from sessions.host_link import HostRefused, HostUnavailable, host_request

    runner_refuse_if_spent(runner_id=caller.runner_id, tool="send_file")
    with tempfile.TemporaryFile() as spool:
        try:
            answer = host_request(
                host_id=caller.host_id,
                op="file.read",
                arguments={"session": caller.session_id, "path": path},
                sink=_CappedSink(spool),
            )
        except HostRefused as exc:
            raise ToolRefused(str(exc)) from None
        except HostUnavailable as exc:
            raise ToolRefused(f"cannot read {path}: {exc}") from None
        reserved = _storage_take(caller, spool.tell(), path)  # the spool is a temporary file, not storage
        spool.seek(0)
        try:
            stored = file_copy_capped(handle=spool, session_id=caller.session_id)
        except BaseException:
            _storage_settle(caller, reserved=reserved, size=0, path=path)
            raise
    name = answer.get("name") if isinstance(answer.get("name"), str) else ""
    return stored, os.path.basename(name)[:255] or os.path.basename(path), reserved


def _check_size(size: int, path: str) -> None:
    problem = size_problem(size, path)
    if problem:
        _refuse(problem)


def files_send(
    *, caller: Caller, path: str, comment: str | None = None, title: str | None = None, alt_text: str | None = None
) -> dict:
    """Seed 000's send_file: into the session's own thread."""
    return file_send(
        caller=caller,
        path=path,
        post={"comment": comment, "title": title, "alt_text": alt_text},
        arguments={"path": path, "comment": comment, "title": title, "alt_text": alt_text},
        server="calvin",
    )


@dataclass(frozen=True)
class CheckedCopy:
    """A file copied into Calvin's storage that passed every rule of send_file."""

    stored: str  # its name in Calvin's storage
    name: str  # what it is shown (or delivered) as: the display name, else the file's own
    size: int
    content_type: str
    secrets: SecretScanner  # what the caller's recorded call is checked against too
    reserved: int  # bytes counted against the workspace's storage quota


def file_copy_checked(
    *, caller: Caller, path: str, display_name: str | None = None, texts: Sequence[str | None] = ()
) -> CheckedCopy:
    """Seed 000's send_file rules on a copy of the file: inside the session's roots, size,
    the workspace's storage quota, no secret in the bytes, the names or `texts` (what is shown
    with it). Every check reads the copy, i.e. exactly the bytes that will be delivered.
    Refused: nothing is kept. The caller records the call, or discards the copy on failure."""
    stored, opened_name, reserved = _copy_from_host(caller, path) if caller.host_id else _copy_local(caller, path)
    name = display_name or opened_name
    try:
        scanner = secret_scanner_for(caller)
        # Names are outbound too: the file name and title are shown, the path is stored.
        refuse_secrets(
            what="the path, file name, comment, title or alt text",
            secrets=scanner,
            content="\n".join(filter(None, [path, opened_name, name, *texts])),
        )
        size = default_storage.size(stored)
        reserved = _storage_settle(caller, reserved=reserved, size=size, path=path)
        _check_size(size, path)
        with default_storage.open(stored, "rb") as copy:
            content_type = _sniff(copy.read(16), name)
            copy.seek(0)
            found = scanner.find_in_file(copy)
            if found is not None:
                _refuse(f"{path} contains the value of the secret {found} (plain or encoded); nothing was sent")
    except BaseException:
        default_storage.delete(stored)
        _storage_settle(caller, reserved=reserved, size=0, path=path)
        raise
    return CheckedCopy(
        stored=stored, name=name, size=size, content_type=content_type, secrets=scanner, reserved=reserved
    )


def file_copy_discard(*, caller: Caller, copy: CheckedCopy, path: str) -> None:
    """The copy is not delivered after all (the call was refused when recorded): its bytes go."""
    default_storage.delete(copy.stored)
    _storage_settle(caller, reserved=copy.reserved, size=0, path=path)


def file_send(
    *,
    caller: Caller,
    path: str,
    post: dict,
    arguments: dict,
    server: str,
    thread_id: int | None = None,
    display_name: str | None = None,
) -> dict:
    """The one file service both servers' send_file use to post into a chat: the checked copy
    (file_copy_checked) and one outbox row counted against the runner's one send_file limit.

    `post` holds what is shown with the file (comment, title, alt_text); `display_name`
    replaces the file's own name (NanoClaw's `filename`); `thread_id` sends it to a
    destination thread instead of the session's own.
    """
    comment, title, alt_text = post.get("comment"), post.get("title"), post.get("alt_text")
    copy = file_copy_checked(caller=caller, path=path, display_name=display_name, texts=[comment, title, alt_text])
    payload = {
        "file_name": copy.name,
        "title": title or copy.name,
        "comment": comment,
        "alt_text": alt_text,
        "size": copy.size,
        "content_type": copy.content_type,
    }
    if thread_id is not None:
        payload["thread_id"] = thread_id
    try:
        call = tool_call_record(
            caller=caller,
            tool="send_file",
            server=server,
            arguments=arguments,
            payload=payload,
            file_name=copy.stored,
            secrets=copy.secrets,
        )
    except BaseException:
        file_copy_discard(caller=caller, copy=copy, path=path)
        raise
    return {"tool_call_id": call.id, "status": call.status, "file_name": copy.name, "size": copy.size}
