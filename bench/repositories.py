"""checkout_repo, measured through a real host: a repository already in the host's cache
checked out into a new session (fetch + worktree), and one already checked out there, next
to the same git steps run directly in this process.

    .venv/bin/python bench/repositories.py [--quick]

Starts a gateway (uvicorn serving calvin.asgi, one worker) and one `manage.py host` daemon
on a fresh database `calvin_bench_repos` and Redis db 11; the repository is a local bare one
(file://) of 300 files in 30 commits, made here. See bench/README.md.
"""

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import hosts as host_bench  # sets its environment on import: ours replaces it below

ROOT = host_bench.ROOT
VAR = ROOT / "var" / "bench-repos"
DB_NAME = "calvin_bench_repos"
REDIS_URL = "redis://127.0.0.1:6379/11"
ENV = {
    **host_bench.ENV,
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": REDIS_URL,
    "CALVIN_QUEUE": "calvin-bench-repos",
    "CALVIN_CHANNEL_PREFIX": "calvin-bench-repos",
    "CALVIN_VAR_DIR": str(VAR),
    "CALVIN_SESSIONS_DIR": str(VAR / "gateway-sessions"),
    "CALVIN_REPOSITORY_SCHEMES": "https,ssh,git,file",
}
os.environ.update(ENV)

from run import Processes  # noqa: E402

from tests.support.git_repos import Upstream, git  # noqa: E402  (ROOT is on the path: hosts.py put it there)


def upstream_make(root: Path) -> Upstream:
    upstream = Upstream(root, "api", {"README.md": "# API\n"})
    for commit in range(30):
        upstream.commit({f"src/m{commit}_{i}.py": f"x = {commit * 10 + i}\n" * 20 for i in range(10)}, f"c{commit}")
    return upstream


def direct_checkouts(upstream: Upstream, root: Path, n: int) -> list[float]:
    """The baseline: the host's git steps for a cached repository, run directly (no host
    connection, no sandbox, no lock): fetch the mirror, then a checkout borrowing its objects."""
    mirror = root / "mirror.git"
    git("clone", "-q", "--bare", upstream.url, str(mirror))
    git("--git-dir", str(mirror), "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    git("--git-dir", str(mirror), "fetch", "-q", "origin")
    latencies = []
    for i in range(n):
        path = str(root / f"w{i}")
        t0 = time.perf_counter()
        git("--git-dir", str(mirror), "fetch", "-q", "--prune", "origin")
        git("clone", "-q", "--shared", "--no-checkout", str(mirror), path)
        git("-C", path, "fetch", "-q", "--no-tags", str(mirror), "+refs/remotes/origin/*:refs/remotes/origin/*")
        git("-C", path, "checkout", "-q", "--no-track", "-b", f"b{i}", "origin/main")
        git("-C", path, "remote", "set-url", "origin", upstream.url)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    n = 20 if parser.parse_args().quick else 100
    host_bench.prepare(DB_NAME, REDIS_URL, VAR)

    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per MCP request otherwise
    from calvin.workspaces.models import Agent, Member, Repository
    from calvin.workspaces.services import workspace_create
    from sessions.hosts import host_create
    from sessions.models import Session
    from sessions.services import runner_start, session_start

    workspace = workspace_create(name="Bench", slug="bench")
    owner = Member.objects.create(workspace=workspace, display_name="bench")
    workspace.quota.tool_calls_per_day = 10**6
    workspace.quota.save()
    agent = Agent.objects.create(workspace=workspace, name="git", provider="script", tool_sets=["calvin"])
    upstream = upstream_make(VAR / "upstream")
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    host, token = host_create(name="bench-host")
    host_dir = VAR / "host"

    procs = Processes()
    try:
        port, _ = host_bench.gateway_and_host_start(procs, host=host, token=token, directory=host_dir)
        url = f"http://127.0.0.1:{port}/mcp"

        def new_session() -> str:
            """A session of this host, its directory made as its runner would; returns its token."""
            session = session_start(workspace=workspace, owner=owner, agent=agent, title="bench")
            Session.objects.filter(id=session.id).update(host=host)
            (host_dir / "sessions" / f"session-{session.id}").mkdir(parents=True)
            return runner_start(session=session, host=host)[1]

        arguments = {"repos": ["api"]}
        asyncio.run(host_bench.call_many(url, new_session(), "checkout_repo", arguments, 1))  # fills the cache
        cached, already = [], []
        for _ in range(n):
            session_token = new_session()
            first, *again = asyncio.run(host_bench.call_many(url, session_token, "checkout_repo", arguments, 4))
            cached.append(first)
            already += again
        direct = direct_checkouts(upstream, VAR / "direct", n)
        print(host_bench.row("checkout_repo, cached repository, new session", cached))
        print(host_bench.row("checkout_repo, already checked out", already))
        print(host_bench.row("baseline: the same git steps, direct", direct))
        summary = {
            name: {"p50": host_bench.pct(values, 0.5), "p99": host_bench.pct(values, 0.99), "n": len(values)}
            for name, values in (("cached", cached), ("already", already), ("direct_git", direct))
        }
        (VAR / "results.json").write_text(json.dumps(summary, indent=2))
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
