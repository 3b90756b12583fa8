"""checkout_repo's rules when the session runs on a real host process: the git work is done
by the host (`manage.py host`), over its connection, in its own cache and directories, and its
refusals come back to the agent over /mcp. (tests/tools/test_checkout_repo.py checks the same
rules for sessions without a host, whose git work the gateway does itself.)"""

import asyncio

import pytest

from calvin.workspaces.models import Repository
from sessions.services import runner_start
from tests.conftest import Agent, text_of, wait_for
from tests.sessions.host_processes import agent_texts, scripted, wait_connected
from tests.sessions.test_hosts import new_session, say
from tests.support.git_repos import Upstream, git_server_that_never_answers
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def local_clones(settings):
    settings.CALVIN_REPOSITORY_SCHEMES = ("https", "ssh", "git", "file")


@pytest.fixture
def host(hosts):
    handle = hosts("h1")
    wait_connected(handle)
    return handle


def on_host(gateway, *sessions) -> list[Agent]:
    """Each session given its directory on the host by a first turn there, then a runner of
    its own whose token the test calls /mcp with, as the agent on that host would."""
    scripted(sessions[0].agent, [{"reply": "ready"}])
    for session in sessions:
        say(session, "warm up")
    for session in sessions:
        wait_for(lambda s=session: agent_texts(s) == ["ready"], timeout=60)
    agents = []
    for session in sessions:
        session.refresh_from_db()
        assert session.host_id is not None
        runner, token = runner_start(session=session, host=session.host)
        agents.append(Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp"))
    return agents


def cache_entries(host, workspace_id: int) -> list[str]:
    cache = host.directory / "git" / f"workspace-{workspace_id}"
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


@pytest.fixture
def silent_git_server():
    with git_server_that_never_answers() as url:
        yield url


def test_a_clone_the_host_kills_at_its_timeout_leaves_nothing_there(
    host, gateway, workspace, settings, silent_git_server
):
    settings.CALVIN_GIT_TIMEOUT_SECONDS = 2  # sent with the request: the host's git obeys it
    Repository.objects.create(workspace=workspace, name="stuck", full_name="acme/stuck", clone_url=silent_git_server)
    [agent] = on_host(gateway, new_session(workspace))
    result = agent.call("checkout_repo", {"repos": ["stuck"]})
    assert result.is_error and "timed out" in text_of(result), text_of(result)
    assert "nothing was kept" in text_of(result)
    assert not (host.session_directory(agent.session.id) / "stuck").exists()
    assert [name for name in cache_entries(host, workspace.id) if not name.endswith(".lock")] == []


def test_two_sessions_on_one_host_at_once_clone_once(host, gateway, workspace, tmp_path):
    upstream = Upstream(tmp_path / "upstream", "api", {"README.md": "# API\n"})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    first, second = on_host(gateway, new_session(workspace, "one"), new_session(workspace, "two"))

    async def both():
        return await asyncio.gather(
            first._call("checkout_repo", {"repos": ["api"]}), second._call("checkout_repo", {"repos": ["api"]})
        )

    results = asyncio.run(both())
    assert not any(r.is_error for r in results), [text_of(r) for r in results]
    assert sorted(r.structured_content["repos"][0]["status"] for r in results) == ["cached", "cloned"]
    assert len([name for name in cache_entries(host, workspace.id) if name.endswith(".git")]) == 1
    for agent in (first, second):
        assert (host.session_directory(agent.session.id) / "api" / "README.md").read_text() == "# API\n"


def test_a_hostile_clone_url_that_slipped_past_the_definition_is_refused_by_the_host(
    host, gateway, workspace, tmp_path
):
    marker = tmp_path / "pwned"
    payload = tmp_path / "pwn.sh"
    payload.write_text(f"#!/bin/sh\ntouch {marker}\n")
    payload.chmod(0o755)
    # Saved without the model's validation (a raw insert): the host checks the URL again.
    Repository.objects.create(workspace=workspace, name="evil", full_name="x/evil", clone_url=f"ext::{payload}")
    [agent] = on_host(gateway, new_session(workspace))
    result = agent.call("checkout_repo", {"repos": ["evil"]})
    assert result.is_error and "names a git remote helper" in text_of(result), text_of(result)
    assert not marker.exists()
    assert not (host.session_directory(agent.session.id) / "evil").exists()
    assert [name for name in cache_entries(host, workspace.id) if not name.endswith(".lock")] == []
    assert ToolCall.objects.get(session=agent.session, tool="checkout_repo").status == ToolCall.Status.FAILED
