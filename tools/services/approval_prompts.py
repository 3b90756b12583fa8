"""approval_prompt: Claude Code's permission prompts as approvals (DESIGN.md "Approvals").

Claude Code, started with `--permission-prompt-tool mcp__calvin__approval_prompt`, calls the
tool before a tool use its permission mode does not allow, waits, and reads a text holding
`{"behavior": "allow", "updatedInput": {...}}` or `{"behavior": "deny", "message": "..."}`.

- Who is asked: approvals.policy's "claude-code" rows, by the session's permission mode.
  bypassPermissions never asks (allowed at once, no card); acceptEdits does not ask about
  file edits (Edit, MultiEdit, Write, NotebookEdit); default, plan and acceptEdits ask about
  everything else. Plan mode is not special-cased: whatever Claude Code asks there, a
  person decides. An allowed-at-once call is still recorded, so it is audited.
- The card, the decision and the expiry are the approvals engine's (approvals/services.py):
  approval_request records the call and posts the card; approval_decide lets only the
  session's starter or a workspace admin decide; approval_expire ends it unanswered. An
  approved prompt's effect (tools.effects) is a no-op: Claude Code runs the tool itself.
- The wait is bounded by CALVIN_APPROVAL_PROMPT_WAIT_SECONDS: when the workspace's approval
  timeout is longer, the approval's expiry is brought forward to the bound, so the card and
  Claude Code both say "expired" at the same moment (never "denied").
- Allow rules (approvals/rule_services.py): a live rule of this session or its agent that
  matches the tool (and, for Bash, the command's prefix) answers allow at once; the prompt is
  still recorded, as an approval decided by the rule, whose card names it.
- Secrets: the input is what Claude Code is about to run, so a secret's value in it (an
  environment variable it expanded, a token in a curl line) is not the agent choosing to
  publish it. It is not refused: what is stored and shown (the card, the call's record, the
  summary) has the value hidden and says so; Claude Code gets its own input back unchanged.
"""

import asyncio
import json
import math

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.cards import (
    HIDDEN_SECRET,
    PERMISSION_PROMPT,
    PROMPT_ARGUMENT_BLOCKS_MAX,
    argument_blocks,
    duration,
    visible,
)
from approvals.models import PendingApproval
from approvals.policy import approval_needed
from approvals.rule_services import approval_allowed_by_rule, approval_rule_claim, rule_named
from approvals.services import approval_expire, approval_expiry_bound
from calvin.workspaces.models import Agent
from secrets_vault.scanner import SecretScanner
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.approval_requests import approval_request
from tools.services.common import off_loop, refuse_secrets, secret_scanner_for, tool_call_record

TOOL = PERMISSION_PROMPT
SOURCE = "claude-code"  # approvals.policy's rows for Claude Code's permission prompts
# The providers whose runners ask permission through this tool (tools/list hides it from the others).
PROVIDERS = frozenset({Agent.Provider.CLAUDE_CODE})
MAX_TOOL_NAME = 200
MAX_TOOL_USE_ID = 200
MAX_INPUT_BYTES = 64 * 1024
# How often a waiting prompt reads its approval's status: one primary-key read, off the event
# loop, holding no thread or connection in between (the engine has no push to listen on).
POLL_SECONDS = 0.25

S = PendingApproval.Status
# A person approved: what happened to the call's bookkeeping afterwards does not change that.
APPROVED = (S.APPROVED, S.APPLIED, S.FAILED)


def _non_finite(value, where: str) -> list[str]:
    """Where the input holds NaN or an infinity (JSON has neither; Python's parser lets them in)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [where]
    if isinstance(value, dict):
        return [w for key, item in value.items() for w in _non_finite(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [w for i, item in enumerate(value) for w in _non_finite(item, f"{where}[{i}]")]
    return []


def _problems(*, tool_name: str, tool_input: dict, tool_use_id: str | None) -> list[str]:
    problems = []
    if not tool_name.strip():
        problems.append("tool_name: must not be blank")
    elif len(tool_name) > MAX_TOOL_NAME:
        problems.append(f"tool_name: at most {MAX_TOOL_NAME} characters (got {len(tool_name)})")
    if tool_use_id is not None and len(tool_use_id) > MAX_TOOL_USE_ID:
        problems.append(f"tool_use_id: at most {MAX_TOOL_USE_ID} characters (got {len(tool_use_id)})")
    non_finite = _non_finite(tool_input, "input")
    if non_finite:
        problems.append("numbers must be finite (no NaN or Infinity): " + ", ".join(non_finite[:10]))
    else:
        size = len(json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")).encode())
        if size > MAX_INPUT_BYTES:
            problems.append(f"input: at most {MAX_INPUT_BYTES:,} bytes as JSON (got {size:,})")
    return problems


def _hidden(value, secrets: SecretScanner):
    """The value with every secret's value (plain or encoded) in its strings, keys included, hidden."""
    if isinstance(value, str):
        return secrets.redact(value, mark=HIDDEN_SECRET)
    if isinstance(value, list):
        return [_hidden(item, secrets) for item in value]
    if isinstance(value, dict):
        shown = {_hidden(key, secrets): _hidden(item, secrets) for key, item in value.items()}
        if len(shown) != len(value):
            # Two keys that differ only in a secret would become one: an argument would vanish from the card.
            raise ToolRefused("input: two of its keys differ only in a secret's value; the card could not show both")
        return shown
    return value


def _refused(problems: list[str]) -> ToolRefused:
    return ToolRefused("cannot ask a person about this tool use, so it is not allowed: " + "; ".join(problems))


def _answered_at_once(*, caller: Caller, arguments: dict, secrets, outcome: str) -> ToolCall:
    """The prompt's call, recorded as answered without a person (nothing to apply: Claude Code runs
    the tool itself), with why."""
    call = tool_call_record(
        caller=caller, tool=TOOL, arguments=arguments, payload={}, secrets=secrets, status=ToolCall.Status.APPLIED
    )
    ToolCall.objects.filter(id=call.id).update(result={"outcome": outcome}, finished_at=timezone.now())
    return call


@transaction.atomic
def approval_prompt_ask(*, caller: Caller, tool_name: str, input: dict, tool_use_id: str | None = None) -> dict:
    """Answer at once when policy lets the tool use run ({"answer": ...}); otherwise open its
    approval and return what approval_prompt_wait needs ({"answer": None, "approval_id", ...}).

    `input` keeps Claude Code's name, so a refusal points at `input.<key>`."""
    tool_input = input
    if caller.provider not in PROVIDERS:
        runs = (
            f"this session's agent runs the {caller.provider!r} provider"
            if caller.provider
            else "this session has no agent"
        )
        raise ToolRefused(
            f"approval_prompt answers Claude Code's permission prompts (--permission-prompt-tool), and {runs},"
            " whose runner never asks them"
        )
    problems = _problems(tool_name=tool_name, tool_input=tool_input, tool_use_id=tool_use_id)
    if problems:
        raise _refused(problems)
    secrets = secret_scanner_for(caller)
    # Names and ids never hold a secret in earnest: refused, as every tool's outbound text is.
    refuse_secrets(what="tool_name or tool_use_id", secrets=secrets, content=f"{tool_name}\n{tool_use_id or ''}")
    shown_input = _hidden(tool_input, secrets)
    arguments = {"tool_name": tool_name, "input": shown_input, "tool_use_id": tool_use_id}
    if shown_input != tool_input:
        arguments["secrets_hidden"] = True  # the card says so: what runs differs from what is shown
    blocks = len(argument_blocks(TOOL, arguments))
    if blocks > PROMPT_ARGUMENT_BLOCKS_MAX:
        raise _refused(
            [
                f"input: shown in full on the approval card (invisible characters escaped) it takes {blocks} Slack"
                f" blocks; at most {PROMPT_ARGUMENT_BLOCKS_MAX} fit"
            ]
        )
    if not approval_needed(source=SOURCE, tool=tool_name, permission_mode=caller.permission_mode):
        outcome = f"allowed without asking: permission mode {caller.permission_mode}"
        call = _answered_at_once(caller=caller, arguments=arguments, secrets=secrets, outcome=outcome)
        return {"answer": allow(tool_input), "tool_call_id": call.id}
    summary = visible(f"{arguments['tool_name']} {json.dumps(shown_input, ensure_ascii=False)}")
    rule = approval_rule_claim(
        workspace_id=caller.workspace_id,
        session_id=caller.session_id,
        agent_id=caller.agent_id,
        tool_name=tool_name,
        tool_input=tool_input,  # what runs, not what the card shows
    )
    if rule is not None:
        outcome = f"Allowed by {rule_named(rule)}."
        call = _answered_at_once(caller=caller, arguments=arguments, secrets=secrets, outcome=outcome)
        approval = approval_allowed_by_rule(call=call, rule=rule, summary=summary)
        return {"answer": allow(tool_input), "tool_call_id": call.id, "approval_id": approval.id}
    approval = approval_request(
        caller=caller,
        tool=TOOL,
        arguments=arguments,
        summary=summary,
        secrets=secrets,
        server=ToolCall.Server.CALVIN,
    )
    approval = approval_expiry_bound(approval=approval, seconds=settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS)
    return {
        "answer": None,
        "approval_id": approval.id,
        "tool_call_id": approval.tool_call_id,
        "expires_at": approval.expires_at,
        "tool_name": arguments["tool_name"],
    }


def allow(tool_input: dict) -> dict:
    return {"behavior": "allow", "updatedInput": tool_input}


def deny(message: str) -> dict:
    return {"behavior": "deny", "message": message}


def approval_prompt_answer(approval: PendingApproval | None, *, tool_name: str, tool_input: dict) -> dict:
    """Claude Code's answer for a decided or expired approval. `tool_name` is the shown one."""
    name = visible(tool_name)
    if approval is None:  # deleted with its session
        return deny(f"The permission request is gone (its session was deleted), so {name} was not run.")
    if approval.status in APPROVED:
        return allow(tool_input)
    if approval.status == S.DENIED:
        who = approval.decided_by or "someone"
        return deny(f"Denied by {who} (approval {approval.id}): {name} was not run. Ask in the thread if it is needed.")
    waited = duration(approval.expires_at - approval.requested_at)
    # Never worded as a denial: nobody said no, nobody answered.
    return deny(
        f"Expired (approval {approval.id}): nobody decided within {waited}, so {name} was not run."
        " Ask again if it is still needed."
    )


def _status(*, approval_id: int) -> str | None:
    return PendingApproval.objects.filter(id=approval_id).values_list("status", flat=True).first()


def approval_with_decider(*, approval_id: int) -> PendingApproval | None:
    """The approval with who decided it (for the answer that names them); None once deleted."""
    return PendingApproval.objects.select_related("decided_by__user").filter(id=approval_id).first()


@transaction.atomic
def approval_prompt_withdraw(*, approval_id: int) -> bool:
    """Claude Code stopped waiting (its turn was stopped, its process ended): a decision now would
    reach nobody, so the approval expires at once through the engine (the card says expired)."""
    PendingApproval.objects.filter(id=approval_id, status=S.PENDING).update(expires_at=timezone.now())
    return approval_expire(approval_id=approval_id)


async def _pause(gone, seconds: float) -> None:
    if gone is None:
        await asyncio.sleep(seconds)
    else:
        await asyncio.wait({gone}, timeout=seconds)  # the client going away ends the pause at once


async def approval_prompt_wait(asked: dict, *, tool_input: dict, client_gone=None) -> dict:
    """Wait for the approval to be decided or to expire, and return Claude Code's answer.

    At the bound the approval is expired through the engine, so the card and the answer say
    the same; a decision that beat the expiry by a moment wins and is answered. When the
    agent's request goes away (`client_gone`, a coroutine function), or this call is
    cancelled, the approval is withdrawn: nobody would hear its decision.
    """
    approval_id, deadline = asked["approval_id"], asked["expires_at"]
    gone = asyncio.ensure_future(client_gone()) if client_gone is not None else None
    try:
        while True:
            status = await off_loop(_status)(approval_id=approval_id)
            if status != S.PENDING:
                approval = await off_loop(approval_with_decider)(approval_id=approval_id)
                return approval_prompt_answer(approval, tool_name=asked["tool_name"], tool_input=tool_input)
            if gone is not None and gone.done():
                await off_loop(approval_prompt_withdraw)(approval_id=approval_id)
                return deny("Claude Code stopped waiting for the decision.")  # read by nobody
            remaining = (deadline - timezone.now()).total_seconds()
            if remaining <= 0:
                if not await off_loop(approval_expire)(approval_id=approval_id):
                    await _pause(gone, POLL_SECONDS)  # decided meanwhile: the next read finds out how
                continue
            await _pause(gone, min(POLL_SECONDS, remaining))
    except asyncio.CancelledError:
        await off_loop(approval_prompt_withdraw)(approval_id=approval_id)
        raise
    finally:
        if gone is not None:
            gone.cancel()


def approval_prompt_effect(call: ToolCall) -> dict:
    """An approved prompt's effect (tools.effects): nothing to do here, Claude Code runs the
    tool once the waiting call answers allow. Recorded so the card and the agent hear "applied"."""
    ToolCall.objects.filter(id=call.id).update(result={"outcome": "Claude Code was allowed to run it."})
    return {}
