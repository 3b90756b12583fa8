"""An approval's card, rendered from its current state: every argument in full, who asked,
until when, and either the Approve / Deny buttons with who may decide, or the outcome.

Rendering is a pure function of the approval (and its workspace's setting of who decides an
agent's changes to itself), so posting it again or editing it in place after any change shows
the same thing. Nothing is truncated or hidden: strings are shown
quoted with invisible and control characters escaped, so what a person approves is
exactly what runs. Slack gets plain_text blocks (no mrkdwn: an argument cannot format,
link or mention), split to stay within Slack's limits.
"""

import json

from approvals.models import ApprovalRule, PendingApproval
from approvals.policy import approval_session_owner_decides
from approvals.rules import BASH, command_of, command_refusal, prefix_default, prefix_refusal
from tools.card_spec.blockkit import card_blocks
from tools.card_spec.text import clock, duration, quoted, visible, when  # noqa: F401  (their old home)

S = PendingApproval.Status

VAULT_PREFIX = "vault:"
SECTION_TEXT = 3000  # Slack: a section's text
FIELD_TEXT = 2000  # Slack: one field of a section
HEADER_TEXT = 150  # Slack: a header's text
CONTEXT_TEXT = 2000  # Slack: a context element's text
CARD_BLOCKS = 50  # Slack: blocks in one message
# What a pending card takes besides the arguments: header, the asking line, who-asked fields,
# two dividers, the buttons and their note. The arguments get the rest of Slack's 50.
ARGUMENT_BLOCKS_MAX = CARD_BLOCKS - 7
# A permission prompt's card has its allow buttons too: their note and their row.
PROMPT_ARGUMENT_BLOCKS_MAX = ARGUMENT_BLOCKS_MAX - 2

# A Claude Code permission prompt (tools/services/approval_prompts.py): the tool it asks about is
# in the details, so the title names it.
PERMISSION_PROMPT = "approval_prompt"
# What stands on a permission prompt's card where its input held a secret's value.
HIDDEN_SECRET = "[secret value hidden]"

TITLES = {
    "create_agent": "create an agent",
    "install_packages": "install packages",
    "add_mcp_server": "add an MCP server",
    "post_thread": "post into another thread",
}


def env_value_shown(value: str) -> str:
    if value.startswith(VAULT_PREFIX):
        name = value[len(VAULT_PREFIX) :]
        return f"the vault secret {quoted(name)} (a reference: its value is not shown here)"
    return quoted(value)


def _numbered(label: str, values: list[str]) -> str:
    if not values:
        return f"{label}: none"
    lines = [f"{i}. {quoted(v)}" for i, v in enumerate(values, 1)]
    return f"{label} ({len(values)}):\n" + "\n".join(lines)


def _create_agent(details: dict) -> list[dict]:
    instructions = details.get("instructions") or ""
    body = visible(instructions, keep_newlines=True) if instructions else "(none)"
    return [
        {"kind": "fields", "items": [{"label": "Agent name (also its destination name)", "value": details["name"]}]},
        {"kind": "text", "text": "Standing instructions:\n" + body},
    ]


def _install_packages(details: dict) -> list[dict]:
    reason = details.get("reason")
    items = [
        {"kind": "text", "text": _numbered("apt packages", details.get("apt") or [])},
        {"kind": "text", "text": _numbered("npm packages (global)", details.get("npm") or [])},
    ]
    items.append({"kind": "text", "text": "Reason: " + (visible(reason, keep_newlines=True) if reason else "(none)")})
    return items


def _add_mcp_server(details: dict) -> list[dict]:
    env = details.get("env") or {}
    env_lines = [f"{visible(key)} = {env_value_shown(value)}" for key, value in env.items()]
    env_text = f"Environment ({len(env)}):\n" + "\n".join(env_lines) if env else "Environment: none"
    return [
        {"kind": "fields", "items": [{"label": "Server name", "value": details["name"]}]},
        {"kind": "text", "text": "Command: " + quoted(details["command"])},
        {"kind": "text", "text": _numbered("Arguments", details.get("args") or [])},
        {"kind": "text", "text": env_text},
    ]


def _any(details: dict) -> list[dict]:
    """A kind without its own layout: every argument as JSON."""
    text = visible(json.dumps(details, ensure_ascii=False, indent=2), keep_newlines=True)
    return [{"kind": "text", "text": "Arguments:\n" + text}]


def _approval_prompt(details: dict) -> list[dict]:
    """The tool Claude Code wants to use and its input in full, as JSON (what runs once allowed)."""
    fields = [{"label": "Tool", "value": quoted(details["tool_name"])}]
    if details.get("tool_use_id"):
        fields.append({"label": "Tool use id", "value": quoted(details["tool_use_id"])})
    text = visible(json.dumps(details["input"], ensure_ascii=False, indent=2), keep_newlines=True)
    items = [{"kind": "fields", "items": fields}, {"kind": "text", "text": "Input:\n" + text}]
    if details.get("secrets_hidden"):
        items.append(
            {
                "kind": "text",
                "text": f"The input holds the value of a secret of this session, shown here as {HIDDEN_SECRET}. "
                "If allowed, the tool runs with the real value.",
            }
        )
    return items


def _post_thread(details: dict) -> list[dict]:
    """Where it goes and, in full, the text that will be posted (mentions already made plain text,
    the "Posted for" line appended): what the worker posts once approved."""
    target = details["target"]
    post = details["post"]
    items = [
        {"kind": "fields", "items": [{"label": "Thread", "value": f"{visible(target['label'])}\n{target['url']}"}]},
        {"kind": "text", "text": "Text that will be posted, exactly:\n" + visible(post, keep_newlines=True)},
    ]
    if visible(post, keep_newlines=True) != post:
        items.append(
            {
                "kind": "text",
                "text": "Invisible characters are shown as \\u escapes. Channel-wide mentions and user groups were"
                " made plain text with a zero-width space (\\u200b) after the @, so nobody is notified.",
            }
        )
    return items


ARGUMENTS = {
    "create_agent": _create_agent,
    "install_packages": _install_packages,
    "add_mcp_server": _add_mcp_server,
    PERMISSION_PROMPT: _approval_prompt,
    "post_thread": _post_thread,
}


def title_of(approval: PendingApproval) -> str:
    """What the card says the agent asks to do."""
    if approval.kind == PERMISSION_PROMPT:
        return "use " + visible(str(approval.details.get("tool_name", "a tool")))
    return TITLES.get(approval.kind, approval.kind)


def rule_named(rule: ApprovalRule) -> str:
    """How cards and answers name a rule: the rule 'Bash: npm test' (this agent), made by @ada."""
    made_by = f"@{rule.created_by}" if rule.created_by else "someone no longer in the workspace"
    revoked = f" (revoked {clock(rule.revoked_at)})" if rule.revoked_at else ""
    return f"the rule '{rule.label}' ({rule.get_scope_display()}), made by {made_by}{revoked}"


def _rule_made(approval: PendingApproval) -> str:
    """' · made the rule …' when approving it also made an allow rule."""
    if approval.kind != PERMISSION_PROMPT or approval.pk is None:
        return ""
    rule = approval.rules_made.select_related("created_by__user").order_by("id").first()
    return f" · and made {rule_named(rule)}" if rule else ""


def outcome(approval: PendingApproval) -> str | None:
    """The card's note once decided; None while it waits."""
    who = str(approval.decided_by) if approval.decided_by else "someone"
    status = approval.status
    if approval.decided_via == PendingApproval.Via.RULE:
        rule = approval.allowed_by_rule
        named = rule_named(rule) if rule else "a rule since deleted"
        return f"Allowed by {named} · {clock(approval.decided_at)}"
    if status == S.APPROVED:
        return f"Approved by {who} · applying" + _rule_made(approval)
    if status == S.APPLIED:
        return f"Approved by {who} · applied {clock(approval.finished_at)}" + _rule_made(approval)
    if status == S.FAILED:
        error = approval.tool_call.error if approval.tool_call else ""
        return f"Approved by {who} · failed: {error or 'unknown error'}"
    if status == S.DENIED:
        return f"Denied by {who}"
    if status == S.EXPIRED:
        return f"Expired: nobody decided within {duration(approval.expires_at - approval.requested_at)}"
    return None


def who_decides(approval: PendingApproval) -> str:
    """The pending card's note: who may decide (approvals.services.approval_may_decide is the rule)."""
    if approval_session_owner_decides(approval):
        return "Only the person who started this session or a workspace owner or admin may decide."
    return "Only the workspace's owners and admins may decide."


def _allow_rule(approval: PendingApproval) -> dict:
    """A pending permission prompt's allow buttons: approve it and make a rule for the rest of
    this session, or for every session of its agent. For Bash the rule takes a command prefix: the
    web channel's form lets the person edit the leading words offered; Slack's buttons take them
    as offered. A command no rule could match offers no buttons, only why."""
    details = approval.details
    tool = str(details.get("tool_name", ""))
    buttons = [{"label": "Allow for this session", "value": "allow_session"}]
    if approval.session.agent_id:
        buttons.append({"label": "Allow always for this agent", "value": "allow_agent"})
    item = {"kind": "allow_rule", "action": "approval", "target_id": approval.id, "tool": tool, "items": buttons}
    if tool != BASH:
        text = f"Allow… approves this and makes a rule: every later use of {visible(tool)} runs without asking."
        return {**item, "text": text, "slack_text": text}
    command = command_of(details.get("input"))
    unmatchable = command_refusal(command)
    if unmatchable:
        return {"kind": "note", "text": f"No rule can allow this command ({unmatchable}): approve or deny it."}
    prefix = prefix_default(command)
    refused = prefix_refusal(prefix)
    text = (
        "Allow… approves this command and makes a rule: later commands that start with these words (whole words,"
        " with nothing chained after them by ; & | > < or $( ) run without asking. A shell or interpreter as a"
        " whole (bash, sh, python -c, node -e) cannot be allowed."
    )
    if refused:
        offered = f" for '{visible(prefix)}'" if prefix else ""
        text += f" The words offered cannot be allowed: {refused}."
        slack_text = f"No rule from Slack{offered}: {refused}. Choose other words on the web channel."
    else:
        slack_text = (
            f"Allow… approves this command and makes a rule: later Bash commands that start with '{visible(prefix)}'"
            " (whole words, nothing chained after them) run without asking. Other words: on the web channel."
        )
    return {**item, "prefix": prefix, "prefix_refused": refused or "", "text": text, "slack_text": slack_text}


def card_items(approval: PendingApproval) -> list[dict]:
    session = approval.session
    agent = session.agent.name if session.agent else "(no agent)"
    title = title_of(approval)
    by_rule = approval.decided_via == PendingApproval.Via.RULE
    state = "needed" if approval.status == S.PENDING else "request"
    facts = [
        {"label": "Asked by", "value": f"agent {agent} · session {session.id}"},
        {"label": "Asked at", "value": when(approval.requested_at)},
        # Answered as it was asked: it never waited, so it never expired.
        *([] if by_rule else [{"label": "Expires", "value": when(approval.expires_at)}]),
        {"label": "Approval", "value": f"#{approval.id} ({approval.kind})"},
    ]
    items = [
        {"kind": "header", "text": f"Allowed by a rule: {title}" if by_rule else f"Approval {state}: {title}"},
        {"kind": "text", "text": f"Agent {agent} asks to {title}."},
        {"kind": "fields", "items": facts},
        {"kind": "divider"},
        *ARGUMENTS.get(approval.kind, _any)(approval.details),
        {"kind": "divider"},
    ]
    note = outcome(approval)
    if note is None:
        items.append(
            {
                "kind": "actions",
                "action": "approval",
                "target_id": approval.id,
                "items": [
                    {"label": "Approve", "value": "approve", "style": "primary"},
                    {"label": "Deny", "value": "deny", "style": "danger"},
                ],
            }
        )
        if approval.kind == PERMISSION_PROMPT:
            items.append(_allow_rule(approval))
        items.append({"kind": "note", "text": who_decides(approval)})
    else:
        items.append({"kind": "note", "text": note})
    return items


def _plain(text: str) -> dict:
    return {"type": "plain_text", "text": text, "emoji": False}


def chunks(text: str, size: int) -> list[str]:
    """The text in pieces of at most `size` characters, cut at line ends where it can be."""
    pieces, current = [], ""
    for line in text.split("\n"):
        while len(line) > size:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(line[:size])
            line = line[size:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > size:
            pieces.append(current)
            candidate = line
        current = candidate
    pieces.append(current)
    return [p if p.strip() else "-" for p in pieces]


def card_slack_blocks(items: list[dict]) -> list[dict]:
    blocks: list[dict] = []
    for item in items:
        kind = item["kind"]
        if kind == "header":
            blocks.append({"type": "header", "text": _plain(item["text"][:HEADER_TEXT])})
        elif kind == "text":
            blocks.extend({"type": "section", "text": _plain(piece)} for piece in chunks(item["text"], SECTION_TEXT))
        elif kind == "fields":
            fields = [
                _plain(piece) for f in item["items"] for piece in chunks(f"{f['label']}\n{f['value']}", FIELD_TEXT)
            ]
            blocks.extend({"type": "section", "fields": fields[i : i + 10]} for i in range(0, len(fields), 10))
        elif kind == "note":
            blocks.extend(
                {"type": "context", "elements": [_plain(piece)]} for piece in chunks(item["text"], CONTEXT_TEXT)
            )
        elif kind == "allow_rule":
            blocks.extend(_allow_rule_blocks(item))
        else:  # divider, actions: no text of the agent's in them
            blocks.extend(card_blocks([item]))
    return blocks


def _allow_rule_blocks(item: dict) -> list[dict]:
    """The allow buttons on Slack: what they make, then the buttons, numbered after Approve and
    Deny (Slack's buttons hold no text field, so a Bash rule takes the words offered)."""
    note = [{"type": "context", "elements": [_plain(piece)]} for piece in chunks(item["slack_text"], CONTEXT_TEXT)]
    if item.get("prefix_refused"):
        return note[:1]
    elements = [
        {
            "type": "button",
            "text": _plain(b["label"]),
            "value": b["value"],
            "action_id": f"{item['action']}:{item['target_id']}:{i}",
        }
        for i, b in enumerate(item["items"], start=2)
    ]
    return [*note[:1], {"type": "actions", "elements": elements}]


def argument_blocks(kind: str, details: dict) -> list[dict]:
    """The Slack blocks a request's arguments take on its card (a tool checks they fit before it asks)."""
    return card_slack_blocks(ARGUMENTS.get(kind, _any)(details))


def approval_card(approval: PendingApproval) -> dict:
    """{items, blocks, text}: the web rendering, Slack's, and Slack's notification text."""
    items = card_items(approval)
    note = outcome(approval)
    title = title_of(approval)
    text = f"Approval needed: {title}" if note is None else f"{title}: {note}"
    return {"items": items, "blocks": card_slack_blocks(items), "text": text[:300]}
