"""Slack code channels, with the Slack Web API stand-in, the real worker and real MCP over HTTP: a
mention in a bound channel starts a session whose repository a real host checks out before the
agent's first turn (and the agent is told); an unbound channel gets nothing of the kind; spawn_thread
from a bound channel opens the owner's direct messages and starts the new thread there."""

import pytest

from calvin.chat.models import SlackPost
from calvin.workspaces.code_channels import code_channel_create
from calvin.workspaces.models import Member, Repository
from calvin.workspaces.services import agent_default_for, workspace_create
from sessions.models import Message, Session
from sessions.services import agent_reply_post, runner_start, session_start
from tests.chat.test_slack_events import said, send, settled, slack_session
from tests.conftest import Agent, text_of, wait_for
from tests.sessions.host_processes import agent_texts, commanded, system_texts, wait_connected
from tests.support.git_repos import Upstream, git, local_clones_allowed
from tests.support.slack_requests import mention, message
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CODE, PLAIN, ROOT = "C0CODE001", "C0PLAIN01", "1700000300.000100"
TOLD = "[system] This thread is in the code channel #C0CODE001, bound to acme/web: it is checked out at ./web on branch"
# The agent: its prompt back, then what its directory holds when it starts.
AGENT = ["sh", "-c", "cat; echo; echo ---; cat web/index.html 2>/dev/null || echo no-checkout"]
TASK = "Write the header"


@pytest.fixture(autouse=True)
def local_clones(settings):
    local_clones_allowed(settings)


@pytest.fixture
def owner(workspace):
    return Member.objects.select_related("user").get(workspace=workspace, user__username="owner")


@pytest.fixture
def web(workspace, tmp_path):
    upstream = Upstream(tmp_path / "upstream", "web", {"index.html": "<h1>web</h1>\n", "docs/plan.md": "# Plan\n"})
    return Repository.objects.create(workspace=workspace, name="web", full_name="acme/web", clone_url=upstream.url)


@pytest.fixture
def bound(workspace, owner, web):
    return code_channel_create(workspace=workspace, kind="slack", channel=CODE, repository=web, actor=owner.user)


@pytest.fixture
def outbox_drained(standin):
    """Let the worker finish this test's Slack posts before the stand-in and the tables go."""
    yield
    wait_for(lambda: not SlackPost.objects.filter(status__in=["queued", "sending"]).exists(), timeout=30)


def mentioned(slack_sender, standin, channel: str, text: str = "fix the header") -> Session:
    said(standin, channel=channel, ts=ROOT, text=f"<@U0BOT> {text}")
    send(slack_sender, mention(user="U1", channel=channel, ts=ROOT, text=text))
    settled()
    return slack_session(channel=channel, root=ROOT)


@pytest.fixture
def host(hosts, workspace, slack_team, celery_worker, outbox_drained):
    commanded(agent_default_for(workspace), AGENT)
    handle = hosts("h1")
    wait_connected(handle)
    return handle


def test_a_session_in_a_bound_channel_has_the_repository_checked_out_before_its_first_turn(
    slack_sender, standin, bound, host
):
    session = mentioned(slack_sender, standin, CODE)
    wait_for(lambda: agent_texts(session), timeout=90)
    (reply,) = agent_texts(session)
    told, _, listing = reply.partition("---")
    assert told.startswith(f"{TOLD} calvin/session-{session.id}.\n\nfix the header"), told
    assert "<h1>web</h1>" in listing  # on disk before the agent's first command
    worktree = host.session_directory(session.id) / "web"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=worktree) == f"calvin/session-{session.id}"

    # A checkout_repo call of the session, as the agent's own would be recorded; and a notice in the thread.
    call = ToolCall.objects.get(session=session, tool="checkout_repo")
    assert call.status == ToolCall.Status.APPLIED and call.arguments == {"repos": ["web"]}
    assert call.payload["code_channel"] == bound.id and call.runner_id is not None
    assert call.result["repos"][0]["path"] == str(worktree) and call.result["repos"][0]["status"] == "cloned"
    notice = (
        f"Checked out acme/web on branch calvin/session-{session.id} before the agent's first turn:"
        " this thread is in the code channel #C0CODE001."
    )
    assert notice in system_texts(session)
    wait_for(lambda: notice in [c.params["text"] for c in posted(standin, channel=CODE)], timeout=20)

    # The next turn is an ordinary one: checked out once.
    send(slack_sender, _reply("and the footer"))
    settled()
    wait_for(lambda: len(agent_texts(session)) == 2, timeout=60)
    second = agent_texts(session)[1]
    assert second.startswith("and the footer") and "[system]" not in second and "<h1>web</h1>" in second
    assert ToolCall.objects.filter(session=session, tool="checkout_repo").count() == 1


def _reply(text: str):
    return message(user="U1", channel=CODE, ts="1700000300.000200", text=text, thread_ts=ROOT)


def test_a_session_in_an_unbound_channel_is_an_ordinary_one(slack_sender, standin, bound, host):
    session = mentioned(slack_sender, standin, PLAIN)
    wait_for(lambda: agent_texts(session), timeout=90)
    (reply,) = agent_texts(session)
    assert reply.startswith("fix the header") and "[system]" not in reply and "no-checkout" in reply
    assert not ToolCall.objects.filter(session=session).exists()
    assert not (host.session_directory(session.id) / "web").exists()


def test_a_checkout_that_fails_is_told_and_recorded_and_the_agent_still_works(
    slack_sender, standin, bound, host, tmp_path
):
    Repository.objects.filter(id=bound.repository_id).update(clone_url=f"file://{tmp_path}/gone.git")
    session = mentioned(slack_sender, standin, CODE)
    wait_for(lambda: agent_texts(session), timeout=90)
    (reply,) = agent_texts(session)
    assert "bound to acme/web, but it could not be checked out before this turn: could not check out" in reply
    assert "no-checkout" in reply
    call = ToolCall.objects.get(session=session, tool="checkout_repo")
    assert call.status == ToolCall.Status.FAILED and "could not check out acme/web" in call.error
    assert any(
        t.startswith("Could not check out acme/web for the code channel #C0CODE001") for t in system_texts(session)
    )


# spawn_thread


def parent_in(workspace, owner, gateway, channel: str) -> Agent:
    """A session of the owner in a Slack thread of `channel`, repository web checked out."""
    session = session_start(
        workspace=workspace, owner=owner, channel_kind="slack", channel_id=channel, thread_ts=ROOT, title="parent"
    )
    runner, token = runner_start(session=session)
    parent = Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    result = parent.call("checkout_repo", {"repos": ["web"]})
    assert not result.is_error, text_of(result)
    return parent


def spawn(parent):
    return parent.call("spawn_thread", {"task": TASK, "brief": "web/docs/plan.md"})


def posted(standin, **params) -> list:
    """The messages Slack took whose parameters include `params`."""
    calls = standin.ok_calls_of("chat.postMessage")
    return [c for c in calls if all(c.params.get(key) == value for key, value in params.items())]


def top_level(standin) -> list:
    return [c for c in standin.ok_calls_of("chat.postMessage") if not c.params.get("thread_ts")]


@pytest.fixture
def spawning(slack_team, celery_worker, gateway, outbox_drained):
    return gateway


def test_spawn_thread_from_a_bound_channel_posts_in_the_owners_direct_messages(
    spawning, standin, workspace, owner, bound
):
    Member.objects.filter(id=owner.id).update(slack_user_id="U0OWNER")
    owner.refresh_from_db()
    standin.add_user("U0OWNER", "owner")
    parent = parent_in(workspace, owner, spawning, CODE)
    result = spawn(parent)
    assert not result.is_error, text_of(result)

    (opened,) = standin.calls_of("conversations.open")
    assert opened.params["users"] == "U0OWNER" and "xoxb-standin-team-0001" in str(opened.headers)
    dm = opened.answer["channel"]["id"]
    (post,) = top_level(standin)
    assert post.params["channel"] == dm and post.params["text"].startswith(f"{TASK}\n\nBrief: web/docs/plan.md")
    assert not standin.messages(CODE) or all(m.get("thread_ts") for m in standin.messages(CODE))

    child = Session.objects.select_related("thread").get(parent=parent.session)
    assert (child.thread.channel_kind, child.thread.channel_id) == ("slack", dm)
    assert child.thread.thread_ts == post.answer["ts"] and child.owner_id == owner.id
    url = result.structured_content["url"]
    assert url == f"https://standin.slack.com/archives/{dm}/p{post.answer['ts'].replace('.', '')}"
    assert result.structured_content["note"] == (
        "this thread is in the code channel #C0CODE001: the new thread was started in its owner's direct messages"
    )
    notice = f"Spawned a thread in the owner's direct messages: {TASK} — {url}"
    assert Message.objects.filter(thread_id=parent.session.thread_id, kind="system", text=notice).exists()

    # The child's own replies go into that DM thread.
    agent_reply_post(session=child, text="On it.")
    (reply,) = wait_for(lambda: posted(standin, thread_ts=post.answer["ts"]), timeout=20)
    assert (reply.params["channel"], reply.params["text"]) == (dm, "On it.")


def test_an_owner_without_a_slack_id_gets_the_channel_and_is_told(spawning, standin, workspace, owner, bound):
    assert not owner.slack_user_id
    parent = parent_in(workspace, owner, spawning, CODE)
    result = spawn(parent)
    assert not result.is_error, text_of(result)
    assert not standin.calls_of("conversations.open")
    (post,) = top_level(standin)
    assert post.params["channel"] == CODE
    assert Session.objects.get(parent=parent.session).thread.channel_id == CODE
    note = result.structured_content["note"]
    assert note.startswith("this thread is in the code channel #C0CODE001, so the new thread belongs in its owner's")
    assert "has no Slack user id: it was started in this thread's channel instead" in note


def test_a_dm_slack_will_not_open_falls_back_to_the_channel_and_says_why(spawning, standin, workspace, owner, bound):
    Member.objects.filter(id=owner.id).update(slack_user_id="U0GONE")  # not a user of the stand-in's team
    owner.refresh_from_db()
    result = spawn(parent_in(workspace, owner, spawning, CODE))
    assert not result.is_error, text_of(result)
    assert standin.calls_of("conversations.open")[0].answer["error"] == "user_not_found"
    assert top_level(standin)[0].params["channel"] == CODE
    assert "user_not_found" in result.structured_content["note"]


def test_a_slack_that_cannot_open_it_now_spawns_nothing(spawning, standin, workspace, owner, bound):
    Member.objects.filter(id=owner.id).update(slack_user_id="U0OWNER")
    owner.refresh_from_db()
    standin.add_user("U0OWNER", "owner")
    standin.fail("conversations.open", "429", retry_after=2)
    parent = parent_in(workspace, owner, spawning, CODE)
    result = spawn(parent)
    assert result.is_error and "direct messages could not be opened now" in text_of(result)
    assert not Session.objects.filter(parent=parent.session).exists() and not top_level(standin)
    assert not ToolCall.objects.filter(tool="spawn_thread").exists()


def test_spawn_thread_from_an_unbound_channel_or_another_workspaces_binding_posts_in_the_channel(
    spawning, standin, workspace, owner, web, django_user_model
):
    Member.objects.filter(id=owner.id).update(slack_user_id="U0OWNER")
    owner.refresh_from_db()
    standin.add_user("U0OWNER", "owner")
    # Globex binds a channel id; in Acme that channel is an ordinary one.
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    theirs = Repository.objects.create(
        workspace=globex, name="web", full_name="globex/web", clone_url="https://example.com/web.git"
    )
    code_channel_create(workspace=globex, kind="slack", channel="C0GLOBEX1", repository=theirs, actor=user)
    for channel in (PLAIN, "C0GLOBEX1"):
        parent = parent_in(workspace, owner, spawning, channel)
        result = spawn(parent)
        assert not result.is_error, text_of(result)
        assert result.structured_content["note"] == ""
        assert Session.objects.get(parent=parent.session).thread.channel_id == channel
    assert not standin.calls_of("conversations.open")
    assert [c.params["channel"] for c in top_level(standin)] == [PLAIN, "C0GLOBEX1"]
