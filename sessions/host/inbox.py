"""Files other agents sent this one (NanoClaw's send_file to an agent destination), written into
the agent's own directory as inbox/<from>/<name> before its turn runs.

The turn lists what this host has not written yet; the bytes come from the gateway over HTTP
with the host's token (tools/inbox_views.py), never through the agent, and the host tells the
gateway once a file is in place so it is not sent again. The agent owns its directory and
another session of it may run here meanwhile: it may have put a link or a file anywhere under
inbox/. So every step starts from a directory descriptor, never follows a link and never writes
over a name: the bytes go into a fresh partial file, which is linked to its name only if the
name is free. What cannot be written is said to the agent and tried again at its next turn.
"""

import asyncio
import contextlib
import errno
import os
import stat
import threading
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tools.services.paths import MAX_FILE_BYTES

INBOX = "inbox"
CHUNK = 256 * 1024
HTTP_TIMEOUT = 60
MAX_COMPONENT_BYTES = 255
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# One delivery at a time in this daemon: two sessions of an agent starting together would
# otherwise race for the same partial file.
_WRITING = threading.Lock()


class InboxProblem(Exception):
    """One file could not be written now; the text is for the agent."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The host's token goes to the gateway only, never on to where a redirect points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects())


@dataclass(frozen=True)
class InboxClient:
    """The gateway's inbox endpoints, as this host (its token never reaches the agent)."""

    gateway: str
    token: str

    def _open(self, path: str, method: str):
        request = urllib.request.Request(
            f"{self.gateway.rstrip('/')}/hosts/inbox-files/{path}",
            method=method,
            data=b"" if method == "POST" else None,
            headers={"Authorization": f"Bearer {self.token}"},
        )
        return _OPENER.open(request, timeout=HTTP_TIMEOUT)

    def fetch(self, file_id: int, write: Callable[[bytes], None], limit: int) -> int:
        """Stream the file's bytes to `write`, at most `limit` of them; how many came."""
        received = 0
        with self._open(f"{file_id}/", "GET") as response:
            while received < limit and (chunk := response.read(min(CHUNK, limit - received))):
                write(chunk)
                received += len(chunk)
        return received

    def delivered(self, file_id: int) -> None:
        with self._open(f"{file_id}/delivered/", "POST"):
            pass


def safe_component(name) -> bool:
    """One path component that goes nowhere else: the gateway makes them so, and the host checks."""
    return (
        isinstance(name, str)
        and 0 < len(name.encode("utf-8", "surrogatepass")) <= MAX_COMPONENT_BYTES
        and not name.startswith(".")
        and "/" not in name
        and not any(unicodedata.category(ch) == "Cc" for ch in name)
    )


def _entry(raw) -> tuple[int, str, str, int] | None:
    if not isinstance(raw, dict):
        return None
    file_id, sender, name, size = raw.get("id"), raw.get("from"), raw.get("name"), raw.get("size")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (file_id, size)):
        return None
    if file_id <= 0 or not 0 < size <= MAX_FILE_BYTES or not safe_component(sender) or not safe_component(name):
        return None
    return file_id, sender, name, size


def _directory(parent: int, name: str, owner: tuple[int, int] | None, shown: str) -> int:
    """A descriptor of the real directory `name` under `parent` (made if missing, for the agent);
    a link, a file or anything else in its place is refused, never followed or replaced."""
    made = False
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent)
        made = True
    try:
        fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise InboxProblem(f"{shown} is not a directory of its own (a link or a file is in its place)") from None
        raise
    if made and owner is not None:
        os.fchown(fd, *owner)  # the agent's user may tidy its inbox (the daemon runs as root)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _same_content(directory: int, name: str, fd: int, size: int) -> bool:
    """Whether `name` is a regular file holding what `fd` holds (a file this host wrote before
    the gateway heard so, or another session of the agent wrote a moment ago)."""
    try:
        existing = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return False
    try:
        info = os.fstat(existing)
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            return False
        offset = 0
        while offset < size:
            ours, theirs = os.pread(fd, CHUNK, offset), os.pread(existing, CHUNK, offset)
            if not ours or ours != theirs:
                return False
            offset += len(ours)
        return True
    finally:
        os.close(existing)


def _taken(directory: int, name: str, size: int) -> bool:
    """Something other than a file of this size has the name: no need to fetch the bytes to know."""
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return not stat.S_ISREG(info.st_mode) or info.st_size != size


def _write(root: int, client: InboxClient, entry: tuple[int, str, str, int], owner) -> None:
    file_id, sender, name, size = entry
    shown = f"{INBOX}/{sender}/{name}"
    taken = f"{shown} already holds something else: the file {sender} sent was not written over it. Move yours away"
    inbox = _directory(root, INBOX, owner, INBOX)
    try:
        directory = _directory(inbox, sender, owner, f"{INBOX}/{sender}")
    finally:
        os.close(inbox)
    try:
        if _taken(directory, name, size):
            raise InboxProblem(taken)
        partial = f".calvin-inbox-{file_id}.partial"  # never a delivered name: those have no leading dot
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial, dir_fd=directory)  # a crash's leftover, or planted: never written through
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(partial, flags, 0o600, dir_fd=directory)
        try:
            os.fchmod(fd, 0o600)
            if owner is not None:
                os.fchown(fd, *owner)
            try:
                received = client.fetch(file_id, lambda data: _write_all(fd, data), limit=size + 1)
            except urllib.error.HTTPError as error:
                raise InboxProblem(f"{shown} could not be fetched from the gateway (HTTP {error.code})") from None
            except (urllib.error.URLError, OSError) as error:
                raise InboxProblem(f"{shown} could not be fetched from the gateway ({error})") from None
            if received != size:
                raise InboxProblem(f"{shown} came from the gateway with {received} bytes, not its {size}")
            os.fsync(fd)
            try:
                # Atomic, and never over an existing name: the agent sees the whole file or none.
                os.link(partial, name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            except FileExistsError:
                if not _same_content(directory, name, fd, size):
                    raise InboxProblem(taken) from None
        finally:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial, dir_fd=directory)
    finally:
        os.close(directory)


def _deliver_all(agent_directory: Path, files: list, client: InboxClient, owner) -> list[str]:
    problems = []
    entries = [_entry(raw) for raw in files]
    if any(entry is None for entry in entries):
        problems.append("A file sent to you was listed with an unusable name or size; it was skipped.")
    with _WRITING:
        try:
            root = os.open(agent_directory, DIRECTORY_FLAGS)
        except OSError as error:
            unopened = f"Files sent to you could not be written: your agent directory cannot be opened ({error})"
            return [*problems, unopened]
        try:
            for entry in filter(None, entries):
                try:
                    _write(root, client, entry, owner)
                except InboxProblem as problem:
                    problems.append(f"{problem}; it is tried again at your next turn.")
                    continue
                except OSError as error:
                    problems.append(
                        f"{INBOX}/{entry[1]}/{entry[2]} could not be written ({error.strerror or error});"
                        " it is tried again at your next turn."
                    )
                    continue
                try:
                    client.delivered(entry[0])
                except (urllib.error.URLError, OSError):
                    pass  # written: the next turn lists it again and finds it already in place
        finally:
            os.close(root)
    return problems


async def inbox_deliver(
    *, agent_directory: Path, files: list, client: InboxClient, owner: tuple[int, int] | None
) -> list[str]:
    """Write the turn's inbox files into the agent's directory; what could not be written, for the agent."""
    if not files:
        return []
    return await asyncio.to_thread(_deliver_all, agent_directory, files, client, owner)
