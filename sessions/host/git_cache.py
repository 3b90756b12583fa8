"""A host's cache of workspace repositories, and the session worktrees made from it.

Each repository is cloned once per host into a bare mirror, kept per workspace: one
tenant never gets another's private repository from the cache by naming the same URL.
Upstream branches live under refs/remotes/origin/*, so refs/heads/* holds nothing but
sessions' branches. A session's checkout is a worktree of the mirror on its own branch.
"""

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from sessions.host.git_process import run_git

FETCH_REFSPEC = "+refs/heads/*:refs/remotes/origin/*"
SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
CLONES_STARTED = 0  # how many clones this process began, for the tests
_LOCKS: dict[tuple[asyncio.AbstractEventLoop, str], list] = {}  # (loop, mirror) -> [lock, users]


class GitRefused(Exception):
    """A repository cannot be checked out or read; the text says why."""


def mirror_path(state_dir: Path, workspace_id: int, clone_url: str) -> Path:
    digest = hashlib.sha256(clone_url.encode()).hexdigest()[:24]
    return state_dir / "git" / f"workspace-{int(workspace_id)}" / f"{digest}.git"


@contextlib.asynccontextmanager
async def mirror_lock(mirror: Path):
    """One git writer per mirror: an asyncio lock for this daemon's requests, and a flock
    for another daemon (or event loop) on the same state directory."""
    key = (asyncio.get_running_loop(), str(mirror))
    entry = _LOCKS.setdefault(key, [asyncio.Lock(), 0])
    entry[1] += 1
    try:
        async with entry[0]:
            fd = os.open(f"{mirror}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                # Closing the descriptor releases the flock, even one a cancelled wait takes later.
                await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)
    finally:
        entry[1] -= 1
        if not entry[1]:
            del _LOCKS[key]


async def resolve(mirror: Path, ref: str, *, schemes: Sequence[str]) -> str | None:
    done = await run_git(
        ["--git-dir", str(mirror), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        allowed_schemes=schemes,
        timeout=30,
    )
    return done.stdout.decode().strip() if done.ok else None


async def fetch(mirror: Path, url: str, *, schemes: Sequence[str], timeout: float) -> str | None:
    """Fetch every upstream branch (from the definition's URL, not the mirror's config);
    None when it worked, else why not."""
    args = ["--git-dir", str(mirror), "fetch", "--prune", "--quiet", "--", url, FETCH_REFSPEC]
    done = await run_git(args, allowed_schemes=schemes, timeout=timeout)
    return None if done.ok else done.why("git fetch", timeout)


async def clone(mirror: Path, url: str, *, default_branch: str, schemes: Sequence[str], timeout: float) -> None:
    """Make the mirror in a temporary directory beside it, renamed into place only once
    complete: a failed or timed-out clone leaves nothing behind."""
    global CLONES_STARTED
    CLONES_STARTED += 1
    temp = Path(tempfile.mkdtemp(prefix=".clone-", dir=mirror.parent))
    git_dir = ["--git-dir", str(temp)]
    try:
        # No templates: the host user's init.templateDir could hold hooks (inert anyway).
        steps = [
            ["init", "--quiet", "--bare", "--template=", str(temp)],
            [*git_dir, "config", "remote.origin.url", url],
            [*git_dir, "config", "remote.origin.fetch", FETCH_REFSPEC],
            # An agent's git sees only its own session's worktrees: its gc must not prune the others.
            [*git_dir, "config", "gc.worktreePruneExpire", "never"],
        ]
        for args in steps:
            done = await run_git(args, allowed_schemes=schemes, timeout=30)
            if not done.ok:
                raise GitRefused(f"{done.why('git init', 30)} (nothing was kept)")
        why = await fetch(temp, url, schemes=schemes, timeout=timeout)
        if why:
            raise GitRefused(f"{why.replace('git fetch', 'git clone', 1)} (nothing was kept)")
        if not await resolve(temp, f"refs/remotes/origin/{default_branch}", schemes=schemes):
            raise GitRefused(f"it has no branch {default_branch}, its default branch in the definition")
        os.rename(temp, mirror)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _read_small(path: Path, limit: int = 4096) -> str:
    """A small regular file's text, never through a link nor from a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(path)
        return handle.read(limit).decode(errors="replace")


def worktree_admin(path: Path, mirror: Path) -> Path | None:
    """The mirror's admin directory for the worktree at `path`, None when `path` is absent
    or an empty directory; GitRefused when it is anything else. Both sides must agree: the
    worktree's .git file names the admin directory, whose gitdir file names it back."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        raise GitRefused(f"{path} is a symbolic link")
    if not stat.S_ISDIR(mode):
        raise GitRefused(f"{path} exists and is not a directory")
    try:
        pointer = _read_small(path / ".git")
    except FileNotFoundError:
        with os.scandir(path) as entries:
            if next(entries, None) is None:
                return None
        raise GitRefused(f"{path} is a directory that is not empty") from None
    except OSError:
        raise GitRefused(f"{path} holds another git repository") from None
    admin = Path(pointer.removeprefix("gitdir:").strip())
    try:
        points_back = _read_small(admin / "gitdir").strip() == str(path / ".git")
    except OSError:
        points_back = False
    if not pointer.startswith("gitdir:") or admin.parent != mirror / "worktrees" or not points_back:
        raise GitRefused(f"{path} is a checkout of another repository")
    return admin


async def current_branch(admin: Path, mirror: Path, *, schemes: Sequence[str]) -> tuple[str | None, str | None]:
    """A worktree's branch (None when detached) and commit, from its admin directory."""
    head = _read_small(admin / "HEAD").strip()
    if head.startswith("ref: refs/heads/"):
        branch = head.removeprefix("ref: refs/heads/")
        return branch, await resolve(mirror, f"refs/heads/{branch}", schemes=schemes)
    return None, head if SHA_RE.fullmatch(head) else None


async def add_worktree(
    mirror: Path,
    path: Path,
    *,
    branch: str,
    start: str,
    schemes: Sequence[str],
    timeout: float,
    wrap: Callable[[list[str]], list[str]] | None,
) -> None:
    """Check `branch` out at `path`, creating it at `start` unless it exists (the agent
    removed its worktree: it gets its branch back). `wrap` runs git in the sandbox."""
    git_dir = ["--git-dir", str(mirror)]
    if await resolve(mirror, f"refs/heads/{branch}", schemes=schemes):
        # Outside the sandbox, which would hide other sessions' worktrees from the prune.
        await run_git([*git_dir, "worktree", "prune"], allowed_schemes=schemes, timeout=30)
        args = [*git_dir, "worktree", "add", "--", str(path), branch]
    else:
        args = [*git_dir, "worktree", "add", "--no-track", "-b", branch, "--", str(path), start]
    done = await run_git(args, allowed_schemes=schemes, timeout=timeout, wrap=wrap)
    if not done.ok:
        raise GitRefused(done.why("git worktree add", timeout))
