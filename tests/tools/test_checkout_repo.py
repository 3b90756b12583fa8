"""checkout_repo over real MCP HTTP: the workspace definition's repositories checked out
on the session's branch, from a per-host cache of bare clones, with the seed's error texts.

These sessions have no host (their directory is on the gateway), so the gateway runs the host's
git code itself; tests/sessions/test_repositories_on_hosts.py does the same through a real host.
"""

import asyncio
import shutil
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from calvin.workspaces.models import Repository
from secrets_vault.services import secret_set
from tests.conftest import text_of
from tests.support.git_repos import Upstream, git, git_server_that_never_answers
from tests.support.refusals import refusal
from tools.models import ToolCall
from tools.services.git_work import GATEWAY_STATE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def local_clones(settings):
    settings.CALVIN_REPOSITORY_SCHEMES = ("https", "ssh", "git", "file")
    # Workspace ids start again with each test database: an earlier run's cache is not this one's.
    shutil.rmtree(Path(settings.VAR_DIR) / GATEWAY_STATE, ignore_errors=True)


@pytest.fixture
def upstreams(tmp_path, workspace):
    api = Upstream(tmp_path, "api", {"README.md": "# API\n", "docs/plan.md": "# Plan\n"})
    web = Upstream(tmp_path, "web", {"index.html": "<h1>web</h1>\n"})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=api.url)
    Repository.objects.create(workspace=workspace, name="web", full_name="acme/web", clone_url=web.url, published=False)
    return {"api": api, "web": web}


def cache_of(workspace_id: int) -> Path:
    return Path(django_settings.VAR_DIR) / GATEWAY_STATE / "git" / f"workspace-{workspace_id}"


def checkout(agent, repos):
    return agent.call("checkout_repo", {"repos": repos})


def checked_out(result) -> list[dict]:
    assert not result.is_error, text_of(result)
    return result.structured_content["repos"]


def test_a_fresh_clone_becomes_a_checkout_on_the_sessions_branch(agent, upstreams):
    [entry] = checked_out(checkout(agent, ["api"]))
    path = Path(entry["path"])
    assert path == agent.directory / "api"
    assert entry["branch"] == agent.session.branch == f"calvin/session-{agent.session.id}"
    assert entry["status"] == "cloned" and entry["commit"] == upstreams["api"].head
    assert (path / "docs" / "plan.md").read_text() == "# Plan\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=path) == agent.session.branch
    # A repository of the agent's own, borrowing the cache's objects, whose origin is the upstream.
    [borrowed] = (path / ".git" / "objects" / "info" / "alternates").read_text().split()
    assert Path(borrowed).parent.parent == cache_of(agent.session.workspace_id)
    assert git("remote", "get-url", "origin", cwd=path) == upstreams["api"].url
    call = ToolCall.objects.get(session=agent.session, tool="checkout_repo")
    assert call.status == ToolCall.Status.APPLIED and call.result["repos"][0]["path"] == str(path)


def test_names_are_case_insensitive_by_name_or_owner_name_and_duplicates_collapse(agent, upstreams):
    entries = checked_out(checkout(agent, ["ACME/Api", "api", "API"]))
    assert [e["full_name"] for e in entries] == ["acme/api"]


def test_a_repository_already_checked_out_is_returned_as_it_is(agent, upstreams):
    [first] = checked_out(checkout(agent, ["api"]))
    (Path(first["path"]) / "work-in-progress.txt").write_text("mine")
    upstreams["api"].commit({"later.txt": "later"}, "later")
    [again] = checked_out(checkout(agent, ["acme/api"]))
    assert again["status"] == "already" and again["path"] == first["path"]
    assert (Path(again["path"]) / "work-in-progress.txt").read_text() == "mine"
    assert not (Path(again["path"]) / "later.txt").exists()


def test_a_second_session_uses_the_cache_and_fetches_first(agent, make_agent, upstreams):
    checked_out(checkout(agent, ["api"]))
    newer = upstreams["api"].commit({"later.txt": "later"}, "later")
    [entry] = checked_out(checkout(make_agent(), ["api"]))
    assert entry["status"] == "cached" and entry["commit"] == newer
    assert (Path(entry["path"]) / "later.txt").read_text() == "later"


def test_two_sessions_at_once_clone_once(agent, make_agent, upstreams):
    second = make_agent()

    async def both():
        return await asyncio.gather(
            agent._call("checkout_repo", {"repos": ["api"]}), second._call("checkout_repo", {"repos": ["api"]})
        )

    results = asyncio.run(both())
    statuses = sorted(checked_out(r)[0]["status"] for r in results)
    assert statuses == ["cached", "cloned"]
    assert len(list(cache_of(agent.session.workspace_id).glob("*.git"))) == 1


def test_an_unknown_name_is_refused_with_the_seeds_text_and_nothing_is_cloned(agent, upstreams):
    result = checkout(agent, ["api", "nope"])
    assert result.is_error
    assert refusal(result) == "no repository nope in this workspace; the list is in AGENTS.md"
    assert not (agent.directory / "api").exists()
    assert not cache_of(agent.session.workspace_id).exists()
    assert not ToolCall.objects.filter(tool="checkout_repo").exists()


def test_an_unpublished_repository_is_refused_with_the_seeds_text(agent, upstreams):
    result = checkout(agent, ["api", "Web"])
    assert result.is_error and refusal(result) == "Web is not published yet"
    assert not (agent.directory / "api").exists()


def test_every_bad_name_is_named(agent, upstreams):
    text = refusal(checkout(agent, ["web", "nope"]))
    assert text == "web is not published yet; no repository nope in this workspace; the list is in AGENTS.md"


def test_another_workspaces_repository_is_unknown_here(agent, upstreams, other_workspace, tmp_path):
    theirs = Upstream(tmp_path, "secret-sauce", {"x": "y"})
    Repository.objects.create(workspace=other_workspace, name="sauce", full_name="globex/sauce", clone_url=theirs.url)
    result = checkout(agent, ["globex/sauce"])
    assert refusal(result) == "no repository globex/sauce in this workspace; the list is in AGENTS.md"


@pytest.mark.parametrize("repos", [[], [f"r{i}" for i in range(11)]])
def test_one_to_ten_names(agent, upstreams, repos):
    assert "repos" in refusal(checkout(agent, repos))


def test_a_hostile_clone_url_that_slipped_past_the_definition_is_refused_by_the_host_code(agent, tmp_path):
    marker = tmp_path / "pwned"
    payload = tmp_path / "pwn.sh"
    payload.write_text(f"#!/bin/sh\ntouch {marker}\n")
    payload.chmod(0o755)
    # Saved without the model's validation (a raw insert): the host checks the URL again.
    Repository.objects.create(
        workspace=agent.session.workspace, name="evil", full_name="x/evil", clone_url=f"ext::{payload}"
    )
    result = checkout(agent, ["evil"])
    assert result.is_error and "remote helper" in text_of(result)
    assert not marker.exists() and not (agent.directory / "evil").exists()
    assert ToolCall.objects.get(tool="checkout_repo").status == ToolCall.Status.FAILED


@pytest.fixture
def silent_git_server():
    with git_server_that_never_answers() as url:
        yield url


def test_a_clone_killed_by_its_timeout_leaves_nothing(agent, settings, silent_git_server):
    settings.CALVIN_GIT_TIMEOUT_SECONDS = 2
    Repository.objects.create(
        workspace=agent.session.workspace, name="stuck", full_name="acme/stuck", clone_url=silent_git_server
    )
    result = checkout(agent, ["stuck"])
    assert result.is_error and "timed out" in text_of(result), text_of(result)
    assert not (agent.directory / "stuck").exists()
    cache = cache_of(agent.session.workspace_id)
    assert not cache.exists() or not [p for p in cache.iterdir() if not p.name.endswith(".lock")]


def test_the_hosts_git_error_is_stored_without_a_secret_it_quotes(agent, tmp_path):
    """git's own words (here: the clone URL it could not read) are stored and told redacted:
    they were made on the host, where no outbound check saw them."""
    value = "pathtoken-5ecret-77"
    secret_set(session=agent.session, name="DEPLOY_TOKEN", value=value)
    missing = tmp_path / f"gone-{value}.git"
    Repository.objects.create(
        workspace=agent.session.workspace, name="lost", full_name="acme/lost", clone_url=missing.as_uri()
    )
    text = text_of(checkout(agent, ["lost"]))
    call = ToolCall.objects.get(session=agent.session, tool="checkout_repo")
    assert call.status == ToolCall.Status.FAILED and "gone-" in call.error, call.error
    assert value not in call.error and value not in text
