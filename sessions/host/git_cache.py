"""A host's cache of workspace repositories, and the session checkouts made from it.

Each repository is cloned once per host into a bare mirror, kept per workspace: one
tenant never gets another's private repository from the cache by naming the same URL.
Upstream branches live under refs/remotes/origin/*.

A session's checkout is a working tree on the session's branch whose own .git borrows the
mirror's objects (`git clone --shared`): the agent commits, branches and pushes in a
repository of its own, and sees the mirror read-only. Were the checkout a linked worktree,
the agent would need the mirror writable, and a config it wrote there (core.sshCommand,
url.*.insteadOf, credential.helper) would be obeyed by the host's next fetch, outside any
sandbox.
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
# The mirror's upstream branches, copied into a session's checkout as they are.
CACHED_REFSPEC = "+refs/remotes/origin/*:refs/remotes/origin/*"
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


def checkout_git_dir(path: Path, mirror: Path) -> Path | None:
    """The .git directory of the session's checkout of `mirror` at `path`; None when `path` is
    absent or an empty directory; GitRefused when it is anything else. A checkout is a
    repository whose objects/info/alternates names the mirror's objects."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        raise GitRefused(f"{path} is a symbolic link")
    if not stat.S_ISDIR(mode):
        raise GitRefused(f"{path} exists and is not a directory")
    git_dir = path / ".git"
    try:
        git_mode = os.lstat(git_dir).st_mode
    except FileNotFoundError:
        with os.scandir(path) as entries:
            if next(entries, None) is None:
                return None
        raise GitRefused(f"{path} is a directory that is not empty") from None
    try:
        borrowed = _read_small(git_dir / "objects" / "info" / "alternates").splitlines()
    except OSError:
        borrowed = []
    if not stat.S_ISDIR(git_mode) or borrowed[:1] != [str(mirror / "objects")]:
        raise GitRefused(f"{path} is a checkout of another repository")
    return git_dir


def _ref_commit(git_dir: Path, ref: str) -> str | None:
    """A ref's commit, read from the files (the host runs no git in a repository the agent writes)."""
    try:
        loose = _read_small(git_dir / ref, limit=200).strip()
        return loose if SHA_RE.fullmatch(loose) else None
    except FileNotFoundError:
        pass
    try:
        packed = _read_small(git_dir / "packed-refs", limit=4 * 1024 * 1024)
    except FileNotFoundError:
        return None
    for line in packed.splitlines():
        commit, _, name = line.partition(" ")
        if name == ref and SHA_RE.fullmatch(commit):
            return commit
    return None


def current_branch(git_dir: Path) -> tuple[str | None, str | None]:
    """A checkout's branch (None when detached) and commit."""
    head = _read_small(git_dir / "HEAD").strip()
    if head.startswith("ref: refs/heads/"):
        branch = head.removeprefix("ref: ")
        return branch.removeprefix("refs/heads/"), _ref_commit(git_dir, branch)
    return None, head if SHA_RE.fullmatch(head) else None


def public_url(url: str) -> str:
    """The clone URL without credentials: what the agent's own repository names as origin."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


async def add_checkout(
    mirror: Path,
    path: Path,
    *,
    branch: str,
    start: str,
    url: str,
    timeout: float,
    wrap: Callable[[list[str]], list[str]] | None,
) -> None:
    """Check `branch` out at `path`, made at `start`, in a repository borrowing the mirror's
    objects; its origin is the upstream. `wrap` runs git in the session's sandbox, where the
    mirror is read-only. A step that fails leaves no half-made checkout."""
    local = ("file",)  # the mirror is a path on this host, whatever the upstream's transport
    steps = [
        ["clone", "--quiet", "--shared", "--no-checkout", "--template=", "--", str(mirror), str(path)],
        [
            "-C",
            str(path),
            "fetch",
            "--quiet",
            "--no-tags",
            "--",
            str(mirror),
            CACHED_REFSPEC,
        ],
        ["-C", str(path), "checkout", "--quiet", "--no-track", "-b", branch, start],
        ["-C", str(path), "remote", "set-url", "origin", public_url(url)],
    ]
    try:
        for args in steps:
            done = await run_git(args, allowed_schemes=local, timeout=timeout, wrap=wrap)
            if not done.ok:
                raise GitRefused(done.why(f"git {args[2] if args[0] == '-C' else args[0]}", timeout))
    except BaseException:
        # Still ours only if it is a real directory (rmtree never follows a link inside it).
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        raise
