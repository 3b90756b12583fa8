"""spawn_thread over real MCP HTTP: a session in a new web thread, same owner, agent and
permission mode, started from a brief that is on its repository's fetched default branch."""

import asyncio

import pytest

from calvin.workspaces.models import Repository
from sessions.models import Message, Session, Turn
from sessions.services import runner_start
from tests.conftest import Agent, text_of
from tests.support.git_repos import Upstream, git, local_clones_allowed
from tests.support.refusals import refusal
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = "# Plan\n\nIntro.\n\n## Step 2: build it\n\nDo it.\n\n## Step 2: build it\n"
BRIEF = "api/docs/plan.md"


@pytest.fixture(autouse=True)
def local_clones(settings):
    local_clones_allowed(settings)


@pytest.fixture
def upstream(tmp_path, workspace):
    api = Upstream(tmp_path, "api", {"README.md": "# API\n", "docs/plan.md": PLAN})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=api.url)
    return api


@pytest.fixture
def parent(agent, upstream):
    result = agent.call("checkout_repo", {"repos": ["api"]})
    assert not result.is_error, text_of(result)
    return agent


def spawn(agent, task="Write the API client", brief=BRIEF, **extra):
    return agent.call("spawn_thread", {"task": task, "brief": brief, **extra})


def spawned(result) -> Session:
    assert not result.is_error, text_of(result)
    url = result.structured_content["url"]
    thread_id = int(url.rstrip("/").rsplit("/", 1)[1])
    assert url == f"https://calvin.example.com/threads/{thread_id}/"
    return Session.objects.select_related("thread").get(thread_id=thread_id)


def test_the_new_session_has_the_parents_owner_agent_and_permission_mode(parent):
    Session.objects.filter(id=parent.session.id).update(permission_mode="bypassPermissions", model="smart")
    child = spawned(spawn(parent, brief=f"{BRIEF}#step-2-build-it"))
    assert child.parent_id == parent.session.id
    assert child.owner_id == parent.session.owner_id and child.agent_id == parent.session.agent_id
    assert child.permission_mode == "bypassPermissions" and child.model == "smart"
    assert child.workspace_id == parent.session.workspace_id and child.thread.title == "Write the API client"
    [first] = Message.objects.filter(thread_id=child.thread_id)
    assert first.text.startswith("Write the API client\n\nBrief: api/docs/plan.md#step-2-build-it")
    assert "acme/api:docs/plan.md#step-2-build-it on main" in first.text
    assert Turn.objects.filter(session=child, prompt=first, status="queued").exists()
    notice = Message.objects.filter(thread_id=parent.session.thread_id, kind="system").last()
    assert (
        notice.text == f"Spawned a thread: Write the API client — https://calvin.example.com/threads/{child.thread_id}/"
    )
    call = ToolCall.objects.get(tool="spawn_thread")
    assert call.status == ToolCall.Status.APPLIED and call.result["session_id"] == child.id


@pytest.mark.parametrize("model", ["smart", "fast", "default"])
def test_a_model_tier_may_be_chosen(parent, model):
    assert spawned(spawn(parent, model=model)).model == model


def test_a_model_outside_the_tiers_is_refused(parent):
    assert "'smart', 'fast' or 'default'" in refusal(spawn(parent, model="opus"))
    assert not Session.objects.filter(parent=parent.session).exists()


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        ("ab", "task: 3 to 150 characters (got 2)"),
        ("x" * 151, "task: 3 to 150 characters (got 151)"),
        ("two\nlines", "task: one line (no line breaks)"),
        ("one\u2028line", "task: one line (no line breaks)"),
        ("   ", "task: must not be blank"),
    ],
)
def test_the_task_is_one_line_of_3_to_150_characters(parent, task, problem):
    assert refusal(spawn(parent, task=task)) == problem
    assert not Session.objects.filter(parent=parent.session).exists()


@pytest.mark.parametrize("task", ["abc", "y" * 150])
def test_tasks_at_the_bounds_are_taken(parent, task):
    assert spawned(spawn(parent, task=task)).thread.title == task


@pytest.mark.parametrize(
    ("brief", "problem"),
    [
        ("api/docs/plan.txt", "brief api/docs/plan.txt must be a .md file"),
        ("/etc/plan.md", "must be a path relative to the session directory"),
        ("api/../api/docs/plan.md", "must be a path relative to the session directory"),
        ("notes/plan.md", "is not inside a repository of this workspace checked out in this session"),
        ("api/docs/plan.md#", "the anchor after '#'"),
        ("api/docs/plan.md#no-such-heading", "anchor #no-such-heading"),
        ("api/docs/missing.md", "is not on acme/api's default branch main"),
    ],
)
def test_each_brief_rule_is_refused_with_its_reason(parent, brief, problem):
    assert problem in refusal(spawn(parent, brief=brief))
    assert not Session.objects.filter(parent=parent.session).exists()
    assert not ToolCall.objects.filter(tool="spawn_thread").exists()


def test_a_brief_only_in_the_session_and_not_pushed_is_refused_until_it_is(parent, upstream):
    worktree = parent.directory / "api"
    (worktree / "docs" / "next.md").write_text("# Next\n")
    git("add", "docs/next.md", cwd=worktree)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "next", cwd=worktree)
    assert "is not on acme/api's default branch main" in refusal(spawn(parent, brief="api/docs/next.md"))
    upstream.commit({"docs/next.md": "# Next\n"}, "pushed")  # now on the upstream's main
    assert spawned(spawn(parent, brief="api/docs/next.md#next"))


def test_a_repository_not_checked_out_here_is_refused(agent, upstream):
    assert "is not inside a repository" in refusal(spawn(agent))


def test_another_workspaces_repository_is_not_a_place_for_briefs(parent, other_workspace, tmp_path):
    theirs = Upstream(tmp_path, "sauce", {"plan.md": "# Plan\n"})
    Repository.objects.create(workspace=other_workspace, name="sauce", full_name="globex/sauce", clone_url=theirs.url)
    git("clone", "-q", str(theirs.bare), str(parent.directory / "sauce"))
    assert "is not inside a repository of this workspace" in refusal(spawn(parent, brief="sauce/plan.md"))


def test_eight_per_runner_under_twenty_parallel_calls_and_again_after_a_restart(parent):
    async def twenty(agent):
        return await asyncio.gather(
            *(agent._call("spawn_thread", {"task": f"task {i}", "brief": BRIEF}) for i in range(20))
        )

    results = asyncio.run(twenty(parent))
    assert sum(not r.is_error for r in results) == 8
    assert {refusal(r) for r in results if r.is_error} == {
        "limit of 8 calls per runner reached; it resets when the runner restarts"
    }
    assert Session.objects.filter(parent=parent.session).count() == 8
    runner, token = runner_start(session=parent.session)
    restarted = Agent(session=parent.session, runner=runner, token=token, url=parent.url)
    assert sum(not r.is_error for r in asyncio.run(twenty(restarted))) == 8


def test_the_parents_page_links_the_new_thread_and_the_new_one_links_back(parent, client):
    child = spawned(spawn(parent))
    client.force_login(parent.session.owner.user)
    page = client.get(f"/threads/{parent.session.thread_id}/").content.decode()
    assert f'<a href="/threads/{child.thread_id}/">Write the API client</a>' in page
    page = client.get(f"/threads/{child.thread_id}/").content.decode()
    assert f'Spawned from <a href="/threads/{parent.session.thread_id}/">' in page
