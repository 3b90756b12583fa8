"""Every tool of both servers, every argument, every value of the hostile corpus: a specific
answer each time.

A refusal must say what is wrong (never the SDK's bare "Error executing tool <name>"),
a NUL or a non-finite number is always refused, nothing refused is stored, and the
gateway keeps answering.
"""

import json
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import httpx2
import pytest

from approvals.models import PendingApproval
from calvin.chat.links import thread_url
from calvin.workspaces.models import Repository
from secrets_vault.crypto import new_key
from sessions.models import Message
from sessions.services import session_start
from tests.approvals.support import worker_drain
from tests.conftest import wait_for
from tests.hostile import (
    CARD_SLOTS,
    CORPUS,
    HARD_LINKED,
    OTHER_THREAD_URL,
    OWN_MESSAGE,
    OWN_THREAD_URL,
    UNPARSEABLE,
    VALID_CALLS,
    leaf_slots,
    with_value_at,
)
from tests.support.git_repos import Upstream
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e999", "-1e999")
# Tools that wait for a person: their corpus calls run side by side.
BLOCKING = {"ask_user_question", "approval_prompt", "post_thread"}
# Tools refused here whatever the arguments, and why: this session has no host, so preview
# publishes nothing and unpreview finds nothing to take down (tests/previews/test_hostile_previews.py
# runs the corpus against both with a host answering). The corpus still must get clear answers.
ALWAYS_REFUSED = {"preview": "served only from a host's sandbox", "unpreview": "there is no live preview named"}
# Tools whose accepted calls post nothing into the session's thread (or only a notice).
POST_NOTHING = {"read_thread", "checkout_repo", "spawn_thread"}
# The argument that names a file of the session directory, in every tool that takes one: it
# must refuse HARD_LINKED (the hostile_agent fixture makes it a hard link to a file outside).
PATH_SLOT = ("path",)


@pytest.fixture
def hostile_agent(agent, settings, monkeypatch, tmp_path):
    settings.CALVIN_REFUSALS_PER_MINUTE = 1_000_000  # this test is refused on purpose, often
    settings.SP_STORE_KEY = [new_key()]  # request_secret needs a vault
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 1  # each accepted approval_prompt waits this long, undecided
    # Every accepted approval-gated call waits for a decision: let them pile up here.
    monkeypatch.setattr("approvals.services.MAX_PENDING_PER_SESSION", 1_000_000)
    (agent.directory / "ok.txt").write_text("a harmless file")
    outside = Path(settings.VAR_DIR) / "outside" / "hostile-hard-link-target"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text("a file of the gateway's, outside every session")
    os.link(outside, agent.directory / HARD_LINKED)
    settings.CALVIN_REPOSITORY_SCHEMES = ("file",)
    upstream = Upstream(tmp_path, "api", {"docs/plan.md": "# Plan\n"})
    workspace = agent.session.workspace
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    assert not agent.call("checkout_repo", {"repos": ["api"]}).is_error  # spawn_thread's brief lies in it
    return agent


def _on(agent, server: str):
    return agent if server == "calvin" else agent.nanoclaw


def _valid_calls(agent, server: str) -> dict:
    """The server's valid calls, with OWN_MESSAGE replaced by a message this agent sent and the
    thread links by the agent's own thread and another one of its workspace."""
    calls = VALID_CALLS[server]
    if server != "nanoclaw":
        session = agent.session
        other = session_start(workspace=session.workspace, owner=session.owner, title="another thread").thread
        text = json.dumps(calls).replace(OWN_THREAD_URL, thread_url(session.thread_id))
        return json.loads(text.replace(OTHER_THREAD_URL, thread_url(other.id)))
    sent = agent.nanoclaw.raw_call("send_message", json.dumps({"text": "for edits", "to": "thread"}))
    message_id = sent["structuredContent"]["messageId"]
    return json.loads(json.dumps(calls).replace(str(OWN_MESSAGE), str(message_id)))


def _slots(tool: str, arguments: dict) -> list[tuple]:
    if tool == "post_card":
        return [("spec", *slot) for slot in CARD_SLOTS]
    # The whole argument, and each value nested inside it (an option, a package name, an env value).
    slots = []
    for name, value in arguments.items():
        slots += [(name,)] + [slot for slot in leaf_slots(value, (name,)) if slot != (name,)]
    return slots


def _check(agent, tool: str, valid: dict, slot: tuple, value: str) -> bool:
    result = agent.raw_call(tool, with_value_at(valid, slot, value))
    text = result["content"][0]["text"] if result.get("content") else ""
    where = ".".join(map(str, slot))
    if slot == PATH_SLOT and value == json.dumps(HARD_LINKED):
        assert result["isError"] and "is a hard link to a file that may lie outside" in text, (tool, text)
    if result["isError"]:
        generic = f"Error executing tool {tool}"
        detail = text.removeprefix(generic).lstrip(": ")
        assert text != generic and len(detail) > 5, f"{tool} {where}={value[:40]}: generic answer {text!r}"
    elif "\\u0000" in value:
        pytest.fail(f"{tool} {where}: a NUL was accepted")
    elif value in NON_FINITE:
        pytest.fail(f"{tool} {where}={value}: a non-finite number was accepted")
    return not result["isError"]


@pytest.mark.parametrize("server", ["calvin", "nanoclaw"])
def test_every_argument_of_every_tool_against_the_corpus(hostile_agent, server):
    client = _on(hostile_agent, server)
    valid_calls = _valid_calls(hostile_agent, server)
    listed = {tool.name for tool in client.list_tools()}
    assert listed == set(valid_calls), "add a valid call for each new tool to tests/hostile.py"
    accepted = 0
    for tool, arguments in valid_calls.items():
        answer = client.raw_call(tool, json.dumps(arguments))
        if tool in ALWAYS_REFUSED:
            assert answer["isError"] and ALWAYS_REFUSED[tool] in answer["content"][0]["text"], answer
        elif tool not in BLOCKING:  # a question nobody answers times out, as it should
            assert not answer["isError"], f"the valid {tool} call failed: {answer}"
        cases = [(slot, value) for slot in _slots(tool, arguments) for value in CORPUS]
        with ThreadPoolExecutor(max_workers=16 if tool in BLOCKING else 1) as pool:
            accepted += sum(pool.map(partial(_check, client, tool, arguments), *zip(*cases, strict=True)))
        # Nothing accepted overflows the runner: counts are per runner, refusals cost no slot.
        hostile_agent.runner.counts.update(used=0)
    assert accepted > 0  # the corpus holds legitimate oddities (emoji, markup) that must still work
    wait_for(lambda: not ToolCall.objects.filter(status__in=["pending", "applying"]).exists(), timeout=60)
    assert not ToolCall.objects.filter(status="failed").exists(), "an accepted call failed in the worker"
    if server == "calvin":
        # One message per accepted call: its own, or (approval_prompt) its approval card, which
        # the worker posts after the call ended; the engine's notes to the agent are not counted.
        wait_for(lambda: not PendingApproval.objects.filter(card_platform_ids={}).exists(), timeout=60)
        posted = Message.objects.filter(thread=hostile_agent.session.thread).exclude(kind=Message.Kind.SYSTEM)
        assert posted.count() == ToolCall.objects.exclude(tool__in=POST_NOTHING).count()
    worker_drain()  # approval cards are still being edited: not under the tables' flush


UNPARSEABLE_CASES = [(server, tool) for server, calls in VALID_CALLS.items() for tool in calls]


@pytest.mark.parametrize("value", UNPARSEABLE, ids=["lone-high", "lone-low", "5000-digits", "deep-nesting"])
@pytest.mark.parametrize(("server", "tool"), UNPARSEABLE_CASES)
def test_unparseable_json_is_a_parse_error_before_any_tool(hostile_agent, server, tool, value):
    arguments = VALID_CALLS[server][tool]
    slot = _slots(tool, arguments)[0]
    before = ToolCall.objects.count()  # the fixture's own checkout
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "'
        + tool
        + '", "arguments": '
        + with_value_at(arguments, slot, value)
        + "}}"
    )
    response = httpx2.post(
        _on(hostile_agent, server).url,
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
    assert ToolCall.objects.count() == before
