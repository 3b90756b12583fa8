"""Web spaces (web code channels): the dashboard's start form offers the workspace's own spaces, a
thread started in one is in that space (its channel `space:<name>`), a real host checks the space's
repository out before the agent's first turn, and a thread spawned from it stays in the space."""

import pytest

from calvin.workspaces.code_channels import code_channel_create
from calvin.workspaces.models import Member, Repository
from calvin.workspaces.services import agent_default_for
from sessions.models import Session, Thread
from sessions.services import runner_start, session_start
from tests.conftest import Agent, text_of, wait_for
from tests.sessions.host_processes import agent_texts, commanded, wait_connected
from tests.support.git_repos import Upstream, local_clones_allowed
from tools.models import ToolCall

START = "/w/acme/threads/start/"


@pytest.fixture(autouse=True)
def local_clones(settings):
    local_clones_allowed(settings)


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


@pytest.fixture
def web(workspace, tmp_path):
    upstream = Upstream(tmp_path / "upstream", "web", {"index.html": "<h1>web</h1>\n", "docs/plan.md": "# Plan\n"})
    return Repository.objects.create(workspace=workspace, name="web", full_name="acme/web", clone_url=upstream.url)


@pytest.fixture
def space(workspace, owner_member, web):
    return code_channel_create(workspace=workspace, kind="web", channel="web", repository=web, actor=owner_member)


@pytest.fixture
def globex_space(other_workspace):
    repository = Repository.objects.create(
        workspace=other_workspace, name="plans", full_name="globex/plans", clone_url="https://example.com/plans.git"
    )
    owner = Member.objects.get(workspace=other_workspace, role="owner")
    return code_channel_create(
        workspace=other_workspace, kind="web", channel="plans", repository=repository, actor=owner
    )


def start_form(client) -> str:
    page = client.get("/w/acme/").content.decode()
    return page[page.index(f'action="{START}"') :].split("</form>")[0]


@pytest.mark.django_db
def test_the_start_form_offers_the_workspaces_own_spaces_only(owner_client, space, globex_space):
    form = start_form(owner_client)
    assert 'name="space"' in form
    assert "in the web channel" in form and "in code channel #web (acme/web)" in form
    assert "plans" not in form and "globex" not in form.lower()


@pytest.mark.django_db
def test_a_thread_started_in_a_space_is_in_it_and_one_started_without_is_not(owner_client, workspace, space):
    response = owner_client.post(START, {"prompt": "Fix the header", "space": "web"})
    assert response.status_code == 302
    thread = Thread.objects.get()
    assert (thread.channel_kind, thread.channel_id, thread.workspace) == ("web", "space:web", workspace)
    assert owner_client.get(f"/threads/{thread.id}/").status_code == 200
    owner_client.post(START, {"prompt": "Something else", "space": ""})
    assert Thread.objects.exclude(id=thread.id).get().channel_id == "web"


@pytest.mark.django_db
@pytest.mark.parametrize("chosen", ["plans", "space:web", "Web", "web\n", "../web", "web\x00"])
def test_a_space_not_offered_is_refused(owner_client, space, globex_space, chosen):
    response = owner_client.post(START, {"prompt": "Fix the header", "space": chosen})
    assert response.status_code == 400
    assert "not one of this workspace's" in response.content.decode()
    assert not Thread.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_thread_in_a_space_has_its_repository_checked_out_before_its_first_turn(
    owner_client, workspace, space, hosts, celery_worker
):
    commanded(agent_default_for(workspace), ["sh", "-c", "cat; echo ---; cat web/index.html || echo no-checkout"])
    host = hosts("h1")
    wait_connected(host)
    owner_client.post(START, {"prompt": "Fix the header", "space": "web"})
    session = Session.objects.get()
    wait_for(lambda: agent_texts(session), timeout=90)
    (reply,) = agent_texts(session)
    assert reply.startswith(
        "[system] This thread is in the code channel #web, bound to acme/web: it is checked out at ./web on branch"
        f" calvin/session-{session.id}.\n\nFix the header"
    ), reply
    assert "<h1>web</h1>" in reply
    call = ToolCall.objects.get(session=session, tool="checkout_repo")
    assert call.status == ToolCall.Status.APPLIED and call.payload["code_channel"] == space.id


@pytest.mark.django_db(transaction=True)
def test_a_thread_spawned_from_a_space_stays_in_the_space(workspace, owner_member, space, gateway, celery_worker):
    session = session_start(workspace=workspace, owner=owner_member, channel_id="space:web", title="parent")
    runner, token = runner_start(session=session)
    parent = Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    assert not parent.call("checkout_repo", {"repos": ["web"]}).is_error
    result = parent.call("spawn_thread", {"task": "Write the footer", "brief": "web/docs/plan.md"})
    assert not result.is_error, text_of(result)
    child = Session.objects.select_related("thread").get(parent=session)
    assert (child.thread.channel_kind, child.thread.channel_id) == ("web", "space:web")
    assert result.structured_content["note"] == (
        "this thread is in the code channel #web, so the new thread belongs in its owner's direct messages, but the"
        " web channel has no direct messages: it was started in this thread's channel instead"
    )
    # A thread outside any space spawns outside any space, as before.
    plain = session_start(workspace=workspace, owner=owner_member, title="plain")
    runner, token = runner_start(session=plain)
    other = Agent(session=plain, runner=runner, token=token, url=f"{gateway}/mcp")
    assert not other.call("checkout_repo", {"repos": ["web"]}).is_error
    result = other.call("spawn_thread", {"task": "Write the footer", "brief": "web/docs/plan.md"})
    assert result.structured_content["note"] == ""
    assert Session.objects.get(parent=plain).thread.channel_id == "web"
