"""spawn_thread from a session in a Slack thread, over real MCP with the real worker and the
Slack Web API stand-in: the task and the brief's link go out as a top-level message in the
parent's channel through its outbox, and that message becomes the child session's thread."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from calvin.chat.models import SlackLane, SlackPost
from calvin.chat.slack.outbox import slack_post_enqueue
from calvin.chat.slack.spawns import WITHDRAWN, _withdraw
from calvin.workspaces.models import Member, Repository
from calvin.workspaces.services import workspace_create
from sessions.models import Message, Session, Thread, Turn
from sessions.services import agent_reply_post, runner_start, session_start
from tests.conftest import Agent, text_of, wait_for
from tests.support.git_repos import Upstream, local_clones_allowed
from tools.models import ToolCall
from tools.services import spawns

pytestmark = pytest.mark.django_db(transaction=True)

CHANNEL, ROOT = "C0SPAWN", "1700000000.000100"
PLAN = "# Plan\n\n## Step 2\n\nDo it.\n"
TASK = "Write the API client"


@pytest.fixture(autouse=True)
def local_clones(settings):
    local_clones_allowed(settings)


def slack_parent(workspace, gateway, tmp_path) -> Agent:
    """A session in Slack thread CHANNEL/ROOT of the workspace's team, with repository api checked out."""
    upstream = Upstream(tmp_path, "api", {"docs/plan.md": PLAN})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    session = session_start(
        workspace=workspace,
        owner=owner,
        channel_kind="slack",
        channel_id=CHANNEL,
        thread_ts=ROOT,
        permission_mode="acceptEdits",
    )
    runner, token = runner_start(session=session)
    parent = Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    result = parent.call("checkout_repo", {"repos": ["api"]})
    assert not result.is_error, text_of(result)
    return parent


@pytest.fixture
def parent(slack_team, workspace, gateway, tmp_path, celery_worker):
    yield slack_parent(workspace, gateway, tmp_path)
    wait_for(lambda: not SlackPost.objects.filter(status__in=["queued", "sending"]).exists(), timeout=30)


def spawn(agent, task=TASK, brief="api/docs/plan.md#step-2"):
    return agent.call("spawn_thread", {"task": task, "brief": brief})


def top_level_posts(standin) -> list:
    return [c for c in standin.ok_calls_of("chat.postMessage") if not c.params.get("thread_ts")]


def test_the_task_goes_to_the_parents_channel_at_top_level_and_starts_the_childs_thread(parent, standin):
    result = spawn(parent)
    assert not result.is_error, text_of(result)
    (post,) = top_level_posts(standin)
    assert post.params["channel"] == CHANNEL
    assert post.params["text"].startswith(f"{TASK}\n\nBrief: api/docs/plan.md#step-2 (acme/api:docs/plan.md#step-2")
    ts = post.answer["ts"]
    assert result.structured_content["url"] == f"https://standin.slack.com/archives/{CHANNEL}/p{ts.replace('.', '')}"

    child = Session.objects.select_related("thread").get(parent=parent.session)
    assert (child.thread.channel_kind, child.thread.channel_id, child.thread.thread_ts) == ("slack", CHANNEL, ts)
    assert child.owner_id == parent.session.owner_id and child.agent_id == parent.session.agent_id
    assert child.permission_mode == "acceptEdits" and child.thread.title == TASK
    (first,) = Message.objects.filter(thread_id=child.thread_id)
    assert first.text == post.params["text"] and Turn.objects.filter(session=child, prompt=first).exists()
    # The child's first message is the top-level post itself: never posted again as a reply.
    assert not [c for c in standin.calls_of("chat.postMessage") if c.params.get("thread_ts") == ts]

    # The parent's thread shows the link, in Calvin and in Slack, after the top-level post.
    notice = f"Spawned a thread: {TASK} — {result.structured_content['url']}"
    assert Message.objects.filter(thread_id=parent.session.thread_id, kind="system", text=notice).exists()
    wait_for(lambda: [c for c in standin.ok_calls_of("chat.postMessage") if c.params.get("thread_ts") == ROOT])
    posts = [(c.params.get("thread_ts"), c.params["text"]) for c in standin.ok_calls_of("chat.postMessage")]
    assert posts == [(None, post.params["text"]), (ROOT, notice)]

    # The child's own replies go into the new thread.
    agent_reply_post(session=child, text="On it.")
    wait_for(lambda: [c for c in standin.ok_calls_of("chat.postMessage") if c.params.get("thread_ts") == ts])
    (reply,) = [c for c in standin.ok_calls_of("chat.postMessage") if c.params.get("thread_ts") == ts]
    assert (reply.params["channel"], reply.params["text"]) == (CHANNEL, "On it.")
    call = ToolCall.objects.get(tool="spawn_thread")
    assert call.status == ToolCall.Status.APPLIED and call.result["session_id"] == child.id


def test_channel_wide_mentions_in_the_task_reach_slack_inert(parent, standin):
    result = spawn(parent, task="Tell <!channel> and @here about it")
    assert not result.is_error, text_of(result)
    (post,) = top_level_posts(standin)
    assert "<!channel>" not in post.params["text"] and "@here" not in post.params["text"]
    assert "channel" in post.params["text"] and "here" in post.params["text"]


def test_a_top_level_message_slack_refuses_spawns_nothing_and_says_why(parent, standin):
    standin.fail("chat.postMessage", "ok_false", error="channel_not_found")
    result = spawn(parent)
    assert result.is_error
    assert "no thread was spawned: Slack did not take its top-level message:" in text_of(result)
    assert "channel_not_found" in text_of(result)
    assert not Session.objects.filter(parent=parent.session).exists()
    assert ToolCall.objects.get(tool="spawn_thread").status == ToolCall.Status.FAILED


def test_a_top_level_message_slack_has_not_taken_at_the_bound_is_withdrawn(parent, standin, monkeypatch):
    monkeypatch.setattr(spawns, "SPAWN_WAIT_SECONDS", 1)
    standin.fail("chat.postMessage", "429", retry_after=3)
    result = spawn(parent)
    assert result.is_error
    assert "its top-level message was withdrawn: Slack had not taken it" in text_of(result)
    assert not Session.objects.filter(parent=parent.session).exists()
    post = SlackPost.objects.get(tool_call__tool="spawn_thread")
    assert post.status == SlackPost.Status.FAILED
    time.sleep(3.5)  # Retry-After passed: the lane would send it now
    assert not top_level_posts(standin) and len(standin.calls_of("chat.postMessage")) == 1


def test_a_slack_thread_of_a_workspace_without_calvins_slack_app_is_refused(
    standin, vault, workspace, gateway, tmp_path, celery_worker, django_user_model
):
    """acme is installed in no Slack team; another workspace is, and its team is never used."""
    user = django_user_model.objects.create_user("other", password="pw-other-123")
    other = workspace_create(name="Globex", slug="globex", owner_user=user)
    team = standin.add_team(team_id="T0002", bot_token="xoxb-standin-team-0002")
    from calvin.chat.slack.installations import installation_save

    installation_save(workspace=other, team_id=team.team_id, bot_token=team.bot_token, team_name="globex")
    parent = slack_parent(workspace, gateway, tmp_path)
    result = spawn(parent)
    assert result.is_error
    assert "no thread was spawned: Calvin is not installed in this workspace's Slack" in text_of(result)
    assert not ToolCall.objects.filter(tool="spawn_thread").exists() and not SlackPost.objects.exists()
    assert Thread.objects.filter(workspace=workspace).count() == 1


def test_a_top_level_message_already_on_its_way_at_the_bound_is_waited_for(parent, standin, monkeypatch):
    monkeypatch.setattr(spawns, "SPAWN_WAIT_SECONDS", 2.5)
    # Being sent at the bound (2.5 s), so Slack may have it: never withdrawn; taken at about 3 s.
    standin.fail("chat.postMessage", "slow", delay=3)
    result = spawn(parent)
    assert not result.is_error, text_of(result)
    (post,) = top_level_posts(standin)
    assert Session.objects.get(parent=parent.session).thread.thread_ts == post.answer["ts"]


def test_a_post_is_not_withdrawn_while_a_drainer_holds_its_lane(slack_team, workspace, celery_worker):
    """A drainer holding the lane may have read the post and be sending it."""
    # Held, and due only later (as after a 429), before the post is made: no drain takes it here.
    soon = timezone.now() + timedelta(seconds=60)
    SlackLane.objects.create(team_id=slack_team.team_id, channel_id=CHANNEL, lease_until=soon, next_at=soon)
    post = slack_post_enqueue(team_id=slack_team.team_id, channel_id=CHANNEL, kind="message", payload={"text": "x"})
    assert _withdraw(post) is False
    SlackLane.objects.filter(id=post.lane_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert _withdraw(post) is True
    post.refresh_from_db()
    assert (post.status, post.error) == ("failed", WITHDRAWN)
