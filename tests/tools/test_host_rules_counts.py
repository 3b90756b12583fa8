"""Per-runner counts on a real host: a runner lives across its session's turns, and so do its
counts. What one turn used up stays used in the next turn of the same runner; only a new
runner generation (a restart) starts again."""

import json

import pytest

from calvin.chat.links import thread_url
from sessions.models import Runner, RunnerCount, Turn
from tests.conftest import wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie, ws_connect
from tests.sessions.host_processes import agent_texts, scripted, wait_connected
from tests.sessions.test_hosts import new_session, say
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = "limit of 40 calls per runner reached; it resets when the runner restarts"


def turn_activity(gateway, session, text: str) -> list[dict]:
    """Say `text` in the session's thread and return what the thread page was shown of the
    turn it starts (the agent's tool calls and their results), up to the turn's end."""
    seen = []
    cookie = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, session.thread_id, sessionid=cookie) as ws:
        say(session, text)
        while not any(a.get("kind") == "finished" for a in seen):
            event = json.loads(ws.recv(timeout=60))
            if "activity" in event:
                seen.append(event["activity"])
    return seen


def results(activity: list[dict]) -> list[str]:
    return [a["text"] for a in activity if a["kind"] == "tool_result"]


def test_a_count_used_up_in_one_turn_stays_used_up_in_the_next_turn_of_the_same_runner(
    hosts, gateway, workspace, settings
):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    session = new_session(workspace)
    other = new_session(workspace, "notes")
    read = {"tool": "read_thread", "arguments": {"url": thread_url(other.thread_id)}}
    scripted(session.agent, [read] * 40 + [{"reply": "read them"}])
    host = hosts("h1")
    wait_connected(host)

    first = results(turn_activity(gateway, session, "one"))
    assert len(first) == 40 and not any(LIMIT in text for text in first), first[:3]
    wait_for(lambda: agent_texts(session) == ["read them"], timeout=30)

    scripted(session.agent, [read, {"reply": "again"}])
    second = results(turn_activity(gateway, session, "two"))
    assert len(second) == 1 and LIMIT in second[0], second
    wait_for(lambda: agent_texts(session) == ["read them", "again"], timeout=30)

    # The same runner ran both turns: nothing but the count refused the second read.
    turns = list(Turn.objects.filter(session=session).order_by("id"))
    assert len(turns) == 2 and turns[0].runner_id == turns[1].runner_id is not None
    assert Runner.objects.filter(session=session).count() == 1
    assert RunnerCount.objects.get(runner_id=turns[0].runner_id, tool="read_thread").used == 40
    assert ToolCall.objects.filter(session=session, tool="read_thread").count() == 40
