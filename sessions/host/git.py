"""checkout_repo's git work and spawn_thread's brief check, on the host that holds the
session directory (the gateway may share no filesystem with it).

The gateway has checked the request; the host checks every name, branch and URL again
(calvin/workspaces/repository_rules.py) before git sees it, and each request is answered
exactly once, a refusal saying why. Git never runs a shell, a hook or a transport the
gateway did not allow (git_process.py). Agents share the session directory and are
hostile: under bubblewrap the checkout is written from inside the session's sandbox, so a
link the agent planted can lead git nowhere but the session directory (the mirror is
read-only there).
"""

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from calvin.workspaces.repository_rules import (
    DEFAULT_SCHEMES,
    KNOWN_SCHEMES,
    branch_problem,
    clone_url_problem,
    full_name_problem,
    name_problem,
)
from sessions.host import git_cache
from sessions.host.git_cache import GitRefused, checkout_git_dir, mirror_lock, mirror_path
from sessions.host.git_process import redact, run_git
from sessions.host.markdown_anchors import anchors
from sessions.host.sandbox import MIRRORS_MODE, Sandbox, private_directory, write_private

log = logging.getLogger("calvin.host")

MAX_REPOS = 10
MAX_TIMEOUT = 3600
MAX_BRIEF_PATH = 1000
MAX_BRIEF_BYTES = 1024 * 1024
SHOWN_ANCHORS = 20

Send = Callable[[dict], Awaitable[None]]


class Refused(Exception):
    """The request is refused; the text says why, `extra` goes into the reply."""

    def __init__(self, text: str, extra: dict | None = None):
        super().__init__(text)
        self.extra = extra or {}


# The request


def _positive_int(request: dict, key: str) -> int:
    value = request.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise Refused(f"the request names no {key} (a positive integer)")
    return value


def _common(request: dict) -> tuple[int, int, tuple[str, ...], float, list[dict]]:
    """session, workspace, allowed schemes, timeout and the checked repository entries."""
    session_id, workspace_id = _positive_int(request, "session"), _positive_int(request, "workspace")
    schemes = request.get("allowed_schemes", DEFAULT_SCHEMES)
    if not isinstance(schemes, list | tuple) or not all(s in KNOWN_SCHEMES for s in schemes):
        raise Refused(f"allowed_schemes is a list drawn from {', '.join(KNOWN_SCHEMES)}")
    timeout = request.get("timeout", 120)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 1 <= timeout <= MAX_TIMEOUT:
        raise Refused(f"timeout is a number of seconds from 1 to {MAX_TIMEOUT}")
    repos = request.get("repos")
    if not isinstance(repos, list) or not repos:
        raise Refused("the request names no repositories")
    names = set()
    for entry in repos:
        if not isinstance(entry, dict):
            raise Refused("a repository entry is an object")
        problem = (
            name_problem(entry.get("name"))
            or full_name_problem(entry.get("full_name"))
            or branch_problem(entry.get("default_branch"))
            or clone_url_problem(entry.get("clone_url"), allowed_schemes=tuple(schemes))
        )
        if problem:
            raise Refused(redact(problem))
        if entry["name"].lower() in names:
            raise Refused(f"repository {entry['name']} is named twice")
        names.add(entry["name"].lower())
    return session_id, workspace_id, tuple(schemes), float(timeout), repos


def _session_directory(sessions_root: Path, session_id: int) -> Path:
    directory = Path(sessions_root).resolve() / f"session-{session_id}"
    if directory.is_symlink() or not directory.is_dir():
        raise Refused(f"this host has no directory for session {session_id}")
    return directory


async def _answer(request: dict, work: Awaitable[dict], send: Send) -> None:
    """Send exactly one reply: the work's result, or why it failed."""
    reply = {"type": "reply", "request": request.get("request")}
    try:
        reply |= {"ok": True, **await work}
    except Refused as refused:
        reply |= {"ok": False, "error": str(refused), **refused.extra}
    except Exception as error:  # a bug must still answer, or the gateway would wait in vain
        log.exception("the host could not answer a %s request", request.get("op"))
        reply |= {"ok": False, "error": redact(f"the host could not do it: {error}")}
    await send(reply)


# checkout_repo


async def git_checkout_answer(*, request: dict, state_dir: Path, sessions_root: Path, sandbox: Sandbox, send: Send):
    """Answer {"op": "git.checkout", ...}: each repository checked out on the session's branch."""
    await _answer(request, _checkout(request, Path(state_dir).resolve(), sessions_root, sandbox), send)


async def _checkout(request: dict, state_dir: Path, sessions_root: Path, sandbox: Sandbox) -> dict:
    session_id, workspace_id, schemes, timeout, repos = _common(request)
    if len(repos) > MAX_REPOS:
        raise Refused(f"at most {MAX_REPOS} repositories at once")
    branch = request.get("branch")
    problem = branch_problem(branch)
    if problem:
        raise Refused(problem)
    directory = _session_directory(sessions_root, session_id)
    try:
        private_directory(state_dir / "git" / f"workspace-{workspace_id}", mode=MIRRORS_MODE)
        wrap = _sandboxed(sandbox, state_dir, directory, session_id)
    except (OSError, RuntimeError) as error:
        raise Refused(f"this host cannot prepare its repository cache: {error}") from None

    async def one(entry: dict) -> dict:
        try:
            return await _checkout_one(
                entry, directory, state_dir, workspace_id, branch, schemes=schemes, timeout=timeout, wrap=wrap
            )
        except GitRefused as refused:
            why = str(refused)
        except OSError as error:
            why = f"{error.strerror or error} ({error.filename})"
        return {"error": f"could not check out {entry['full_name']}: {redact(why)}"}

    results = await asyncio.gather(*(one(entry) for entry in repos))
    done = [result for result in results if "error" not in result]
    failed = [result["error"] for result in results if "error" in result]
    if failed:
        listed = ", ".join(f"{r['name']} at {r['path']} ({_on(r['branch'])})" for r in done)
        text = "; ".join(failed) + (f"; checked out: {listed}" if done else "; nothing was checked out")
        raise Refused(text, {"repos": done})
    return {"repos": done}


def _on(branch: str | None) -> str:
    return f"branch {branch}" if branch else "detached HEAD"


def _sandboxed(sandbox: Sandbox, state_dir: Path, directory: Path, session_id: int):
    """How the checkout steps run in the session's sandbox, the mirror shown read-only."""
    if sandbox.kind != "bwrap":
        return lambda mirror: None  # the agent is unconfined then anyway
    temp = private_directory(state_dir / "tmp" / f"session-{session_id}")
    secrets = private_directory(state_dir / "secrets" / f"session-{session_id}")
    sandbox.give_to_agent(directory, temp, secrets)  # git runs as the agent's user there

    # The mirror is the host's (another owner): git would call it dubious. In the sandbox the
    # only repositories are the session's own and the read-only mirror. Git 2.39 takes
    # safe.directory only from a global or system file, never from -c or the environment.
    config = write_private(secrets, ".gitconfig", "[safe]\n\tdirectory = *\n", mode=0o644)

    def for_mirror(mirror: Path):
        if sandbox.drops_privileges:
            os.chmod(mirror, 0o755)  # made in a 0700 temporary directory; read by the agent's user
        return lambda argv: sandbox.wrap(
            ["env", f"GIT_CONFIG_GLOBAL={config}", *argv],
            directory=directory,
            temp_directory=temp,
            secrets_directory=secrets,
            reveal=[mirror],
        )

    return for_mirror


async def _checkout_one(entry, directory, state_dir, workspace_id, branch, *, schemes, timeout, wrap) -> dict:
    name, url, default = entry["name"], entry["clone_url"], entry["default_branch"]
    mirror, path = mirror_path(state_dir, workspace_id, url), directory / name
    result = {"name": name, "full_name": entry["full_name"], "path": str(path), "relative_path": name}
    if checkout_git_dir(path, mirror) is not None:  # refuses an occupied path before any clone
        return _already(result, path, mirror)
    async with mirror_lock(mirror):
        cloned, note = False, None
        if mirror.is_dir() and not mirror.is_symlink():
            why = await git_cache.fetch(mirror, url, schemes=schemes, timeout=timeout)
            if why:
                note = f"could not fetch {entry['full_name']} ({why}); checked out from this host's cached copy"
        else:
            await git_cache.clone(mirror, url, default_branch=default, schemes=schemes, timeout=timeout)
            cloned = True
        start = await git_cache.resolve(mirror, f"refs/remotes/origin/{default}", schemes=schemes)
        if not start:
            raise GitRefused(f"it has no branch {default}, its default branch in the definition")
        if checkout_git_dir(path, mirror) is not None:  # made by a request that got here first
            return _already(result, path, mirror)
        await git_cache.add_checkout(
            mirror, path, branch=branch, start=start, url=url, timeout=timeout, wrap=wrap(mirror)
        )
    result |= {"branch": branch, "commit": start, "status": "cloned" if cloned else "cached", "cloned": cloned}
    return result | ({"note": note} if note else {})


def _already(result: dict, path: Path, mirror: Path) -> dict:
    try:
        branch, commit = git_cache.current_branch(checkout_git_dir(path, mirror))
    except OSError as error:
        raise GitRefused(f"cannot read the checkout at {path}: {error.strerror or error}") from None
    return result | {"branch": branch, "commit": commit, "status": "already", "cloned": False}


# spawn_thread's brief


async def git_brief_answer(*, request: dict, state_dir: Path, sessions_root: Path, send: Send):
    """Answer {"op": "git.brief", ...}: is the brief on its repository's fetched default branch?"""
    await _answer(request, _brief(request, Path(state_dir).resolve(), sessions_root), send)


def _brief_parts(path) -> list[str]:
    if not isinstance(path, str) or not path or len(path) > MAX_BRIEF_PATH:
        raise Refused("brief must be the path of a .md file in the session directory")
    parts = path.split("/")
    if path.startswith("/") or "\0" in path or any(part in ("", ".", "..") for part in parts):
        raise Refused("brief must be a path relative to the session directory, without ..")
    if not path.lower().endswith(".md"):
        raise Refused("brief must be a .md file")
    return parts


async def _brief(request: dict, state_dir: Path, sessions_root: Path) -> dict:
    session_id, workspace_id, schemes, timeout, repos = _common(request)
    path = request.get("path")
    parts = _brief_parts(path)
    anchor = request.get("anchor")
    if anchor is not None and (not isinstance(anchor, str) or not 0 < len(anchor.lstrip("#")) <= 200):
        raise Refused("an anchor is the part of the brief after '#', at most 200 characters")
    anchor = anchor.lstrip("#") if anchor else None
    directory = _session_directory(sessions_root, session_id)
    entry = next((e for e in repos if e["name"] == parts[0]), None)
    checked_out = False
    if entry is not None and len(parts) > 1:
        mirror = mirror_path(state_dir, workspace_id, entry["clone_url"])
        with contextlib.suppress(GitRefused):
            checked_out = checkout_git_dir(directory / parts[0], mirror) is not None
    if not checked_out:
        raise Refused(f"brief {path} is not inside a repository checked out in this session (checkout_repo first)")
    default, full_name, in_repo = entry["default_branch"], entry["full_name"], "/".join(parts[1:])
    commit = await _fetched_commit(mirror, entry, schemes=schemes, timeout=timeout)
    local = {"allowed_schemes": schemes, "timeout": 30}
    kind = await run_git(["--git-dir", str(mirror), "cat-file", "-t", f"{commit}:{in_repo}"], **local)
    if not kind.ok and not (await run_git(["--git-dir", str(mirror), "cat-file", "-e", commit], **local)).ok:
        raise Refused(f"{full_name}'s default branch {default} moved while it was fetched; try again")
    if kind.stdout.strip() != b"blob":
        raise Refused(
            f"brief {in_repo} is not on {full_name}'s default branch {default} as fetched"
            " (commit and push it there first)"
        )
    if anchor is not None:
        blob_args = ["--git-dir", str(mirror), "cat-file", "blob", f"{commit}:{in_repo}"]
        blob = await run_git(blob_args, **local, stdout_limit=MAX_BRIEF_BYTES)
        found = anchors(blob.stdout.decode(errors="replace"))
        if anchor.lower() not in {a.lower() for a in found}:
            shown = ", ".join(f"#{a}" for a in found[:SHOWN_ANCHORS]) + (", …" if len(found) > SHOWN_ANCHORS else "")
            listing = f"headings: {shown}" if found else "it has no headings"
            raise Refused(f"anchor #{anchor} is not a heading in {in_repo} on {default} ({listing})")
    return {
        "repository": entry["name"],
        "full_name": full_name,
        "default_branch": default,
        "commit": commit,
        "path_in_repo": in_repo,
        "anchor": anchor,
    }


async def _fetched_commit(mirror: Path, entry: dict, *, schemes, timeout: float) -> str:
    """The default branch's commit as the upstream names it (not a ref in the mirror, which
    a session could rewrite), fetched into the mirror."""
    url, default, full_name = entry["clone_url"], entry["default_branch"], entry["full_name"]
    async with mirror_lock(mirror):
        args = ["--git-dir", str(mirror), "ls-remote", "--", url, f"refs/heads/{default}"]
        listed = await run_git(args, allowed_schemes=schemes, timeout=timeout)
        why = None if listed.ok else listed.why("git ls-remote", timeout)
        why = why or await git_cache.fetch(mirror, url, schemes=schemes, timeout=timeout)
        if why:
            raise Refused(f"could not fetch {full_name} to check the brief: {why}")
    for line in listed.stdout.decode(errors="replace").splitlines():
        commit, _, ref = line.partition("\t")
        if ref == f"refs/heads/{default}" and git_cache.SHA_RE.fullmatch(commit):
            return commit
    raise Refused(f"{full_name} has no branch {default}, its default branch in the definition")
