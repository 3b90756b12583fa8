"""approval_prompt over real MCP with the real worker: Claude Code's permission prompts as
approval cards, decided by the right people, answered with the JSON Claude Code reads."""

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta

import httpx2
import pytest

from approvals.cards import HIDDEN_SECRET, PROMPT_ARGUMENT_BLOCKS_MAX
from approvals.models import PendingApproval
from approvals.services import ApprovalRefused, approval_decide
from calvin.workspaces.models import Member
from secrets_vault.services import secret_set
from sessions.models import Turn
from tests.approvals.support import (  # noqa: F401  (_worker_idle_afterwards: a fixture, autouse)
    OWNER_PASSWORD,
    _worker_idle_afterwards,
    card_note,
    card_of,
    card_text,
    pressing,
)
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import STRANGER_PASSWORD
from tools.models import ToolCall
from tools.services.approval_prompts import MAX_INPUT_BYTES, MAX_TOOL_NAME

pytestmark = pytest.mark.django_db(transaction=True)

BASH = {"command": "git push origin main", "description": "Push the branch"}
S = PendingApproval.Status


@pytest.fixture
def claude(agent):
    """The test runner, as a Claude Code runner (the provider that asks permission through the tool)."""
    return provider(agent, "claude-code")


def provider(agent, name: str):
    session_agent = agent.session.agent
    session_agent.provider = name
    session_agent.save(update_fields=["provider"])
    return agent


def mode(agent, permission_mode: str):
    agent.session.permission_mode = permission_mode
    agent.session.save(update_fields=["permission_mode"])
    return agent


def owner(agent) -> Member:
    return Member.objects.get(id=agent.session.owner_id)


def prompt(agent, tool_name: str = "Bash", tool_input: dict = BASH, **extra) -> Future:
    """Call approval_prompt in the background, as Claude Code does: it waits for the decision."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(agent.call, "approval_prompt", {"tool_name": tool_name, "input": tool_input, **extra})
    pool.shutdown(wait=False)
    return future


def asked(agent) -> PendingApproval:
    return wait_for(lambda: PendingApproval.objects.filter(session=agent.session).first(), timeout=20)


def answer_of(future_or_result) -> dict:
    result = future_or_result.result(timeout=60) if isinstance(future_or_result, Future) else future_or_result
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


def refused(agent, arguments: dict, *expected: str) -> str:
    result = agent.call("approval_prompt", arguments)
    text = text_of(result)
    assert result.is_error, text
    for part in expected:
        assert part in text, text
    assert not ToolCall.objects.filter(session=agent.session).exists()
    assert not PendingApproval.objects.filter(session=agent.session).exists()
    return text


# ---------------------------------------------------------------- the three answers


def test_an_approved_prompt_answers_allow_with_the_input(claude, gateway):
    future = prompt(claude, tool_use_id="toolu_01")
    approval = asked(claude)
    card = card_of(approval)
    assert not future.done(), "the call waits for the decision"
    with pressing(gateway, "owner", OWNER_PASSWORD, claude.session.thread_id) as person:
        response = person.press(approval.id, "approve")
    assert response.status_code == 200, response.text
    result = future.result(timeout=30)
    assert json.loads(text_of(result)) == {"behavior": "allow", "updatedInput": BASH}
    # The approvals engine carries it to the end: applied (Claude Code runs the tool itself), not failed.
    assert card_note(approval, "Approved by owner · applied")  # "applying" shows first, until the effect is applied
    assert PendingApproval.objects.get(id=approval.id).status == S.APPLIED
    call = ToolCall.objects.get(id=approval.tool_call_id)
    assert (call.server, call.tool, call.status) == ("calvin", "approval_prompt", "applied")
    assert call.arguments == {"tool_name": "Bash", "input": BASH, "tool_use_id": "toolu_01"}
    assert "Approval needed: use Bash" in card_text(card)
    # Claude Code has its answer in the call: no system message queues an extra turn.
    assert not Turn.objects.filter(session=claude.session).exists()


def test_a_denied_prompt_answers_deny_saying_who_denied_it(claude):
    future = prompt(claude)
    approval = asked(claude)
    approval_decide(approval_id=approval.id, member=owner(claude), approve=False, via="web")
    answer = answer_of(future)
    assert set(answer) == {"behavior", "message"} and answer["behavior"] == "deny"
    assert answer["message"].startswith("Denied by owner"), answer
    assert "expired" not in answer["message"].lower()
    assert PendingApproval.objects.get(id=approval.id).status == S.DENIED
    assert ToolCall.objects.get(id=approval.tool_call_id).status == "denied"
    assert not Turn.objects.filter(session=claude.session).exists()


def test_an_undecided_prompt_expires_at_the_bound_and_says_expired(claude, settings):
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 1.5
    started = time.monotonic()
    answer = answer_of(prompt(claude))
    waited = time.monotonic() - started
    assert answer["behavior"] == "deny"
    assert answer["message"].startswith("Expired"), answer
    assert "denied" not in answer["message"].lower()
    assert 1.5 <= waited < 15, waited
    approval = PendingApproval.objects.get(session=claude.session)
    assert approval.status == S.EXPIRED and approval.decided_by is None
    assert approval.expires_at - approval.requested_at == timedelta(seconds=1.5)  # the card's "Expires"
    assert ToolCall.objects.get(id=approval.tool_call_id).status == "expired"
    assert card_note(approval, "Expired").startswith("Expired: nobody decided within 2 s")


def test_the_workspaces_shorter_approval_timeout_expires_it_too(claude, workspace):
    workspace.approval_timeout = timedelta(seconds=1)
    workspace.save(update_fields=["approval_timeout"])
    answer = answer_of(prompt(claude))
    assert answer["behavior"] == "deny" and answer["message"].startswith("Expired"), answer
    assert PendingApproval.objects.get(session=claude.session).status == S.EXPIRED


def test_a_decision_just_before_the_bound_wins(claude, settings):
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 3
    future = prompt(claude)
    approval = asked(claude)
    time.sleep(max((approval.expires_at - approval.requested_at).total_seconds() - 1.5, 0))
    approval_decide(approval_id=approval.id, member=owner(claude), approve=True, via="admin")
    assert answer_of(future) == {"behavior": "allow", "updatedInput": BASH}


def test_a_prompt_whose_caller_went_away_expires_at_once(claude):
    """Claude Code's request ends (its turn stopped): nobody would hear a decision, so the card
    says expired, and a late press changes nothing."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "approval_prompt", "arguments": {"tool_name": "Bash", "input": BASH}},
        }
    )
    headers = {
        "authorization": f"Bearer {claude.token}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    with pytest.raises(httpx2.ReadTimeout):  # the client gives up and closes its connection
        httpx2.post(claude.url, content=body, headers=headers, timeout=2)
    approval = asked(claude)
    wait_for(lambda: PendingApproval.objects.get(id=approval.id).status == S.EXPIRED, timeout=10)
    with pytest.raises(ApprovalRefused, match="expired"):
        approval_decide(approval_id=approval.id, member=owner(claude), approve=True, via="web")


# ---------------------------------------------------------------- who is asked


def test_bypass_permissions_allows_at_once_without_a_card(claude):
    mode(claude, "bypassPermissions")
    started = time.monotonic()
    answer = answer_of(claude.call("approval_prompt", {"tool_name": "Bash", "input": BASH}))
    assert answer == {"behavior": "allow", "updatedInput": BASH}
    assert time.monotonic() - started < 5
    assert not PendingApproval.objects.exists()
    call = ToolCall.objects.get(session=claude.session)  # audited all the same
    assert (call.tool, call.status, call.arguments["input"]) == ("approval_prompt", "applied", BASH)


def test_accept_edits_allows_file_edits_without_asking(claude):
    mode(claude, "acceptEdits")
    edit = {"file_path": "/work/a.py", "old_string": "a", "new_string": "b"}
    assert answer_of(claude.call("approval_prompt", {"tool_name": "Edit", "input": edit})) == {
        "behavior": "allow",
        "updatedInput": edit,
    }
    assert not PendingApproval.objects.exists()


@pytest.mark.parametrize("permission_mode", ["default", "acceptEdits", "plan"])
def test_other_modes_ask_a_person(claude, permission_mode):
    mode(claude, permission_mode)
    future = prompt(claude)
    approval = asked(claude)
    assert approval.kind == "approval_prompt" and approval.status == S.PENDING
    approval_decide(approval_id=approval.id, member=owner(claude), approve=False, via="web")
    assert answer_of(future)["behavior"] == "deny"


# ---------------------------------------------------------------- who may decide


def test_only_the_owner_or_an_admin_decides(claude, other_workspace, plain_member):
    future = prompt(claude)
    approval = asked(claude)
    stranger = Member.objects.get(workspace=other_workspace)  # Globex's owner
    for member in (stranger, plain_member):
        with pytest.raises(ApprovalRefused, match="only the person who started this session"):
            approval_decide(approval_id=approval.id, member=member, approve=True, via="web")
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING
    assert not future.done()
    approval_decide(approval_id=approval.id, member=owner(claude), approve=True, via="web")
    assert answer_of(future)["behavior"] == "allow"


def test_a_stranger_pressing_the_card_changes_nothing(claude, gateway, other_workspace):
    future = prompt(claude)
    approval = asked(claude)
    with pressing(gateway, "stranger", STRANGER_PASSWORD, claude.session.thread_id) as person:
        response = person.press(approval.id, "approve")
    assert response.status_code >= 400
    assert PendingApproval.objects.get(id=approval.id).status == S.PENDING
    approval_decide(approval_id=approval.id, member=owner(claude), approve=False, via="web")
    assert answer_of(future)["behavior"] == "deny"


# ---------------------------------------------------------------- who is offered the tool


def test_tools_list_shows_it_to_claude_code_runners_only(claude):
    assert "approval_prompt" in {t.name for t in claude.list_tools()}
    for name in ("command", "script"):
        listed = {t.name for t in provider(claude, name).list_tools()}
        assert "approval_prompt" not in listed
        assert {"send_file", "post_card"} <= listed  # everything else stays


@pytest.mark.parametrize("name", ["command", "script"])
def test_a_call_from_another_provider_is_refused(agent, name):
    provider(agent, name)
    refused(
        agent,
        {"tool_name": "Bash", "input": BASH},
        "approval_prompt answers Claude Code's permission prompts",
        f"runs the '{name}' provider",
    )


def test_the_schema(claude):
    tool = next(t for t in claude.list_tools() if t.name == "approval_prompt")
    schema = tool.input_schema
    assert schema["required"] == ["tool_name", "input"]
    assert set(schema["properties"]) == {"tool_name", "input", "tool_use_id"}
    assert schema["properties"]["tool_name"]["maxLength"] == MAX_TOOL_NAME
    assert schema["properties"]["input"]["type"] == "object"


# ---------------------------------------------------------------- what the card shows


def test_the_card_shows_the_tool_and_every_input_value_escaped(claude):
    tool_input = {"command": "rm -rf build\u202e/txt.exe", "nested": {"list": ["<b>x</b>", 1.5, None]}}
    future = prompt(claude, tool_name="mcp__github__create_pr", tool_input=tool_input)
    approval = asked(claude)
    text = card_text(card_of(approval))
    assert '"mcp__github__create_pr"' in text
    assert '"command": "rm -rf build\\u202e/txt.exe"' in text  # the override is shown, not obeyed
    assert '"<b>x</b>"' in text and "1.5" in text and "null" in text
    approval_decide(approval_id=approval.id, member=owner(claude), approve=True, via="web")
    assert answer_of(future)["updatedInput"] == tool_input


def test_a_secret_in_the_input_is_hidden_on_the_card_and_claude_code_gets_it_back(claude, vault):
    value = "tok-7f3a9c2e5b1d"
    secret_set(session=claude.session, name="DEPLOY_TOKEN", value=value)
    tool_input = {"command": f"curl -H 'Authorization: Bearer {value}' https://deploy.example.com"}
    future = prompt(claude, tool_input=tool_input)
    approval = asked(claude)
    text = card_text(card_of(approval))
    assert value not in text and HIDDEN_SECRET in text
    assert f"shown here as {HIDDEN_SECRET}" in text  # the person is told what runs differs from what is shown
    call = ToolCall.objects.get(id=approval.tool_call_id)
    assert value not in json.dumps(call.arguments) and value not in approval.summary
    approval_decide(approval_id=approval.id, member=owner(claude), approve=True, via="web")
    assert answer_of(future) == {"behavior": "allow", "updatedInput": tool_input}


def test_the_largest_input_is_accepted_and_its_card_fits_slack(claude):
    # 64 KiB exactly as compact JSON: {"command":"xxx..."}
    filler = MAX_INPUT_BYTES - len('{"command":""}')
    tool_input = {"command": "x" * filler}
    future = prompt(claude, tool_input=tool_input)
    approval = asked(claude)
    card = card_of(approval)
    assert len(card.blocks) <= 50
    sections = [b["text"]["text"] for b in card.blocks if b["type"] == "section" and "text" in b]
    assert all(len(text) <= 3000 for text in sections)
    assert "".join(sections).count("x") >= filler  # every character of it, on Slack too
    approval_decide(approval_id=approval.id, member=owner(claude), approve=False, via="web")
    answer_of(future)


# ---------------------------------------------------------------- refusals


def test_an_input_over_64_kib_is_refused(claude):
    tool_input = {"command": "x" * (MAX_INPUT_BYTES - len('{"command":""}') + 1)}
    refused(claude, {"tool_name": "Bash", "input": tool_input}, "input: at most 65,536 bytes as JSON (got 65,537)")


def test_an_input_whose_card_would_not_fit_slack_is_refused(claude):
    # Under 64 KiB as JSON, but each invisible character is shown as a 6-character escape on its own line.
    tool_input = {"a": ["\u200b"] * 10_000}
    assert len(json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")).encode()) <= MAX_INPUT_BYTES
    refused(claude, {"tool_name": "Bash", "input": tool_input}, f"at most {PROMPT_ARGUMENT_BLOCKS_MAX} fit")


def test_a_tool_name_over_200_characters_is_refused(claude):
    refused(claude, {"tool_name": "B" * 201, "input": BASH}, "tool_name", "200")


def test_a_blank_tool_name_is_refused(claude):
    refused(claude, {"tool_name": "   ", "input": BASH}, "tool_name: must not be blank")


def test_an_input_that_is_not_an_object_is_refused(claude):
    refused(claude, {"tool_name": "Bash", "input": ["ls"]}, "input", "valid dictionary")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-1e999"])
def test_a_non_finite_number_in_the_input_is_refused(claude, number):
    result = claude.raw_call("approval_prompt", '{"tool_name": "Bash", "input": {"n": [1, ' + number + "]}}")
    assert result["isError"]
    assert "numbers must be finite (no NaN or Infinity): input.n[1]" in result["content"][0]["text"]
    assert not ToolCall.objects.exists() and not PendingApproval.objects.exists()


def test_the_answer_is_one_text_block_and_nothing_else(claude):
    """Claude Code parses the text; a structured copy next to it ({"result": ...}) could be read instead."""
    mode(claude, "bypassPermissions")
    result = claude.raw_call("approval_prompt", json.dumps({"tool_name": "Bash", "input": BASH}))
    assert result["content"] == [{"type": "text", "text": json.dumps({"behavior": "allow", "updatedInput": BASH})}]
    assert "structuredContent" not in result and not result["isError"]
