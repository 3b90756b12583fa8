"""Open an agent-named file beneath allowed roots, with no window between check and open.

Resolving a name first (realpath) and opening it afterwards leaves a race: the agent can
swap a directory on the path for a symlink to /etc in between. Here the walk itself is
the resolution. It starts from a descriptor of the root and opens one component at a
time, relative to the descriptor of the directory before it, never following a symlink
by name. A symlink is read and its target walked the same way, so one that stays inside
the roots still works. `..` pops the walk's own stack of descriptors, so it can never
climb above the root. The result is judged by `fstat` on the opened descriptor: a regular
file, whose name in the directory the walk holds is still that inode and its only link (a
hard link's other name could be outside every root).

Pure `os` calls and no Django: a host daemon can run the same walk on its own machine.
"""

import errno
import os
import stat
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

MAX_SYMLINKS = 40  # as the kernel's own limit
MAX_FILE_BYTES = 100 * 1024 * 1024  # seed 000's send_file limit, judged on the gateway and on hosts
_STEP_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(Exception):
    """The name cannot be opened as a regular file beneath the roots; the text says why."""


@dataclass(frozen=True)
class OpenedFile:
    fd: int  # open for reading; the caller closes it
    name: str  # the last component actually opened (a symlink's target name, if one was followed)
    size: int


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _root_for(absolute: str, roots: Sequence[str]) -> tuple[str, list[str]] | None:
    """The root an absolute name lies under, compared component by component (not by
    string prefix), and the components left to walk. `..` is left in, for the walk."""
    parts = _components(absolute)
    for root in roots:
        for spelling in {os.path.normpath(root), os.path.realpath(root)}:
            root_parts = _components(spelling)
            if parts[: len(root_parts)] == root_parts:
                return root, parts[len(root_parts) :]
    return None


def _open_for_reading(fd: int, shown: str) -> int:
    """Reopen an O_PATH descriptor for reading, through /proc, so it is the same inode.

    Opening the name again would be a second lookup; O_PATH first means a FIFO or a
    device is judged by fstat before anything reads from it.
    """
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise PathRefused(f"cannot open {shown}: {exc.strerror}") from None


class _Walk:
    """The state of one walk: the stack of directory descriptors and the names left."""

    def __init__(self, path: str, roots: Sequence[str]):
        self.path, self.roots = path, roots
        self.stack: list[int] = []
        self.todo: deque[str] = deque()
        self.followed = 0

    def outside(self) -> PathRefused:
        return PathRefused(f"{self.path} is outside the session directory and the system temp directory")

    def start(self, root: str, parts: list[str]) -> None:
        self.close()
        try:
            self.stack.append(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError as exc:
            raise PathRefused(f"cannot open {self.path}: its directory is not available ({exc.strerror})") from None
        self.todo.extendleft(reversed(parts))

    def follow(self, link_fd: int) -> None:
        """Walk a symlink's target next: from its root if absolute, from here if relative."""
        self.followed += 1
        if self.followed > MAX_SYMLINKS:
            raise PathRefused(f"cannot open {self.path}: too many levels of symbolic links")
        target = os.readlink("", dir_fd=link_fd)  # the link itself, not a second lookup by name
        if os.path.isabs(target):
            found = _root_for(target, self.roots)
            if found is None:
                raise self.outside()
            self.start(*found)
        else:
            self.todo.extendleft(reversed(_components(target)))

    def close(self) -> None:
        while self.stack:
            os.close(self.stack.pop())


def open_beneath(path: str, *, roots: Sequence[str], base: str) -> OpenedFile:
    """Open `path` (absolute, or relative to `base`, which is one of `roots`) for reading.

    Refuses, with a reason, anything that leaves the roots at any step, is missing, is not a
    regular file, or has more than one hard link.
    """
    if "\x00" in path:
        raise PathRefused("the path contains a NUL character")
    if path.endswith("/"):
        raise PathRefused(f"{path} is not a regular file")
    walk = _Walk(path, roots)
    try:
        if os.path.isabs(path):
            found = _root_for(path, roots)
            if found is None:
                raise walk.outside()
            walk.start(*found)
        else:
            walk.start(base, _components(path))
        while walk.todo:
            part = walk.todo.popleft()
            if part == "..":
                if len(walk.stack) == 1:
                    raise walk.outside()
                os.close(walk.stack.pop())
                continue
            try:
                # O_PATH|O_NOFOLLOW opens a symlink itself; fstat tells what was opened.
                fd = os.open(part, _STEP_FLAGS, dir_fd=walk.stack[-1])
            except OSError as exc:
                raise _refusal(exc, path) from None
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                try:
                    walk.follow(fd)
                finally:
                    os.close(fd)
            elif walk.todo and stat.S_ISDIR(mode):
                walk.stack.append(fd)
            elif walk.todo:
                os.close(fd)
                raise PathRefused(f"no file at {path}")  # a file used as a directory
            else:
                return _judge(fd, walk.stack[-1], part, path)
        raise PathRefused(f"{path} is not a regular file")  # the walk ended on a directory
    finally:
        walk.close()


def _judge(path_fd: int, dir_fd: int, name: str, shown: str) -> OpenedFile:
    try:
        info = os.fstat(path_fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{shown} is not a regular file")
        _refuse_other_names(info, dir_fd, name, shown)
        fd = _open_for_reading(path_fd, shown)
    finally:
        os.close(path_fd)
    return OpenedFile(fd=fd, name=name, size=info.st_size)


def _refuse_other_names(info: os.stat_result, dir_fd: int, name: str, shown: str) -> None:
    """The walk proves only that this name lies beneath the roots; another name of the same
    inode may lie anywhere (`ln <gateway var>/vault_key hv`) and cannot be told from it, so a
    regular file with more than one link is refused.

    The count is read with the name, from the directory the walk holds, in one stat, and that
    stat must be of the inode the descriptor's fstat saw: the count of the fstat alone could be
    the outside name's, if the inside one was removed between the open and the fstat (and
    perhaps made again after it).
    """
    try:
        named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        named = None
    if named is None or (named.st_dev, named.st_ino) != (info.st_dev, info.st_ino):
        raise PathRefused(f"cannot open {shown}: it changed while it was opened")
    if named.st_nlink > 1:
        raise PathRefused(f"{shown} is a hard link to a file that may lie outside the session directory")


def _refusal(exc: OSError, shown: str) -> PathRefused:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return PathRefused(f"no file at {shown}")
    return PathRefused(f"cannot open {shown}: {exc.strerror or exc}")


def size_problem(size: int, shown: str) -> str | None:
    """Why a file of `size` bytes cannot be sent (empty, over the limit), or None."""
    if size == 0:
        return f"{shown} is empty"
    if size > MAX_FILE_BYTES:
        return f"{shown} is larger than 100 MiB, the limit"
    return None
