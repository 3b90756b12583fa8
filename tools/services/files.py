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


def _contains_any(fd: int, values: list[str]) -> bool:
    needles = [v.encode() for v in values]
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, CHUNK):
        window = tail + chunk
        if any(n in window for n in needles):
            return True
        tail = window[-overlap:] if overlap else b""
    return False


def files_send(
    *, caller: Caller, path: str, comment: str | None = None, title: str | None = None, alt_text: str | None = None
) -> dict:
    real = file_resolve(session_directory=caller.session_directory, path=path)
    try:
        # O_NOFOLLOW: the resolved path must not have become a symlink since; O_NONBLOCK: a FIFO must not hang us.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        _refuse(f"no file at {path}")
    except OSError as exc:
        _refuse(f"cannot open {path}: {exc.strerror}")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        _refuse(f"{path} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size == 0:
            _refuse(f"{path} is empty")
        if info.st_size > MAX_FILE_BYTES:
            _refuse(f"{path} is {info.st_size} bytes; the limit is 100 MiB")
        values = secret_values_for(caller)
        outbound = "\n".join(filter(None, [comment, title, alt_text]))
        if values:
            refuse_secrets(what="the comment, title or alt text", values=values, content=outbound)
            if _contains_any(fd, values):
                _refuse(f"{path} contains the value of one of this session's secrets; nothing was sent")
        handle.seek(0)
        content_type = _sniff(handle.read(16), real.name)
        handle.seek(0)
        # Copied now, under a generated name (the real one travels in the payload), and
        # outside the transaction: the agent may change or delete the file before the
        # worker runs, and a large copy must not hold the count row's lock.
        stored = default_storage.save(f"tool-files/{caller.session_id}/{uuid.uuid4().hex}", File(handle))
    arguments = {"path": path, "comment": comment, "title": title, "alt_text": alt_text}
    try:
        call = tool_call_record(
            caller=caller,
            tool="send_file",
            arguments=arguments,
            payload={
                "file_name": real.name,
                "title": title or real.name,
                "size": info.st_size,
                "content_type": content_type,
            },
            file_name=stored,
        )
    except BaseException:
        default_storage.delete(stored)
        raise
    return {"tool_call_id": call.id, "status": call.status, "file_name": real.name, "size": info.st_size}
