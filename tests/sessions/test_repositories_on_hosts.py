"""checkout_repo and spawn_thread when the session runs on a real host process: the git work
happens there, over the host's connection, in the directory only the host has."""

import pytest

from calvin.workspaces.models import Repository
from sessions.models import Session
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, commanded, scripted, wait_connected
from tests.sessions.test_hosts import new_session, say
from tests.support.git_repos import Upstream, git
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def local_clones(settings):
    settings.CALVIN_REPOSITORY_SCHEMES = ("https", "ssh", "git", "file")


def test_an_agent_on_a_host_checks_out_and_spawns_from_a_pushed_brief(hosts, workspace, tmp_path):
    upstream = Upstream(tmp_path / "upstream", "api", {"docs/plan.md": "# Plan\n\n## Next steps\n"})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    session = new_session(workspace)
    scripted(
        session.agent,
        [
            {"tool": "checkout_repo", "arguments": {"repos": ["ACME/api"]}},
            # Only the parent's prompt ("plan") names a brief: the child's spawn is refused, no chain.
            {"tool": "spawn_thread", "arguments": {"task": "Take the next steps", "brief": "api/docs/{prompt}.md"}},
            {"reply": "done"},
        ],
    )
    host = hosts("h1")
    wait_connected(host)
    say(session, "plan")
    wait_for(lambda: "done" in agent_texts(session), timeout=60)

    checkout = ToolCall.objects.get(session=session, tool="checkout_repo")
    assert checkout.status == ToolCall.Status.APPLIED, checkout.error
    worktree = host.session_directory(session.id) / "api"
    assert checkout.result["repos"][0]["path"] == str(worktree)
    assert (worktree / "docs" / "plan.md").exists()
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=worktree) == f"calvin/session-{session.id}"
    # The host's cache, not the gateway's.
    assert list((host.directory / "git").glob("workspace-*/*.git"))

    spawn = ToolCall.objects.get(session=session, tool="spawn_thread")
    assert spawn.status == ToolCall.Status.APPLIED, spawn.error
    child = Session.objects.get(parent=session)
    assert child.thread.title == "Take the next steps"
    # The child's own turn runs too (the same script): its checkout is its own worktree.
    wait_for(lambda: ToolCall.objects.filter(session=child, tool="checkout_repo").exists(), timeout=60)
    assert ToolCall.objects.get(session=child, tool="checkout_repo").result["repos"][0]["status"] == "cached"


def test_the_agent_reads_and_commits_in_its_checkout_inside_its_sandbox(hosts, workspace, tmp_path):
    """The checkout borrows objects from the host's cache, which the runner shows the agent
    read-only: without it, the agent's own git could not read a single commit."""
    upstream = Upstream(tmp_path / "upstream", "api", {"README.md": "# API\n"})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    session = new_session(workspace)
    scripted(session.agent, [{"tool": "checkout_repo", "arguments": {"repos": ["api"]}}, {"reply": "checked out"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "check out")
    wait_for(lambda: "checked out" in agent_texts(session), timeout=60)
    commit = "git -c user.name=a -c user.email=a@b -C api commit -q --allow-empty -m mine"
    commanded(session.agent, ["sh", "-c", f"{commit} && git -C api log --format=%s"])
    say(session, "commit")
    wait_for(lambda: len(agent_texts(session)) == 2, timeout=60)
    assert agent_texts(session)[1].split() == ["mine", "first"], agent_texts(session)
