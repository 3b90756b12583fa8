"""send_file: the seed's file rules, a copy in Calvin's storage, then the outbox row."""

import mimetypes
import os
import stat
import tempfile
import uuid
from pathlib import Path

from django.core.files import File
from django.core.files.storage import default_storage

from tools.caller import Caller
from tools.errors import ToolRefused
from tools.limits import runner_refuse_if_spent
from tools.services.common import refuse_secrets, secret_values_for, tool_call_record

MAX_FILE_BYTES = 100 * 1024 * 1024
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


def _allowed_roots(session_directory: str) -> list[Path]:
    return [Path(os.path.realpath(session_directory)), Path(os.path.realpath(tempfile.gettempdir()))]


def file_resolve(*, session_directory: str, path: str) -> Path:
    """The real path (symlinks and .. resolved) if it lies inside an allowed root."""
    if "\x00" in path:
        _refuse("the path contains a NUL character")
    candidate = Path(path) if os.path.isabs(path) else Path(session_directory) / path
    real = Path(os.path.realpath(candidate))
    if not any(real == root or root in real.parents for root in _allowed_roots(session_directory)):
        _refuse(f"{path} is outside the session directory and the system temp directory")
    return real


def _sniff(head: bytes, name: str) -> str:
    for magic, content_type in IMAGE_MAGIC:
        if head.startswith(magic):
            return content_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
    # A name that claims an image whose bytes are not one is served as a download.
    return "application/octet-stream" if guessed.startswith("image/") else guessed


def _contains_any(handle, values: list[str]) -> bool:
    needles = [v.encode() for v in values]
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    while chunk := handle.read(CHUNK):
        window = tail + chunk
        if any(n in window for n in needles):
            return True
        tail = window[-overlap:] if overlap else b""
    return False


def _open_regular(real: Path, path: str) -> int:
    try:
        # O_NOFOLLOW: the resolved path must not have become a symlink since; O_NONBLOCK: a FIFO must not hang us.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        _refuse(f"no file at {path}")
    except OSError as exc:
        _refuse(f"cannot open {path}: {exc.strerror}")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        _refuse(f"{path} is not a regular file")
    return fd


def _check_size(size: int, path: str) -> None:
    if size == 0:
        _refuse(f"{path} is empty")
    if size > MAX_FILE_BYTES:
        _refuse(f"{path} is {size} bytes; the limit is 100 MiB")


def files_send(
    *, caller: Caller, path: str, comment: str | None = None, title: str | None = None, alt_text: str | None = None
) -> dict:
    real = file_resolve(session_directory=caller.session_directory, path=path)
    fd = _open_regular(real, path)
    with os.fdopen(fd, "rb") as handle:
        _check_size(os.fstat(fd).st_size, path)
        # Cheap early answer, so a runner at its limit cannot make us copy 100 MiB files.
        runner_refuse_if_spent(runner_id=caller.runner_id, tool="send_file")
        values = secret_values_for(caller)
        if values:
            outbound = "\n".join(filter(None, [comment, title, alt_text]))
            refuse_secrets(what="the comment, title or alt text", values=values, content=outbound)
        # Copied now, under a generated name (the real one travels in the payload): the
        # agent may change or delete its file before the worker runs.
        stored = default_storage.save(f"tool-files/{caller.session_id}/{uuid.uuid4().hex}", File(handle))
    try:
        # Every check below reads the copy, i.e. exactly the bytes that will be posted.
        size = default_storage.size(stored)
        _check_size(size, path)
        with default_storage.open(stored, "rb") as copy:
            content_type = _sniff(copy.read(16), real.name)
            if values:
                copy.seek(0)
                if _contains_any(copy, values):
                    _refuse(f"{path} contains the value of one of this session's secrets; nothing was sent")
        call = tool_call_record(
            caller=caller,
            tool="send_file",
            arguments={"path": path, "comment": comment, "title": title, "alt_text": alt_text},
            payload={"file_name": real.name, "title": title or real.name, "size": size, "content_type": content_type},
            file_name=stored,
        )
    except BaseException:
        default_storage.delete(stored)
        raise
    return {"tool_call_id": call.id, "status": call.status, "file_name": real.name, "size": size}
