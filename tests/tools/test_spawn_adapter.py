"""spawn_thread goes through the parent thread's chat adapter (ChatAdapter.thread_spawn and
thread_spawned), over real MCP HTTP: adapters made here stand in for a platform, registered
for Slack threads through CALVIN_CHAT_ADAPTERS, so the service's side is tested apart from
Slack's (tests/chat/test_slack_spawn.py)."""

import shutil
from pathlib import Path

import pytest

from calvin.chat.base import ChatPermanentError, NewThread
from calvin.chat.web import WebChannel
from calvin.workspaces.models import Member, Repository
from sessions.models import Message, Session
from sessions.services import runner_start, session_start
from tests.conftest import Agent, text_of
from tests.support.git_repos import Upstream
from tools.models import ToolCall
from tools.services import spawns
from tools.services.git_work import GATEWAY_STATE

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.tools.test_spawn_adapter"
ASKED: list[dict] = []  # what the adapters were asked, in order (the gateway runs in this process)
MADE = NewThread(
    channel_kind="slack", channel_id="C0NEW", thread_ts="1700000001.000200", url="https://chat.example/t/1"
)


class InstantChannel(WebChannel):
    """A platform that makes the new thread at once, where it likes."""

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        ASKED.append({"spawn": parent_thread.id, "text": text, "tool_call_id": tool_call_id})
        return MADE


class LaterChannel(WebChannel):
    """A platform that makes the thread on its third asking (never, with `never`)."""

    never = False

    def thread_spawn(self, *, parent_thread, text: str, tool_call_id: int, channel_id: str = "") -> NewThread | None:
        ASKED.append({"spawn": parent_thread.id})
        return None

    def thread_spawned(self, *, parent_thread, tool_call_id: int, withdraw: bool = False) -> NewThread | None:
        ASKED.append({"spawned": tool_call_id, "withdraw": withdraw})
        if withdraw:
            raise ChatPermanentError("withdrawn by the platform")
        asked = sum(1 for a in ASKED if "spawned" in a)
        return MADE if asked >= 3 and not LaterChannel.never else None


@pytest.fixture(autouse=True)
def setup(settings):
    settings.CALVIN_REPOSITORY_SCHEMES = ("https", "ssh", "git", "file")
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    shutil.rmtree(Path(settings.VAR_DIR) / GATEWAY_STATE, ignore_errors=True)
    ASKED.clear()
    LaterChannel.never = False


@pytest.fixture
def parent(workspace, gateway, tmp_path, celery_worker) -> Agent:
    """A session in a (nominally Slack) thread whose adapter the test chooses, with api checked out."""
    upstream = Upstream(tmp_path, "api", {"docs/plan.md": "# Plan\n"})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    session = session_start(
        workspace=workspace, owner=owner, channel_kind="slack", channel_id="C0PARENT", thread_ts="1700000000.000100"
    )
    runner, token = runner_start(session=session)
    agent = Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    result = agent.call("checkout_repo", {"repos": ["api"]})
    assert not result.is_error, text_of(result)
    return agent


def adapter(settings, name: str) -> None:
    settings.CALVIN_CHAT_ADAPTERS = {**settings.CALVIN_CHAT_ADAPTERS, "slack": f"{HERE}.{name}"}


def spawn(agent):
    return agent.call("spawn_thread", {"task": "Write the client", "brief": "api/docs/plan.md"})


def test_the_new_thread_is_where_the_parents_adapter_put_it(parent, settings):
    adapter(settings, "InstantChannel")
    result = spawn(parent)
    assert not result.is_error, text_of(result)
    assert result.structured_content["url"] == MADE.url
    (asked,) = ASKED
    call = ToolCall.objects.get(tool="spawn_thread")
    assert asked["spawn"] == parent.session.thread_id and asked["tool_call_id"] == call.id
    assert asked["text"].startswith("Write the client\n\nBrief: api/docs/plan.md (acme/api:docs/plan.md on main")
    child = Session.objects.select_related("thread").get(parent=parent.session)
    assert (child.thread.channel_kind, child.thread.channel_id, child.thread.thread_ts) == (
        "slack",
        MADE.channel_id,
        MADE.thread_ts,
    )
    (first,) = Message.objects.filter(thread_id=child.thread_id)
    assert first.text == asked["text"]
    notice = f"Spawned a thread: Write the client — {MADE.url}"
    assert Message.objects.filter(thread_id=parent.session.thread_id, text=notice).exists()


def test_a_thread_the_platform_makes_later_is_waited_for(parent, settings):
    adapter(settings, "LaterChannel")
    result = spawn(parent)
    assert not result.is_error, text_of(result)
    assert result.structured_content["url"] == MADE.url
    assert [a.get("withdraw") for a in ASKED] == [None, False, False, False]
    child = Session.objects.get(parent=parent.session)
    assert ToolCall.objects.get(tool="spawn_thread").result["session_id"] == child.id


def test_at_the_bound_the_platform_is_told_to_withdraw_and_nothing_is_spawned(parent, settings, monkeypatch):
    adapter(settings, "LaterChannel")
    LaterChannel.never = True
    monkeypatch.setattr(spawns, "SPAWN_WAIT_SECONDS", 0.5)
    result = spawn(parent)
    assert result.is_error
    assert text_of(result).endswith("no thread was spawned: withdrawn by the platform")
    assert ASKED[-1]["withdraw"] is True and not any(a.get("withdraw") for a in ASKED[:-1])
    assert not Session.objects.filter(parent=parent.session).exists()
    call = ToolCall.objects.get(tool="spawn_thread")
    assert (call.status, call.error) == (ToolCall.Status.FAILED, "withdrawn by the platform")


def test_a_thread_whose_platform_has_no_adapter_here_is_refused_before_anything_is_recorded(parent, settings):
    settings.CALVIN_CHAT_ADAPTERS = {"web": settings.CALVIN_CHAT_ADAPTERS["web"]}
    result = spawn(parent)
    assert result.is_error
    assert "no thread can be spawned from this session's thread: no chat adapter for slack threads" in text_of(result)
    assert not ToolCall.objects.filter(tool="spawn_thread").exists()
