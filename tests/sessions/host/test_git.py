"""checkout_repo's git work and spawn_thread's brief check, on a host: real git, real
upstream repositories in the test's directory, with the bwrap sandbox and without."""

import asyncio
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sessions.host import git_cache
from sessions.host.git import _sandboxed, git_brief_answer, git_checkout_answer
from sessions.host.git_cache import GitRefused, add_checkout, mirror_path
from sessions.host.git_process import git_environment, run_git
from sessions.host.markdown_anchors import anchors
from sessions.host.sandbox import Sandbox
from tests.support.git_repos import GIT_ENV
from tests.support.ports import free_port

IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"]
PLAN = """# Intro

Some text.

## Plan

```sh
# not a heading
```

## Plan

<a name="explicit-anchor"></a>

Step 2: Build *it*
------------------
"""


def git(*args, cwd=None) -> str:
    environment = {**os.environ, "GIT_CONFIG_GLOBAL": GIT_ENV["GIT_CONFIG_GLOBAL"]}  # checkouts are the agent's
    done = subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, env=environment, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Upstream:
    """A bare repository (what a clone URL names) and a clone of it to push from."""

    def __init__(self, base: Path, name: str):
        self.bare, self.work = base / "upstream" / f"{name}.git", base / "upstream" / f"{name}-work"
        git("init", "--quiet", "--bare", str(self.bare))
        git("init", "--quiet", str(self.work))
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        self.push({"README": f"{name} readme\n", "docs/plan.md": PLAN})

    def push(self, files: dict[str, str], branch: str = "main") -> str:
        for name, text in files.items():
            (self.work / name).parent.mkdir(parents=True, exist_ok=True)
            (self.work / name).write_text(text)
        git("add", ".", cwd=self.work)
        git("commit", "--quiet", "-m", "change", cwd=self.work)
        git("push", "--quiet", "origin", f"HEAD:{branch}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    @property
    def url(self) -> str:
        return f"file://{self.bare}"


class Host:
    def __init__(self, base: Path):
        self.state = base / "state"
        self.sessions = self.state / "sessions"

    def session(self, session_id: int) -> Path:
        directory = self.sessions / f"session-{session_id}"
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def sandbox(self, kind: str) -> Sandbox:
        if kind == "none":
            return Sandbox.none("test")
        sandbox = Sandbox.probe(hide=[self.state])
        assert sandbox.kind == "bwrap", f"bubblewrap must work here (scripts/test installs it): {sandbox.why}"
        return sandbox

    def mirrors(self, workspace: int = 3) -> list[str]:
        directory = self.state / "git" / f"workspace-{workspace}"
        return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".lock")) if directory.exists() else []

    def checkout(self, session_id: int, repos: list[dict], /, *, kind: str = "none", **fields) -> dict:
        self.session(session_id)
        request = checkout_request(session_id, repos, **fields)
        return answer(git_checkout_answer, request=request, state_dir=self.state, sandbox=self.sandbox(kind), host=self)

    def brief(self, session_id: int, path: str, repos: list[dict], /, **fields) -> dict:
        request = {
            "op": "git.brief",
            "request": "r-brief",
            "session": session_id,
            "workspace": 3,
            "path": path,
            "anchor": None,
            "allowed_schemes": ["https", "ssh", "git", "file"],
            "timeout": 60,
            "repos": repos,
            **fields,
        }
        return answer(git_brief_answer, request=request, state_dir=self.state, host=self)


def entry(upstream: Upstream, name: str = "api", **fields) -> dict:
    return {"name": name, "full_name": f"acme/{name}", "clone_url": upstream.url, "default_branch": "main", **fields}


def checkout_request(session_id: int, repos: list[dict], /, **fields) -> dict:
    request = {
        "op": "git.checkout",
        "request": "r-1",
        "session": session_id,
        "workspace": 3,
        "branch": f"calvin/session-{session_id}",
        "allowed_schemes": ["https", "ssh", "git", "file"],
        "timeout": 60,
        "repos": repos,
    }
    return request | fields


def answer(function, *, request: dict, host: Host, **options) -> dict:
    """Run one answer; it must send exactly one reply, to the request."""
    replies = []

    async def send(message: dict) -> None:
        replies.append(message)

    asyncio.run(function(request=request, sessions_root=host.sessions, send=send, **options))
    assert len(replies) == 1, replies
    assert (replies[0]["type"], replies[0]["request"]) == ("reply", request["request"])
    return replies[0]


@pytest.fixture
def host(tmp_path) -> Host:
    return Host(tmp_path)


@pytest.fixture
def api(tmp_path) -> Upstream:
    return Upstream(tmp_path, "api")


@pytest.fixture
def clones():
    """How many clones the test started."""
    before = git_cache.CLONES_STARTED
    return lambda: git_cache.CLONES_STARTED - before


KINDS = ["bwrap", "none"]


# checkout_repo


@pytest.mark.parametrize("kind", KINDS)
def test_a_fresh_clone_then_the_cache_then_already(host, api, clones, kind):
    first_commit = git("rev-parse", "HEAD", cwd=api.work)
    reply = host.checkout(12, [entry(api)], kind=kind)
    assert reply["ok"], reply
    [repo] = reply["repos"]
    path = host.sessions / "session-12" / "api"
    assert repo == {
        "name": "api",
        "full_name": "acme/api",
        "path": str(path.resolve()),
        "relative_path": "api",
        "branch": "calvin/session-12",
        "commit": first_commit,
        "status": "cloned",
        "cloned": True,
    }
    assert (path / "README").read_text() == "api readme\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=path) == "calvin/session-12"
    assert clones() == 1 and len(host.mirrors()) == 1

    # Another session: from the cache, fetched first.
    second_commit = api.push({"NEW": "new upstream file\n"})
    reply = host.checkout(13, [entry(api)], kind=kind)
    assert reply["ok"], reply
    [repo] = reply["repos"]
    assert (repo["status"], repo["cloned"], repo["commit"], "note" in repo) == ("cached", False, second_commit, False)
    assert (host.sessions / "session-13" / "api" / "NEW").read_text() == "new upstream file\n"
    assert clones() == 1 and len(host.mirrors()) == 1

    # The first session again: its checkout, as it is.
    (path / "agent.txt").write_text("work in progress")
    reply = host.checkout(12, [entry(api)], kind=kind)
    assert reply["ok"], reply
    [repo] = reply["repos"]
    assert (repo["status"], repo["cloned"], repo["branch"], repo["commit"]) == (
        "already",
        False,
        "calvin/session-12",
        first_commit,
    )
    assert (path / "agent.txt").read_text() == "work in progress"
    assert not (path / "NEW").exists()


def test_a_detached_checkout_is_returned_as_it_is(host, api):
    assert host.checkout(12, [entry(api)])["ok"]
    path = host.sessions / "session-12" / "api"
    git("checkout", "--quiet", "--detach", cwd=path)
    reply = host.checkout(12, [entry(api)])
    [repo] = reply["repos"]
    assert (repo["status"], repo["branch"], repo["commit"]) == ("already", None, git("rev-parse", "HEAD", cwd=path))


def test_a_checkout_whose_state_cannot_be_read_is_refused(host, api):
    assert host.checkout(12, [entry(api)])["ok"]
    path = (host.sessions / "session-12" / "api").resolve()
    (path / ".git" / "HEAD").unlink()  # the agent's own repository: it may break it
    reply = host.checkout(12, [entry(api)])
    assert reply["error"] == (
        f"could not check out acme/api: cannot read the checkout at {path}: No such file or directory;"
        " nothing was checked out"
    )


def test_the_same_session_asking_twice_at_once(host, api):
    replies = []

    async def send(message):
        replies.append(message)

    async def twice():
        request = checkout_request(12, [entry(api)])
        host.session(12)
        sandbox = Sandbox.none("test")
        await asyncio.gather(
            *(
                git_checkout_answer(
                    request=request, state_dir=host.state, sessions_root=host.sessions, sandbox=sandbox, send=send
                )
                for _ in range(2)
            )
        )

    asyncio.run(twice())
    assert sorted(reply["repos"][0]["status"] for reply in replies) == ["already", "cloned"], replies


def test_a_cache_directory_that_is_not_the_hosts_own_is_refused(host, api, tmp_path):
    (host.state / "git").mkdir(parents=True)
    (host.state / "git" / "workspace-3").symlink_to(tmp_path)
    reply = host.checkout(12, [entry(api)])
    assert reply["error"].startswith("this host cannot prepare its repository cache:"), reply
    assert not (tmp_path / "upstream" / ".git").exists() and not list(tmp_path.glob("*.git"))


def test_each_workspace_has_its_own_cache(host, api, clones):
    assert host.checkout(1, [entry(api)], workspace=3)["ok"]
    assert host.checkout(2, [entry(api)], workspace=4)["ok"]
    assert clones() == 2
    assert host.mirrors(3) == host.mirrors(4) and len(host.mirrors(3)) == 1
    assert mirror_path(host.state, 3, api.url) != mirror_path(host.state, 4, api.url)


@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_that_removed_its_checkout_gets_a_fresh_one(host, api, kind):
    assert host.checkout(12, [entry(api)], kind=kind)["ok"]
    path = host.sessions / "session-12" / "api"
    (path / "work.txt").write_text("the agent's work")
    git("add", "work.txt", cwd=path)
    git("commit", "--quiet", "-m", "work", cwd=path)
    subprocess.run(["rm", "-rf", str(path)], check=True)

    reply = host.checkout(12, [entry(api)], kind=kind)
    assert reply["ok"], reply
    upstream_main = git("--git-dir", str(api.bare), "rev-parse", "main")
    assert (reply["repos"][0]["status"], reply["repos"][0]["commit"]) == ("cached", upstream_main)
    assert not (path / "work.txt").exists()  # its commits lived in the repository it removed


@pytest.mark.parametrize("kind", KINDS)
def test_the_agents_git_commits_in_its_checkout_and_cannot_touch_the_mirror(host, api, kind):
    """In the agent's sandbox (the workspace's mirrors read-only, as the runner shows them)
    git works in the checkout, whose origin is the upstream; the mirror the host fetches
    into, and whose config the host's git obeys, stays out of the agent's reach."""
    assert host.checkout(12, [entry(api)], kind=kind)["ok"]
    session = host.session(12).resolve()
    path, mirror = session / "api", mirror_path(host.state.resolve(), 3, api.url)
    sandbox = host.sandbox(kind)
    secrets_dir = host.state / "secrets" / "session-12"
    secrets_dir.mkdir(parents=True, exist_ok=True)
    temp = host.state / "tmp" / "session-12"
    temp.mkdir(parents=True, exist_ok=True)

    def agent_runs(*argv) -> subprocess.CompletedProcess:
        wrapped = sandbox.wrap(
            list(argv), directory=session, temp_directory=temp, secrets_directory=secrets_dir,
            reveal=[mirror.parent],
        )  # fmt: skip
        return subprocess.run(wrapped, capture_output=True, text=True)

    (path / "work.txt").write_text("work")
    assert agent_runs("git", "-C", str(path), "add", "work.txt").returncode == 0
    done = agent_runs("git", *IDENTITY, "-C", str(path), "commit", "--quiet", "-m", "work")
    assert done.returncode == 0, done.stderr
    assert agent_runs("git", "-C", str(path), "log", "--oneline").stdout.count("\n") == 2
    assert git("remote", "get-url", "origin", cwd=path) == api.url  # pushes go to the upstream
    if kind == "bwrap":
        assert agent_runs("sh", "-c", f"echo x >> {mirror}/config").returncode != 0
        assert "sshCommand" not in (mirror / "config").read_text()


def test_a_failed_fetch_still_checks_out_from_the_cache_with_a_note(host, api):
    assert host.checkout(1, [entry(api)])["ok"]
    api.bare.rename(api.bare.with_name("moved.git"))
    reply = host.checkout(2, [entry(api)])
    assert reply["ok"], reply
    [repo] = reply["repos"]
    assert repo["status"] == "cached"
    assert repo["note"].startswith("could not fetch acme/api (git fetch failed: fatal: "), repo
    assert "does not appear to be a git repository" in repo["note"]  # git's own words
    assert (host.sessions / "session-2" / "api" / "README").exists()


def slow_clones(monkeypatch, seconds: float = 0.5) -> None:
    """Every clone waits first, so concurrent requests all arrive while it runs."""
    original = git_cache.clone

    async def slow(*args, **kwargs):
        await asyncio.sleep(seconds)
        return await original(*args, **kwargs)

    monkeypatch.setattr(git_cache, "clone", slow)


def test_sessions_checking_out_at_once_share_one_clone(host, api, clones, monkeypatch):
    slow_clones(monkeypatch)
    replies = []

    async def send(message):
        replies.append(message)

    async def together():
        requests = [checkout_request(session_id, [entry(api)]) for session_id in (1, 2, 3)]
        for request in requests:
            host.session(request["session"])
        sandbox = Sandbox.none("test")
        await asyncio.gather(
            *(
                git_checkout_answer(
                    request=request, state_dir=host.state, sessions_root=host.sessions, sandbox=sandbox, send=send
                )
                for request in requests
            )
        )

    asyncio.run(together())
    assert all(reply["ok"] for reply in replies), replies
    assert sorted(reply["repos"][0]["cloned"] for reply in replies) == [False, False, True]
    assert clones() == 1 and len(host.mirrors()) == 1
    assert git_cache._LOCKS == {}  # each lock goes once nobody waits for it


def test_two_daemons_on_one_state_directory_share_one_clone(host, api, clones, monkeypatch):
    """Each thread runs its own event loop, as a second daemon would: only the flock is shared."""
    slow_clones(monkeypatch)
    replies = {}

    def daemon(session_id):
        replies[session_id] = host.checkout(session_id, [entry(api)])

    threads = [threading.Thread(target=daemon, args=(session_id,)) for session_id in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(reply["ok"] for reply in replies.values()), replies
    assert sorted(reply["repos"][0]["cloned"] for reply in replies.values()) == [False, True]
    assert clones() == 1


@pytest.mark.parametrize("kind", KINDS)
def test_an_occupied_path_is_refused_and_nothing_is_written_outside(host, api, clones, tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    session = host.session(12)
    (session / "api").symlink_to(outside)
    reply = host.checkout(12, [entry(api)], kind=kind)
    assert not reply["ok"]
    assert reply["error"] == (
        f"could not check out acme/api: {session.resolve()}/api is a symbolic link; nothing was checked out"
    )
    assert list(outside.iterdir()) == [] and clones() == 0

    def a_file(path):
        path.write_text("a file")

    def a_full_directory(path):
        path.mkdir()
        (path / "x").write_text("x")

    def a_repository(path):
        git("init", "--quiet", str(path))

    def a_fifo_for_git(path):
        path.mkdir()
        os.mkfifo(path / ".git")

    def a_pretended_checkout(path):  # a repository that borrows objects from somewhere else
        git("init", "--quiet", str(path))
        (path / ".git" / "objects" / "info" / "alternates").write_text("/elsewhere/objects\n")

    for occupy, reason in [
        (a_file, "exists and is not a directory"),
        (a_full_directory, "is a directory that is not empty"),
        (a_repository, "is a checkout of another repository"),
        (a_fifo_for_git, "is a checkout of another repository"),
        (a_pretended_checkout, "is a checkout of another repository"),
    ]:
        subprocess.run(["rm", "-rf", str(session / "api")], check=True)
        occupy(session / "api")
        reply = host.checkout(12, [entry(api)], kind=kind)
        assert not reply["ok"] and reason in reply["error"], reply
    assert clones() == 0

    # An empty directory is fine: git fills it.
    subprocess.run(["rm", "-rf", str(session / "api")], check=True)
    (session / "api").mkdir()
    host.sandbox(kind).give_to_agent(session / "api")  # as the agent would have made it
    assert host.checkout(12, [entry(api)], kind=kind)["ok"]


def test_a_failure_names_the_repository_and_lists_the_ones_checked_out(host, api, tmp_path):
    web = Upstream(tmp_path, "web")
    session = host.session(12)
    (session / "web").write_text("in the way")
    reply = host.checkout(12, [entry(api), entry(web, "web")])
    assert not reply["ok"]
    assert reply["error"] == (
        f"could not check out acme/web: {session.resolve()}/web exists and is not a directory;"
        f" checked out: api at {session.resolve()}/api (branch calvin/session-12)"
    )
    assert [repo["name"] for repo in reply["repos"]] == ["api"]


def test_the_sandbox_keeps_the_checkout_steps_inside_the_session(host, api, tmp_path):
    """A link swapped in after the host's check (a race it cannot win alone) leads the
    sandboxed git nowhere: everything but the session directory and the mirror is read-only."""
    assert host.checkout(1, [entry(api)])["ok"]
    mirror = mirror_path(host.state.resolve(), 3, api.url)
    outside = tmp_path / "outside"
    outside.mkdir()
    session = host.session(2).resolve()
    (session / "api").symlink_to(outside)
    wrap = _sandboxed(host.sandbox("bwrap"), host.state.resolve(), session, 2)(mirror)
    start = git("--git-dir", str(mirror), "rev-parse", "refs/remotes/origin/main")

    async def add(wrap, branch):
        await add_checkout(mirror, session / "api", branch=branch, start=start, url=api.url, timeout=30, wrap=wrap)

    with pytest.raises(GitRefused, match="git clone failed"):
        asyncio.run(add(wrap, "calvin/session-2"))
    assert list(outside.iterdir()) == []
    # Unconfined, the same step writes through the link: the sandbox is what stopped it.
    asyncio.run(add(None, "calvin/session-2b"))
    assert (outside / "README").exists()


@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% {marker}",
        "ext::sh%20-c%20touch%20{marker}",
        "-uhack",
        "--upload-pack=touch {marker}",
        "fd::3",
        "ssh://-oProxyCommand=touch%20{marker}/x",
        "{marker}.git",  # a local path, where the gateway does not allow file
    ],
)
def test_a_hostile_clone_url_is_refused_before_git_runs(host, clones, tmp_path, url):
    marker = tmp_path / "pwned"
    schemes = ["https", "ssh", "git"]
    reply = host.checkout(
        12,
        [{"name": "api", "full_name": "acme/api", "clone_url": url.format(marker=marker), "default_branch": "main"}],
        allowed_schemes=schemes,
    )
    assert not reply["ok"] and "clone URL" in reply["error"], reply
    assert clones() == 0 and not (host.state / "git").exists() and not marker.exists()


def test_git_itself_refuses_transports_the_gateway_does_not_allow(api, tmp_path):
    """Were the URL check bypassed, GIT_ALLOW_PROTOCOL still stops git."""
    marker = tmp_path / "pwned"
    hostile = f"ext::sh -c touch% {marker}"
    done = asyncio.run(run_git(["ls-remote", "--", hostile], allowed_schemes=["https", "file"], timeout=30))
    assert not done.ok and "transport 'ext' not allowed" in done.stderr
    assert not marker.exists()
    # The same command runs where ext is allowed: the marker's absence above means something.
    asyncio.run(run_git(["ls-remote", "--", hostile], allowed_schemes=["ext"], timeout=30))
    assert marker.exists()

    # A transport git allows by default (a local path) is refused unless listed.
    done = asyncio.run(run_git(["ls-remote", "--", str(api.bare)], allowed_schemes=["https"], timeout=30))
    assert not done.ok and "transport 'file' not allowed" in done.stderr
    assert asyncio.run(run_git(["ls-remote", "--", str(api.bare)], allowed_schemes=["file"], timeout=30)).ok


def test_the_hosts_git_variables_do_not_reach_git(host, api, tmp_path, monkeypatch):
    elsewhere = tmp_path / "objects-elsewhere"
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(elsewhere))
    monkeypatch.setenv("GIT_SSH_COMMAND", "touch /nonexistent")
    env = git_environment(["https", "file"])
    assert [key for key in env if key.startswith("GIT_")] == [
        "GIT_TERMINAL_PROMPT",
        "GIT_ALLOW_PROTOCOL",
        "GIT_CONFIG_NOSYSTEM",
    ]
    assert env["GIT_TERMINAL_PROMPT"] == "0"  # git asks no one for a password: a private URL fails at once
    assert env["GIT_ALLOW_PROTOCOL"] == "https:file"
    assert host.checkout(1, [entry(api)])["ok"]
    assert not elsewhere.exists()


@pytest.mark.parametrize("scheme", ["git", "ssh"])  # over ssh, git's helper process must end too
def test_a_clone_killed_at_its_timeout_leaves_nothing(host, clones, scheme):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()  # and never answers
    url = f"{scheme}://127.0.0.1:{port}/x"
    started = time.monotonic()
    try:
        reply = host.checkout(
            12, [{"name": "api", "full_name": "acme/api", "clone_url": url, "default_branch": "main"}], timeout=2
        )
    finally:
        server.close()
        for connection, _ in held:
            connection.close()
    assert time.monotonic() - started < 5  # killed at 2 s, not left to linger
    assert reply == {
        "type": "reply",
        "request": "r-1",
        "ok": False,
        "error": "could not check out acme/api: git clone timed out after 2 s (nothing was kept);"
        " nothing was checked out",
        "repos": [],
    }
    assert clones() == 1 and host.mirrors() == []  # no cache entry, no half-made clone
    assert not (host.sessions / "session-12" / "api").exists()
    still_running = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and b"127.0.0.1" in _cmdline(pid) and str(port).encode() in _cmdline(pid)
    ]
    assert still_running == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_credentials_in_a_url_never_reach_an_error(host):
    port = free_port()  # nothing listens there: the connection is refused
    url = f"https://calvin:s3cr3t-token@127.0.0.1:{port}/acme/api.git"
    reply = host.checkout(12, [{"name": "api", "full_name": "acme/api", "clone_url": url, "default_branch": "main"}])
    assert not reply["ok"] and "git clone failed" in reply["error"], reply
    assert "s3cr3t" not in reply["error"] and "calvin:" not in reply["error"]


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_never_run(host, api, tmp_path, monkeypatch, kind):
    """Hooks from the host user's config, from git's templates or planted in the mirror
    (a post-checkout hook runs on `worktree add`, reference-transaction on every ref change)."""
    markers = tmp_path / "markers"
    markers.mkdir()

    def hooks(directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("post-checkout", "reference-transaction"):
            (directory / name).write_text(f"#!/bin/sh\ntouch {markers}/{directory.parent.name}-{name}\n")
            (directory / name).chmod(0o755)
        return directory

    own_home, home = os.environ["HOME"], tmp_path / "home"
    config = f"[core]\n\thooksPath = {hooks(home / 'global' / 'hooks')}\n[init]\n\ttemplateDir = {home / 'template'}\n"
    hooks(home / "template" / "hooks")
    (home / ".gitconfig").write_text(config)
    monkeypatch.setenv("HOME", str(home))

    assert host.checkout(1, [entry(api)], kind=kind)["ok"]
    mirror = mirror_path(host.state.resolve(), 3, api.url)
    hooks(mirror / "hooks")
    with monkeypatch.context() as upstream_side:  # the test's own push runs no hook of the host's
        upstream_side.setenv("HOME", own_home)
        api.push({"MORE": "more\n"})  # so the fetch changes refs
    assert host.checkout(2, [entry(api)], kind=kind)["ok"]
    assert list(markers.iterdir()) == []

    # Plain git runs them: the hooks above would have left their marks.
    def plain_worktree_add(session_id: int) -> list[str]:
        path = host.session(session_id) / "api"
        add = ["worktree", "add", "-b", f"plain-{session_id}", str(path), "refs/remotes/origin/main"]
        subprocess.run(["git", "--git-dir", str(mirror), *add], check=True, capture_output=True)
        return sorted(p.name for p in markers.iterdir())

    assert plain_worktree_add(3) == ["global-post-checkout", "global-reference-transaction"]
    monkeypatch.setenv("HOME", own_home)  # without the global hooksPath, the mirror's own hooks
    assert f"{mirror.name}-post-checkout" in plain_worktree_add(4)


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"repos": []}, "the request names no repositories"),
        ({"repos": "api"}, "the request names no repositories"),
        ({"repos": ["api"]}, "a repository entry is an object"),
        ({"session": "12"}, "the request names no session"),
        ({"session": 0}, "the request names no session"),
        ({"workspace": True}, "the request names no workspace"),
        ({"branch": "-b"}, "'-b' is not a usable branch name"),
        ({"branch": "calvin/../main"}, "is not a usable branch name"),
        ({"timeout": 0}, "timeout is a number of seconds"),
        ({"timeout": 3601}, "timeout is a number of seconds"),
        ({"timeout": float("nan")}, "timeout is a number of seconds"),
        ({"allowed_schemes": ["file", "ext"]}, "allowed_schemes is a list"),
        ({"allowed_schemes": ["https"]}, "uses file, which this gateway does not allow"),
    ],
)
def test_a_bad_request_is_refused_before_anything_is_cloned(host, api, clones, fields, problem):
    reply = host.checkout(12, [entry(api)], **fields)
    assert not reply["ok"] and problem in reply["error"], reply
    assert clones() == 0 and not (host.state / "git").exists()


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"name": "../api"}, "repository name '../api'"),
        ({"name": "AGENTS.md"}, "is reserved"),
        ({"full_name": "acme"}, "is not owner/name"),
        ({"default_branch": "main..x"}, "is not a usable branch name"),
        ({"default_branch": "-main"}, "is not a usable branch name"),
        ({"clone_url": "file:///srv/../etc/x.git"}, "without '..'"),
    ],
)
def test_every_repository_is_checked_again_on_the_host(host, api, clones, change, problem):
    reply = host.checkout(12, [entry(api, "web"), entry(api) | change])
    assert not reply["ok"] and problem in reply["error"], reply
    assert clones() == 0 and not (host.sessions / "session-12" / "web").exists()


def test_too_many_or_repeated_repositories_are_refused(host, api, clones):
    reply = host.checkout(12, [entry(api, f"r{i}") for i in range(11)])
    assert reply["error"] == "at most 10 repositories at once"
    reply = host.checkout(12, [entry(api), entry(api, "API")])
    assert reply["error"] == "repository API is named twice"
    assert clones() == 0


def test_ten_repositories_at_once(host, tmp_path):
    upstreams = [Upstream(tmp_path, f"r{n}") for n in range(10)]
    reply = host.checkout(12, [entry(upstream, f"r{n}") for n, upstream in enumerate(upstreams)])
    assert reply["ok"] and [repo["name"] for repo in reply["repos"]] == [f"r{n}" for n in range(10)]


def test_a_bug_still_answers(host, api, monkeypatch):
    async def broken(*args, **kwargs):
        raise RuntimeError("boom at https://calvin:s3cr3t@example.com/x")

    monkeypatch.setattr(git_cache, "clone", broken)
    reply = host.checkout(12, [entry(api)])
    assert (reply["ok"], reply["error"]) == (False, "the host could not do it: boom at https://example.com/x")


def test_a_session_without_a_directory_on_this_host_is_refused(host, api):
    request = checkout_request(99, [entry(api)])
    reply = answer(git_checkout_answer, request=request, state_dir=host.state, sandbox=Sandbox.none("t"), host=host)
    assert reply["error"] == "this host has no directory for session 99"


# spawn_thread's brief


@pytest.mark.parametrize(
    "path, problem",
    [
        ("/etc/plan.md", "brief must be a path relative to the session directory, without .."),
        ("api/../api/docs/plan.md", "brief must be a path relative to the session directory, without .."),
        ("api//docs/plan.md", "brief must be a path relative to the session directory, without .."),
        ("./api/docs/plan.md", "brief must be a path relative to the session directory, without .."),
        ("api/docs/plan.md\0.md", "brief must be a path relative to the session directory, without .."),
        ("api/README", "brief must be a .md file"),
        ("api/docs/plan.md.txt", "brief must be a .md file"),
        ("", "brief must be the path of a .md file in the session directory"),
        ("api/" + "d/" * 500 + "x.md", "brief must be the path of a .md file in the session directory"),
        (
            "plan.md",
            "brief plan.md is not inside a repository checked out in this session (checkout_repo first)",
        ),
        (
            "notes/plan.md",
            "brief notes/plan.md is not inside a repository checked out in this session (checkout_repo first)",
        ),
        (
            "web/docs/plan.md",
            "brief web/docs/plan.md is not inside a repository checked out in this session (checkout_repo first)",
        ),
        (
            "other/docs/plan.md",
            "brief other/docs/plan.md is not inside a repository checked out in this session (checkout_repo first)",
        ),
    ],
)
def test_brief_refusals(host, api, tmp_path, path, problem):
    web = Upstream(tmp_path, "web")
    assert host.checkout(12, [entry(api)])["ok"]
    other = host.session(12) / "other"  # a directory of that name, not a checkout
    other.mkdir()
    (other / "docs").mkdir()
    (other / "docs" / "plan.md").write_text(PLAN)
    reply = host.brief(12, path, [entry(api), entry(web, "web"), entry(web, "other")])
    assert (reply["ok"], reply.get("error")) == (False, problem)


def test_a_brief_must_be_on_the_fetched_default_branch(host, api):
    assert host.checkout(12, [entry(api)])["ok"]
    worktree = host.sessions / "session-12" / "api"
    (worktree / "docs" / "next.md").write_text("# Next\n")
    git("add", ".", cwd=worktree)
    git("commit", "--quiet", "-m", "brief", cwd=worktree)
    git("push", "--quiet", str(api.bare), "HEAD:calvin/session-12", cwd=worktree)  # pushed, but not to main
    refused = "brief docs/next.md is not on acme/api's default branch main as fetched (commit and push it there first)"
    assert host.brief(12, "api/docs/next.md", [entry(api)])["error"] == refused

    commit = api.push({"docs/next.md": "# Next\n", "TOP.md": "# Top\n"})
    reply = host.brief(12, "api/docs/next.md", [entry(api)])
    assert reply == {
        "type": "reply",
        "request": "r-brief",
        "ok": True,
        "repository": "api",
        "full_name": "acme/api",
        "default_branch": "main",
        "commit": commit,
        "path_in_repo": "docs/next.md",
        "anchor": None,
    }
    assert host.brief(12, "api/TOP.md", [entry(api)])["path_in_repo"] == "TOP.md"  # at the repository's top
    # A directory is not a brief, whatever its name.
    api.push({"docs/dir.md/inside.txt": "x"})
    assert "is not on acme/api's default branch" in host.brief(12, "api/docs/dir.md", [entry(api)])["error"]


def test_a_default_branch_the_upstream_does_not_have(host, api, clones):
    reply = host.checkout(12, [entry(api, default_branch="develop")])
    assert reply["error"] == (
        "could not check out acme/api: it has no branch develop, its default branch in the definition;"
        " nothing was checked out"
    )
    assert clones() == 1 and host.mirrors() == []
    assert host.checkout(12, [entry(api)])["ok"]
    reply = host.checkout(13, [entry(api, default_branch="develop")])  # from the cache now
    assert reply["error"] == (
        "could not check out acme/api: it has no branch develop, its default branch in the definition;"
        " nothing was checked out"
    )
    reply = host.brief(12, "api/docs/plan.md", [entry(api, default_branch="develop")])
    assert reply["error"] == "acme/api has no branch develop, its default branch in the definition"


@pytest.mark.parametrize("anchor", ["", "#", "x" * 201, 5])
def test_a_brief_anchor_must_be_a_name(host, api, anchor):
    assert host.checkout(12, [entry(api)])["ok"]
    reply = host.brief(12, "api/docs/plan.md", [entry(api)], anchor=anchor)
    assert reply["error"] == "an anchor is the part of the brief after '#', at most 200 characters"


def test_a_repository_named_like_a_brief_is_not_a_brief(host, api):
    assert host.checkout(12, [entry(api, "plan.md")])["ok"]
    reply = host.brief(12, "plan.md", [entry(api, "plan.md")])
    assert (
        reply["error"] == "brief plan.md is not inside a repository checked out in this session (checkout_repo first)"
    )


def test_a_default_branch_that_moves_between_listing_and_fetching(host, api, monkeypatch):
    assert host.checkout(12, [entry(api)])["ok"]
    api.push({"docs/plan.md": "# Changed\n"})

    async def fetched_nothing(*args, **kwargs):
        return None  # as if the push landed after the fetch had read the refs

    monkeypatch.setattr(git_cache, "fetch", fetched_nothing)
    reply = host.brief(12, "api/docs/plan.md", [entry(api)])
    assert reply["error"] == "acme/api's default branch main moved while it was fetched; try again"


def test_a_brief_whose_repository_cannot_be_fetched_is_refused(host, api):
    assert host.checkout(12, [entry(api)])["ok"]
    api.bare.rename(api.bare.with_name("gone.git"))
    reply = host.brief(12, "api/docs/plan.md", [entry(api)])
    assert reply["error"].startswith("could not fetch acme/api to check the brief: git ls-remote failed:"), reply


@pytest.mark.parametrize("anchor", ["intro", "#plan", "plan-1", "step-2-build-it", "explicit-anchor", "Intro"])
def test_a_brief_anchor_that_is_a_heading(host, api, anchor):
    assert host.checkout(12, [entry(api)])["ok"]
    reply = host.brief(12, "api/docs/plan.md", [entry(api)], anchor=anchor)
    assert reply["ok"] and reply["anchor"] == anchor.lstrip("#"), reply


@pytest.mark.parametrize("anchor", ["step-9", "plan-2", "not-a-heading"])
def test_a_brief_anchor_that_is_not_a_heading(host, api, anchor):
    assert host.checkout(12, [entry(api)])["ok"]
    reply = host.brief(12, "api/docs/plan.md", [entry(api)], anchor=anchor)
    assert reply["error"] == (
        f"anchor #{anchor} is not a heading in docs/plan.md on main"
        " (headings: #intro, #plan, #plan-1, #step-2-build-it, #explicit-anchor)"
    )


def test_an_anchor_refusal_lists_twenty_headings(host, api):
    api.push({"docs/long.md": "".join(f"## Part {n}\n" for n in range(25))})
    assert host.checkout(12, [entry(api)])["ok"]
    reply = host.brief(12, "api/docs/long.md", [entry(api)], anchor="part-25")
    listed = ", ".join(f"#part-{n}" for n in range(20))
    assert reply["error"] == f"anchor #part-25 is not a heading in docs/long.md on main (headings: {listed}, …)"
    api.push({"docs/flat.md": "no headings\n"})
    reply = host.brief(12, "api/docs/flat.md", [entry(api)], anchor="x")
    assert reply["error"] == "anchor #x is not a heading in docs/flat.md on main (it has no headings)"


def test_git_output_is_bounded(api, tmp_path):
    """stdout keeps its first bytes (a brief's head), stderr its last (git's conclusion)."""
    big = "x" * 100_000 + "END"
    commit = api.push({"big.md": big})
    args = ["--git-dir", str(api.bare), "cat-file", "blob", f"{commit}:big.md"]
    done = asyncio.run(run_git(args, allowed_schemes=["file"], timeout=30, stdout_limit=1000))
    assert done.ok and done.stdout == b"x" * 1000
    missing = str(tmp_path / ("long" * 400))
    done = asyncio.run(run_git(["ls-remote", "--", missing], allowed_schemes=["file"], timeout=30))
    assert not done.ok and len(done.stderr) <= 1024 and done.stderr.endswith("the repository exists.")
    assert "long" * 100 in done.stderr


def test_github_anchors():
    text = "# A *b* `c`\n# A b c\n## C# and snake_case\n# [Link](http://x) & more!\nx\n===\n# a-1\n"
    assert anchors(text) == ["a-b-c", "a-b-c-1", "c-and-snake_case", "link--more", "x", "a-1"]
    assert anchors("# Same\n# Same\n# Same-1\n") == ["same", "same-1", "same-1-1"]
    assert anchors("~~~\n# code\n<a name='hidden'>\n~~~\n<h2 id=\"shown\">x</h2>\n") == ["shown"]
    assert anchors('# Intro\n<a name="intro"></a><a name=""></a>\n') == ["intro"]
    assert anchors("# Cafe\u0301 menu\n") == ["cafe\u0301-menu"]  # combining marks stay
