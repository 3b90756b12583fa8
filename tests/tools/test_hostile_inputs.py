"""Every tool, every argument, every value of the hostile corpus: a specific answer each time.

A refusal must say what is wrong (never the SDK's bare "Error executing tool <name>"),
a NUL or a non-finite number is always refused, nothing refused is stored, and the
gateway keeps answering.
"""

import json

import httpx2
import pytest

from sessions.models import Message
from tests.conftest import wait_for
from tests.hostile import CARD_SLOTS, CORPUS, UNPARSEABLE, VALID_CALLS, with_value_at
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e999", "-1e999")


@pytest.fixture
def hostile_agent(agent, settings):
    settings.CALVIN_REFUSALS_PER_MINUTE = 1_000_000  # this test is refused on purpose, often
    (agent.directory / "ok.txt").write_text("a harmless file")
    return agent


def _slots(tool: str, arguments: dict) -> list[tuple]:
    if tool == "post_card":
        return [("spec", *slot) for slot in CARD_SLOTS]
    return [(name,) for name in arguments]


def _check(agent, tool: str, slot: tuple, value: str) -> bool:
    result = agent.raw_call(tool, with_value_at(VALID_CALLS[tool], slot, value))
    text = result["content"][0]["text"] if result.get("content") else ""
    where = ".".join(map(str, slot))
    if result["isError"]:
        generic = f"Error executing tool {tool}"
        detail = text.removeprefix(generic).lstrip(": ")
        assert text != generic and len(detail) > 5, f"{tool} {where}={value[:40]}: generic answer {text!r}"
    elif "\\u0000" in value:
        pytest.fail(f"{tool} {where}: a NUL was accepted")
    elif value in NON_FINITE:
        pytest.fail(f"{tool} {where}={value}: a non-finite number was accepted")
    return not result["isError"]


def test_every_argument_of_every_tool_against_the_corpus(hostile_agent):
    listed = {tool.name for tool in hostile_agent.list_tools()}
    assert listed == set(VALID_CALLS), "add a valid call for each new tool to tests/hostile.py"
    accepted = 0
    for tool, arguments in VALID_CALLS.items():
        assert not hostile_agent.raw_call(tool, json.dumps(arguments))["isError"], f"the valid {tool} call failed"
        for slot in _slots(tool, arguments):
            for value in CORPUS:
                accepted += _check(hostile_agent, tool, slot, value)
        # Nothing accepted overflows the runner: counts are per runner, refusals cost no slot.
        hostile_agent.runner.counts.update(used=0)
    assert accepted > 0  # the corpus holds legitimate oddities (emoji, markup) that must still work
    wait_for(lambda: not ToolCall.objects.filter(status__in=["pending", "applying"]).exists(), timeout=60)
    assert not ToolCall.objects.filter(status="failed").exists(), "an accepted call failed in the worker"
    assert Message.objects.filter(thread=hostile_agent.session.thread).count() == ToolCall.objects.count()


@pytest.mark.parametrize("value", UNPARSEABLE, ids=["lone-high", "lone-low", "5000-digits", "deep-nesting"])
@pytest.mark.parametrize("tool", list(VALID_CALLS))
def test_unparseable_json_is_a_parse_error_before_any_tool(hostile_agent, tool, value):
    slot = _slots(tool, VALID_CALLS[tool])[0]
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "'
        + tool
        + '", "arguments": '
        + with_value_at(VALID_CALLS[tool], slot, value)
        + "}}"
    )
    response = httpx2.post(
        hostile_agent.url,
        content=body.encode(),
        headers={
            "authorization": f"Bearer {hostile_agent.token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert response.status_code in (400, 413), response.text[:200]
    if response.status_code == 400:
        error = response.json()["error"]
        assert error["code"] == -32700 and error["message"].startswith("Parse error: "), error
    assert not ToolCall.objects.exists()
