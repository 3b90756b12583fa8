"""send_file's bytes, read on the host: the session directory lives here, not on the gateway.

The same race-free walk as the gateway's (tools/services/paths.py, pure os) judges the path
against this host's own directories for the session, whatever the gateway believes they
are; the gateway checks the bytes it receives again (size, secrets). A sandboxed agent's /tmp
is its session's temp directory, so its "/tmp/..." names a file there.
"""

import base64
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from tools.services.paths import MAX_FILE_BYTES, PathRefused, open_beneath, size_problem

CHUNK = 256 * 1024


SANDBOX_TMP = "/tmp"


def host_path(path: str, *, roots: tuple[str, str], sandboxed: bool) -> str:
    """The host's name for what the agent calls `path`: under bwrap its /tmp is the session's
    temp directory (never another's: the walk then keeps to this session's roots). The
    session's own directories keep their names even where the host keeps them under its /tmp:
    the sandbox binds them there, over its own /tmp."""
    if not sandboxed or not (path == SANDBOX_TMP or path.startswith(SANDBOX_TMP + "/")):
        return path
    if any(_lies_under(path, root) for root in roots):
        return path
    return roots[1] + path[len(SANDBOX_TMP) :]


def _lies_under(path: str, root: str) -> bool:
    """Component by component, `..` left for the walk (which never climbs above a root)."""
    parts, root_parts = ([part for part in name.split("/") if part not in ("", ".")] for name in (path, root))
    return parts[: len(root_parts)] == root_parts


def session_roots(*, sessions_root: Path, temp_root: Path, session_id: int) -> tuple[str, str]:
    name = f"session-{int(session_id)}"
    return str(sessions_root / name), str(temp_root / name)


async def file_read_answer(
    *,
    request: dict,
    sessions_root: Path,
    temp_root: Path,
    send: Callable[[dict], Awaitable[None]],
    sandboxed: bool = False,
) -> None:
    """Answer a {"op": "file.read", "session": id, "path": p} request: chunks, then the result."""
    reply_to = request.get("request")
    path, session_id = request.get("path"), request.get("session")

    async def refuse(text: str) -> None:
        await send({"type": "reply", "request": reply_to, "ok": False, "error": text})

    if not isinstance(path, str) or not isinstance(session_id, int):
        return await refuse("a file request names a session and a path")
    directory, temp_directory = session_roots(sessions_root=sessions_root, temp_root=temp_root, session_id=session_id)
    if not os.path.isdir(directory):
        return await refuse("this host has no directory for the session")
    try:
        opened = open_beneath(
            host_path(path, roots=(directory, temp_directory), sandboxed=sandboxed),
            roots=[directory, temp_directory],
            base=directory,
        )
    except PathRefused as exc:
        return await refuse(str(exc))
    except OSError as exc:
        return await refuse(f"cannot open {path}: {exc.strerror or exc}")
    with os.fdopen(opened.fd, "rb") as handle:
        problem = size_problem(opened.size, path)
        if problem:
            return await refuse(problem)
        # At most one byte past the limit, however much the file grows while it is read.
        remaining, sent = MAX_FILE_BYTES + 1, 0
        while remaining > 0:
            chunk = handle.read(min(CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            sent += len(chunk)
            await send({"type": "reply.chunk", "request": reply_to, "data": base64.b64encode(chunk).decode()})
    await send({"type": "reply", "request": reply_to, "ok": True, "name": opened.name, "size": sent})
