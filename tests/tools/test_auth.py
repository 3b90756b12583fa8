"""Bearer tokens on /mcp: 401 before any tool runs; a token only ever acts for its own session."""

import httpx2
import pytest

from sessions.models import Message
from sessions.services import runner_revoke, runner_start
from tests.conftest import Agent, text_of, wait_for
from tools import auth
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "hello"}}}}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "post_card", "arguments": {"spec": CARD}}}


def post(url: str, authorization: str | None):
    headers = {"accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["authorization"] = authorization
    return httpx2.post(url, json=CALL, headers=headers)


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Basic dXNlcjpwdw==", "Bearer cvn_not-a-real-token", "bearer" + " x" * 3],
)
def test_missing_or_wrong_token_gets_401_and_reaches_no_tool(agent, authorization):
    response = post(agent.url, authorization)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "unauthorized"
    assert not ToolCall.objects.exists()


def test_a_valid_token_is_accepted(agent):
    response = post(agent.url, f"Bearer {agent.token}")
    assert response.status_code == 200
    assert response.json()["result"]["isError"] is False


def test_revoked_token_gets_401(agent):
    runner_revoke(runner=agent.runner)
    assert post(agent.url, f"Bearer {agent.token}").status_code == 401
    assert not ToolCall.objects.exists()


def test_a_new_runner_generation_revokes_the_old_token(agent):
    runner, token = runner_start(session=agent.session)
    assert runner.generation == agent.runner.generation + 1
    assert post(agent.url, f"Bearer {agent.token}").status_code == 401
    assert post(agent.url, f"Bearer {token}").status_code == 200


def test_runner_a_cannot_post_into_runner_b_thread(make_agent, celery_worker):
    a, b = make_agent(), make_agent()
    result = a.call("post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    wait_for(lambda: ToolCall.objects.filter(status="applied").exists())
    call = ToolCall.objects.get()
    assert (call.session_id, call.runner_id) == (a.session.id, a.runner.id)
    assert Message.objects.filter(thread=a.session.thread).count() == 1
    assert not Message.objects.filter(thread=b.session.thread).exists()


def test_tokens_are_stored_only_as_digests(agent):
    agent.runner.refresh_from_db()
    assert agent.token not in agent.runner.token_digest
    assert len(agent.runner.token_digest) == 64
    assert agent.runner.token_hint == agent.token[:10]


def test_the_sdk_client_with_a_bad_token_cannot_call_tools(agent):
    intruder = Agent(session=agent.session, runner=agent.runner, token="cvn_wrong", url=agent.url)
    with pytest.raises(Exception, match="unhandled errors"):  # the SDK surfaces the 401 as an error group
        intruder.call("post_card", {"spec": CARD})
    assert not ToolCall.objects.exists()


def test_a_token_revoked_after_use_is_refused_on_its_next_call_at_once(agent, monkeypatch):
    """The gate remembers a token it let through for a few seconds (tools/auth.py), but every
    tool call reads its caller again in its own thread: revocation is never late for a call."""
    monkeypatch.setattr(auth, "GATE_SECONDS", 60.0)
    auth.gate_forget()
    assert post(agent.url, f"Bearer {agent.token}").json()["result"]["isError"] is False
    runner_revoke(runner=agent.runner)
    response = post(agent.url, f"Bearer {agent.token}")
    assert response.status_code == 200  # the gate still remembers the token, but the call is refused
    assert response.json()["result"]["isError"] is True
    assert "unknown or revoked" in response.json()["result"]["content"][0]["text"]
    assert ToolCall.objects.count() == 1
    auth.gate_forget()
    assert post(agent.url, f"Bearer {agent.token}").status_code == 401


def test_a_token_the_gate_let_through_is_not_looked_up_twice_per_call(agent, monkeypatch):
    """One step into a thread per tool call: the token's lookup for the gate happens once in
    GATE_SECONDS, the caller's fresh read in the service's own thread."""
    lookups = []
    real = auth._resolve_in_thread

    async def counted(digest):
        lookups.append(digest)
        return await real(digest)

    monkeypatch.setattr(auth, "_resolve_in_thread", counted)
    auth.gate_forget()
    for _ in range(3):
        assert post(agent.url, f"Bearer {agent.token}").json()["result"]["isError"] is False
    assert len(lookups) == 1
    assert ToolCall.objects.count() == 3
