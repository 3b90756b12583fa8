"""The script provider against a real gateway: its steps go through the real MCP endpoints with
a real runner token, from inside the sandbox."""

import json

import pytest

from calvin.workspaces.models import Member
from sessions.services import runner_start, session_start
from tests.conftest import wait_for
from tests.sessions.host import Roots, a_turn, events_of, run_turn
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {
    "root": "root",
    "elements": {
        "root": {"type": "Card", "props": {"title": "Report"}, "children": ["t"]},
        "t": {"type": "Text", "props": {"text": "Numbers for {prompt}"}},
    },
}


@pytest.fixture
def live_session(gateway, celery_worker, workspace):
    session = session_start(workspace=workspace, owner=Member.objects.get(workspace=workspace), title="script")
    runner, token = runner_start(session=session)
    yield session, runner, token, gateway
    wait_for(lambda: not ToolCall.objects.filter(status__in=["pending", "applying"]).exists(), timeout=30)


def script_turn(session, runner, token, gateway, steps, prompt="the weekly numbers") -> dict:
    return a_turn(
        {"kind": "script", "script": json.dumps(steps)},
        session=session.id,
        prompt=prompt,
        runner={"generation": runner.generation, "token": token},
        mcp_servers={"calvin": f"{gateway}/mcp", "nanoclaw": f"{gateway}/mcp/nanoclaw"},
    )


def test_a_script_posts_a_card_and_replies(live_session, tmp_path):
    session, runner_row, token, gateway = live_session
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(session.id, roots.bwrap())
    steps = [
        {"server": "calvin", "tool": "post_card", "arguments": {"spec": CARD}},
        {"tool": "no_such_tool", "arguments": {}},  # a tool error is reported; the script goes on
        {"sleep": 0.01},
        {"reply": "got: {prompt}"},
    ]
    finished = run_turn(runner, script_turn(session, runner_row, token, gateway, steps))
    assert (finished["status"], finished["error"]) == ("done", "")
    assert finished["reply"] == "got: the weekly numbers"

    call = ToolCall.objects.get(session=session, tool="post_card")
    assert call.runner_id == runner_row.id
    assert "Numbers for the weekly numbers" in json.dumps(call.arguments)

    events = events_of(emitted)
    assert [(e["kind"], e.get("name")) for e in events] == [
        ("tool_use", "post_card"),
        ("tool_result", "post_card"),
        ("tool_use", "no_such_tool"),
        ("tool_result", "no_such_tool"),
        ("text", None),
    ]
    assert str(call.id) in events[1]["text"]
    assert "no_such_tool" in events[3]["text"]
    assert events[4]["text"] == "got: the weekly numbers"


def test_a_malformed_script_fails_the_turn_before_any_step(live_session, tmp_path):
    session, runner_row, token, gateway = live_session
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(session.id, roots.bwrap())
    steps = [
        {"tool": "post_card", "arguments": {"spec": CARD}},
        {"tool": "post_card", "arguments": ["not", "an", "object"]},
        {"dance": 1},
        {"server": "elsewhere", "tool": "post_card"},
    ]
    finished = run_turn(runner, script_turn(session, runner_row, token, gateway, steps))
    assert finished["status"] == "failed"
    assert finished["error"] == (
        "The script agent exited with status 2: script: step 2: arguments must be an object; "
        "step 3: unknown step with keys ['dance'] (expected tool, reply or sleep); "
        "step 4: no MCP server 'elsewhere' for this session (it has: calvin, nanoclaw)"
    )
    assert not ToolCall.objects.filter(session=session).exists()
    assert events_of(emitted) == []

    not_json = script_turn(session, runner_row, token, gateway, [])
    not_json["provider"]["script"] = "[{'tool': 'post_card'}"
    finished = run_turn(runner, not_json)
    assert finished["status"] == "failed"
    assert finished["error"].startswith("The script agent exited with status 2: script: the script is not JSON")
