"""post_thread (seed 000): a reply inside another thread, with the session's owner named.

- The target: as read_thread's (tools/services/threads.py), readable under the same rule;
  never the session's own thread (the agent replies there normally).
- The text: 1 to 4,000 characters. Channel-wide mentions (@channel, @here, @everyone, Slack's
  <!channel>, <!here>, <!everyone> and their <!here|label> forms) and user groups
  (<!subteam^ID|@group>) become plain text: "@" and a zero-width space, then the word, which
  neither Slack nor a reader's client takes for a mention. A line "Posted for <owner> ·
  <the session's thread on its own platform>" is appended. What is posted is stored with the call (`post`), shown
  on the approval card and posted by the worker as it is: what a person approves is what runs.
- Outside bypassPermissions a person approves it through the approvals engine; the call waits
  for the decision, bounded by CALVIN_APPROVAL_PROMPT_WAIT_SECONDS as approval_prompt is (the
  approval's expiry is brought forward to the bound), and tells the outcome: posted, denied
  by whom, or expired (worded as expiry). The post is the worker's effect
  (tools.effects.post_thread_effect), and the call returns once it is applied, with the
  message's id and link, or says that it is not yet.
- 20 per runner; the text is refused when it holds a session secret.
"""

import asyncio
import re

from django.conf import settings
from django.db import transaction

from approvals.cards import ARGUMENT_BLOCKS_MAX, argument_blocks, duration, visible
from approvals.models import PendingApproval
from approvals.policy import approval_needed
from approvals.services import approval_expiry_bound
from calvin.chat.links import platform_thread_url
from calvin.chat.thread_refs import ThreadRefInvalid, thread_ref_parse
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.approval_prompts import approval_prompt_wait, approval_with_decider
from tools.services.approval_requests import approval_request
from tools.services.common import off_loop, refuse_secrets, secret_scanner_for, tool_call_record
from tools.services.threads import thread_arguments, thread_target_for

TOOL = "post_thread"
MIN_TEXT, MAX_TEXT = 1, 4_000
# How long the call waits for the worker to post once it may (the approval's own wait is apart).
APPLY_WAIT_SECONDS = 30
ZWSP = "\u200b"

_SLACK_BROADCAST = re.compile(r"<!(channel|here|everyone)(?:\|[^>]*)?>", re.IGNORECASE)
_SLACK_SUBTEAM = re.compile(r"<!subteam\^[^|>]*(?:\|([^>]*))?>", re.IGNORECASE)
# Typed mentions; an address such as ops@here.example is left alone.
_PLAIN = re.compile(r"(?<![\w.+-])@(channel|here|everyone)\b", re.IGNORECASE)

OWN_THREAD = (
    "post_thread posts into another thread, and that is this session's own thread: reply there normally"
    " (your answer, or post_card and send_file)"
)

S = PendingApproval.Status
DONE = (ToolCall.Status.APPLIED, ToolCall.Status.FAILED)


def mentions_neutralised(text: str) -> str:
    """Channel-wide mentions and user groups as plain text (see the module's docstring)."""

    def group(match) -> str:
        label = (match.group(1) or "user group").lstrip("@")
        return "@" + ZWSP + label

    text = _SLACK_SUBTEAM.sub(group, text)
    text = _SLACK_BROADCAST.sub(lambda m: "@" + ZWSP + m.group(1), text)
    return _PLAIN.sub(lambda m: "@" + ZWSP + m.group(1), text)


def attribution(session) -> str:
    """Names the owner and links the session's thread where its people read it (seed 000): a
    Slack session's Slack thread, a web session's page."""
    owner = " ".join(str(session.owner).split()) if session.owner else "(no owner)"
    return f"Posted for {owner} · {platform_thread_url(session.thread)}"


def _problems(*, url, channel, ts, text: str) -> list[str]:
    problems = []
    try:
        thread_ref_parse(url=url, channel=channel, ts=ts)
    except ThreadRefInvalid as exc:
        problems.append(str(exc))
    if not MIN_TEXT <= len(text) <= MAX_TEXT:
        problems.append(f"text: {MIN_TEXT} to {MAX_TEXT:,} characters (got {len(text):,})")
    elif not text.strip():
        problems.append("text: must not be blank")
    return problems


@transaction.atomic
def thread_post_ask(*, caller: Caller, url: str | None, channel: str | None, ts: str | None, text: str) -> dict:
    """Record the post: queued for the worker at once (bypassPermissions), or waiting for a
    person's approval. Returns what thread_post_wait needs."""
    problems = _problems(url=url, channel=channel, ts=ts, text=text)
    if problems:
        raise ToolRefused("invalid post: " + "; ".join(problems))
    _adapter, target, session = thread_target_for(caller=caller, url=url, channel=channel, ts=ts)
    if target.own:
        raise ToolRefused(OWN_THREAD)
    post = mentions_neutralised(f"{text}\n\n{attribution(session)}")
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the text", secrets=scanner, content=post)
    arguments = {**thread_arguments(url=url, channel=channel, ts=ts), "text": text}
    arguments |= {"target": target.as_dict(), "post": post}
    asked = {"approval_id": None, "target": target.as_dict()}
    if not approval_needed(source="calvin", tool=TOOL, permission_mode=caller.permission_mode):
        call = tool_call_record(caller=caller, tool=TOOL, arguments=arguments, payload={}, secrets=scanner)
        return {**asked, "tool_call_id": call.id}
    blocks = len(argument_blocks(TOOL, arguments))
    if blocks > ARGUMENT_BLOCKS_MAX:  # cannot happen within 4,000 characters; the card must show it all
        raise ToolRefused(
            f"text: shown on the approval card it takes {blocks} Slack blocks; at most {ARGUMENT_BLOCKS_MAX}"
        )
    approval = approval_request(
        caller=caller,
        tool=TOOL,
        arguments=arguments,
        summary=visible(f"post into {target.label}: {text}"),
        secrets=scanner,
        server=ToolCall.Server.CALVIN,
    )
    approval = approval_expiry_bound(approval=approval, seconds=settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS)
    return {
        **asked,
        "approval_id": approval.id,
        "tool_call_id": approval.tool_call_id,
        "expires_at": approval.expires_at,
    }


def _call_state(*, tool_call_id: int) -> dict | None:
    return ToolCall.objects.filter(id=tool_call_id).values("status", "platform_ids", "error").first()


def _settled(state: dict) -> bool:
    """Failed, or posted: a reply queued in a Slack channel's outbox is posted once Slack gave
    it a ts (the outbox copies it onto the call), so the agent never hears "posted" too early."""
    if state["status"] == ToolCall.Status.FAILED:
        return True
    ids = state["platform_ids"] or {}
    return state["status"] == ToolCall.Status.APPLIED and (not ids.get("slack_post_id") or bool(ids.get("slack_ts")))


def _posted_as(ids: dict) -> tuple[str, str]:
    """The message id and link the agent is given: a Slack reply's own ts and permalink."""
    if ids.get("slack_ts"):
        from calvin.chat.slack.threads import reply_permalink

        return ids["slack_ts"], reply_permalink(thread_url=ids["url"], ts=ids["slack_ts"])
    return str(ids["message_id"]), ids["url"]


async def _applied(tool_call_id: int, seconds: float) -> dict | None:
    """The call once applied or failed, or its state at the bound."""
    deadline = asyncio.get_running_loop().time() + seconds
    pause = 0.01
    while True:
        state = await off_loop(_call_state)(tool_call_id=tool_call_id)
        left = deadline - asyncio.get_running_loop().time()
        if state is None or _settled(state) or left <= 0:
            return state
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.25)


def _result(status: str, message: str, asked: dict, **extra) -> dict:
    return {
        "status": status,
        "message": message,
        "tool_call_id": asked["tool_call_id"],
        "approval_id": asked["approval_id"],
        **extra,
    }


def thread_post_decision(approval: PendingApproval | None, asked: dict) -> dict | None:
    """The answer when nobody approved (denied, expired, gone); None once approved."""
    label = asked["target"]["label"]
    if approval is None:
        return _result("gone", "The approval request is gone (its session was deleted); nothing was posted.", asked)
    if approval.status == S.DENIED:
        who = approval.decided_by or "someone"
        text = f"Denied by {who} (approval {approval.id}): nothing was posted into {label}."
        return _result("denied", text, asked, decided_by=str(who))
    if approval.status == S.EXPIRED:
        waited = duration(approval.expires_at - approval.requested_at)
        # Never worded as a denial: nobody said no, nobody answered.
        text = (
            f"Expired (approval {approval.id}): nobody decided within {waited}, so nothing was posted into"
            f" {label}. Ask again if it is still needed."
        )
        return _result("expired", text, asked)
    return None


async def thread_post_wait(asked: dict, *, client_gone=None) -> dict:
    """Wait for the decision (if asked) and the worker's post; the outcome, truthfully."""
    approved_by = ""
    if asked["approval_id"] is not None:
        # The engine's bounded wait (expiry at the bound, withdrawal when the agent goes away).
        waiting = {"approval_id": asked["approval_id"], "expires_at": asked["expires_at"], "tool_name": TOOL}
        await approval_prompt_wait(waiting, tool_input={}, client_gone=client_gone)
        approval = await off_loop(approval_with_decider)(approval_id=asked["approval_id"])
        answer = thread_post_decision(approval, asked)
        if answer is not None:
            return answer
        approved_by = f" Approved by {approval.decided_by or 'someone'}."
    state = await _applied(asked["tool_call_id"], APPLY_WAIT_SECONDS)
    label = asked["target"]["label"]
    if state is None:
        return _result("gone", "The call is gone (its session was deleted); nothing was posted.", asked)
    if state["status"] == ToolCall.Status.APPLIED and _settled(state):
        message_id, url = _posted_as(state["platform_ids"])
        text = f"Posted into {label} as message {message_id}: {url}.{approved_by}"
        return _result("posted", text, asked, message_id=message_id, url=url)
    if state["status"] == ToolCall.Status.FAILED:
        return _result("failed", f"Not posted into {label}: {state['error']}.{approved_by}", asked)
    text = (
        f"Not posted yet: the post into {label} is queued (call {asked['tool_call_id']}) and was not delivered"
        f" within {APPLY_WAIT_SECONDS} s.{approved_by} If it fails, a message in this thread says so."
    )
    return _result("queued", text, asked)
