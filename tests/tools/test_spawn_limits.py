"""spawn_thread's bounds on trees of spawned threads, over real MCP HTTP: how many levels below
its root a new thread may be (Quota.spawn_depth_max, 3) and how many spawned threads under one
root may be alive at once (Quota.spawn_live_descendants_max, 20), spawns still being made by
their platform included; each refusal names its limit and records nothing."""

import asyncio
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from calvin.chat.base import NewThread
from calvin.chat.web import WebChannel
from calvin.workspaces.models import Member, Quota
from sessions.models import Session
from sessions.services import runner_start, session_start
from sessions.turns import session_stop
from tests.conftest import Agent, text_of, wait_for
from tests.support.refusals import refusal
from tests.tools.test_spawn_thread import BRIEF, local_clones, upstream  # noqa: F401
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.tools.test_spawn_limits"
BOTH_IN = threading.Event()  # SlowWebChannel: the second spawn reached the platform too
MADE = threading.Event()  # LaterWebChannel: the platform has made the thread


class SlowWebChannel(WebChannel):
    """The web channel, holding each spawn's transaction open until a second spawn reaches it
    too (at most 2 s): two spawns counted side by side would both get here."""

    arrived = 0

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        SlowWebChannel.arrived += 1
        if SlowWebChannel.arrived >= 2:
            BOTH_IN.set()
        BOTH_IN.wait(timeout=2)
        return super().thread_spawn(parent_thread=parent_thread, text=text, tool_call_id=tool_call_id)


class LaterWebChannel(WebChannel):
    """A platform that makes the new thread later, once the test says so (as Slack does once it
    has taken the top-level message)."""

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        return None

    def thread_spawned(self, *, parent_thread, tool_call_id: int, withdraw: bool = False) -> NewThread | None:
        if not MADE.is_set():
            return None
        return NewThread(channel_kind="web", channel_id="web", thread_ts=uuid.uuid4().hex)


@pytest.fixture(autouse=True)
def fresh_channels():
    BOTH_IN.clear()
    MADE.clear()
    SlowWebChannel.arrived = 0


def web_adapter(settings, name: str) -> None:
    settings.CALVIN_CHAT_ADAPTERS = {**settings.CALVIN_CHAT_ADAPTERS, "web": f"{HERE}.{name}"}


def under(parent: Session, title: str, status: str = Session.Status.QUEUED) -> Session:
    """A session spawned under `parent` (the link spawn_settle makes), in the given status."""
    child = session_start(workspace=parent.workspace, owner=parent.owner, title=title)
    Session.objects.filter(id=child.id).update(parent=parent, status=status)
    child.refresh_from_db()
    return child


def agent_in(session: Session, gateway: str) -> Agent:
    """An agent running in `session`, with the brief's repository checked out."""
    runner, token = runner_start(session=session)
    agent = Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    result = agent.call("checkout_repo", {"repos": ["api"]})
    assert not result.is_error, text_of(result)
    return agent


def spawn(agent, task: str = "Write the API client"):
    return agent.call("spawn_thread", {"task": task, "brief": BRIEF})


def limits(workspace, **values) -> None:
    Quota.objects.filter(workspace=workspace).update(**values)


def nothing_recorded_under(session: Session) -> None:
    assert not ToolCall.objects.filter(session=session, tool="spawn_thread").exists()
    assert not Session.objects.filter(parent=session).exists()


@pytest.fixture
def root(agent, upstream):  # noqa: F811
    """The root session's agent (a thread a person started), with the brief's repository checked out."""
    result = agent.call("checkout_repo", {"repos": ["api"]})
    assert not result.is_error, text_of(result)
    return agent


def test_a_thread_three_levels_below_its_root_may_not_spawn_and_nothing_is_recorded(root, gateway):
    level1 = under(root.session, "level 1")
    level2 = under(level1, "level 2")
    level3 = under(level2, "level 3")
    deepest = agent_in(level3, gateway)
    assert refusal(spawn(deepest)) == (
        "no thread was spawned: this thread is 3 levels below its root, and this workspace allows 3 levels of"
        " spawned threads (Quota: spawn depth max 3). Do the work in this thread, or ask a workspace admin to"
        " raise the limit."
    )
    nothing_recorded_under(level3)
    # One level up, the new thread would be the third level: allowed.
    result = spawn(agent_in(level2, gateway))
    assert not result.is_error, text_of(result)
    assert Session.objects.get(parent=level2, thread__title="Write the API client").status == Session.Status.QUEUED


def test_twenty_live_spawned_threads_under_a_root_are_the_limit_wherever_they_are_in_its_tree(root, gateway):
    children = [under(root.session, f"child {i}") for i in range(10)]
    for i in range(9):
        under(children[0], f"grandchild {i}", status=Session.Status.RUNNING)
    # Not alive: answered (waiting for a message), finished, failed.
    for status in (Session.Status.IDLE, Session.Status.FINISHED, Session.Status.FAILED):
        under(children[1], f"done {status}", status=status)
    caller = agent_in(children[1], gateway)  # a child: the limit is its root's
    result = spawn(caller)  # the 20th live one
    assert not result.is_error, text_of(result)
    assert refusal(spawn(caller, task="One more")) == (
        "no thread was spawned: 20 spawned threads under this thread's root are still alive (waiting to start or"
        " running), and this workspace allows 20 at once (Quota: spawn live descendants max 20). Wait until one"
        " has answered or is stopped, or ask a workspace admin to raise the limit."
    )
    assert refusal(spawn(root, task="From the root")).startswith("no thread was spawned: 20 spawned threads")
    assert Session.objects.filter(thread__title__in=["One more", "From the root"]).count() == 0
    assert ToolCall.objects.filter(tool="spawn_thread").count() == 1


def test_a_stopped_descendant_frees_a_place(root):
    owner = root.session.owner
    limits(root.session.workspace, spawn_live_descendants_max=2)
    first = session_start(workspace=root.session.workspace, owner=owner, prompt="Busy work")
    Session.objects.filter(id=first.id).update(parent=root.session)
    under(root.session, "second", status=Session.Status.RUNNING)
    assert "2 spawned threads under this thread's root are still alive" in refusal(spawn(root))
    assert session_stop(session_id=first.id, member=owner) == "stopped before the agent started"
    result = spawn(root)
    assert not result.is_error, text_of(result)
    assert Session.objects.filter(parent=root.session).count() == 3


def test_limits_changed_in_the_workspaces_quota_take_effect(root, gateway):
    child = under(root.session, "child")
    client = Client()
    client.force_login(root.session.owner.user)
    quota = Quota.objects.get(workspace=root.session.workspace)
    url = f"/admin/workspaces/quota/{quota.id}/change/"
    page = client.get(url).content.decode()
    assert 'name="spawn_depth_max"' in page and 'name="spawn_live_descendants_max"' in page
    fields = ("concurrent_sessions", "turns_per_day", "agent_minutes_per_month", "tool_calls_per_day", "storage_mib")
    posted = {name: getattr(quota, name) for name in fields}
    response = client.post(url, {**posted, "spawn_depth_max": 1, "spawn_live_descendants_max": 2})
    assert response.status_code == 302, response.content.decode()[:3000]

    assert "this thread is 1 level below its root, and this workspace allows 1 level of spawned threads" in (
        refusal(spawn(agent_in(child, gateway)))
    )
    assert not spawn(root).is_error  # the second live one of two
    assert "this workspace allows 2 at once (Quota: spawn live descendants max 2)" in refusal(spawn(root))
    # Past the plan's ceiling (the defaults), an owner may not raise them; lowering is always allowed.
    response = client.post(url, {**posted, "spawn_depth_max": 4, "spawn_live_descendants_max": 21})
    assert response.content.decode().count("the platform&#x27;s ceiling for your plan") == 2
    limits(root.session.workspace, spawn_depth_max=0)
    assert "this workspace allows no spawned threads (Quota: spawn depth max 0)" in refusal(spawn(root))


def test_another_workspaces_sessions_never_count(root, gateway, other_workspace):
    for i in range(19):
        under(root.session, f"ours {i}")
    theirs = Member.objects.filter(workspace=other_workspace).first()
    foreign_root = session_start(workspace=other_workspace, owner=theirs, title="Globex root")
    for i in range(5):  # their live spawned sessions, and links forged across the tenants' boundary
        foreign = session_start(workspace=other_workspace, owner=theirs, title=f"globex {i}")
        Session.objects.filter(id=foreign.id).update(parent=root.session if i % 2 else foreign_root)
    # A session of ours whose parent link leads into Globex is a root of ours, not 1 level down.
    Session.objects.filter(id=root.session.id).update(parent=foreign_root)
    result = spawn(root)  # the 20th of ours
    assert not result.is_error, text_of(result)
    assert "20 spawned threads under this thread's root" in refusal(spawn(root))


@pytest.mark.parametrize(("minutes_ago", "refused"), [(0, True), (30, False)])
def test_a_spawn_still_being_made_counts_until_its_call_was_given_up(root, minutes_ago, refused):
    limits(root.session.workspace, spawn_live_descendants_max=1)
    call = ToolCall.objects.create(
        session=root.session, runner=root.runner, tool="spawn_thread", status=ToolCall.Status.APPLIED
    )
    ToolCall.objects.filter(id=call.id).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    result = spawn(root)
    if refused:
        assert "1 spawned thread under this thread's root is still alive (waiting to start or running, 1 of them" in (
            refusal(result)
        )
    else:
        assert not result.is_error, text_of(result)


def test_a_second_quick_call_counts_the_first_whose_thread_is_not_made_yet(root, settings):
    web_adapter(settings, "LaterWebChannel")
    limits(root.session.workspace, spawn_live_descendants_max=1)
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(spawn, root, "The first")
        wait_for(lambda: ToolCall.objects.filter(tool="spawn_thread").exists(), timeout=30)
        assert refusal(spawn(root, task="The second")).startswith(
            "no thread was spawned: 1 spawned thread under this thread's root is still alive (waiting to start or"
            " running, 1 of them still being made), and this workspace allows 1 at once"
        )
        MADE.set()
        result = first.result(timeout=60)
    assert not result.is_error, text_of(result)
    assert [s.thread.title for s in Session.objects.filter(parent=root.session)] == ["The first"]


def test_two_spawns_at_once_with_one_place_left_exactly_one_passes(root, gateway, settings):
    web_adapter(settings, "SlowWebChannel")
    limits(root.session.workspace, spawn_live_descendants_max=3)
    child = under(root.session, "child")
    under(child, "grandchild")
    other = agent_in(child, gateway)  # two agents of one tree: the root's row is what they share

    async def both():
        return await asyncio.gather(
            root._call("spawn_thread", {"task": "From the root", "brief": BRIEF}),
            other._call("spawn_thread", {"task": "From the child", "brief": BRIEF}),
        )

    results = asyncio.run(both())
    assert sorted(r.is_error for r in results) == [False, True]
    [refused] = [r for r in results if r.is_error]
    assert refusal(refused).startswith("no thread was spawned: 3 spawned threads under this thread's root are")
    assert Session.objects.filter(thread__title__in=["From the root", "From the child"]).count() == 1
    assert ToolCall.objects.filter(tool="spawn_thread").count() == 1
