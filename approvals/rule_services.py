"""Allow rules (approvals.models.ApprovalRule): made from a permission prompt's card, applied
before a prompt is asked, revoked by an operator. The patterns are approvals/rules.py's.

- "Allow for this session" / "Allow always for this agent" approve the prompt and store the
  rule in one transaction, by a person approval_may_decide lets decide it (audited
  approval_rule.create, next to the decision's approval.approve).
- A later prompt a live rule matches is answered allow at once: the rule is claimed by a
  conditional update (a rule revoked meanwhile claims nothing, and the prompt is asked), and the
  prompt is recorded as an approval decided by the rule, whose card names it.
- Revoking is a conditional update too (approval_rule.revoke); a revoked rule never matches.
"""

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from approvals.cards import HIDDEN_SECRET, PERMISSION_PROMPT, rule_named, when
from approvals.models import ApprovalRule, PendingApproval
from approvals.rules import (
    BASH,
    PrefixRefused,
    command_matches,
    command_of,
    command_refusal,
    prefix_check,
    prefix_default,
)
from approvals.services import (
    ALLOW_BUTTONS,
    ApprovalRefused,
    _changed,
    approval_decision_lost,
    approval_decision_take,
    approval_may_decide,
    approval_refusal,
)

S = PendingApproval.Status
Scope = ApprovalRule.Scope
# Live rules one session, or one agent, may have: each prompt reads them all.
MAX_LIVE_RULES = 100


def _live(*, workspace_id: int, session_id: int, agent_id: int | None):
    """The live rules that apply in a session: its own, and its agent's."""
    here = Q(scope=Scope.SESSION, session_id=session_id)
    if agent_id is not None:
        here |= Q(scope=Scope.AGENT, agent_id=agent_id)
    return ApprovalRule.objects.filter(here, workspace_id=workspace_id, revoked_at__isnull=True)


def approval_rules_matching(
    *, workspace_id: int, session_id: int, agent_id: int | None, tool_name: str, tool_input
) -> list[ApprovalRule]:
    """The live rules that allow this tool use in this session, the narrowest first (the
    session's before the agent's, the longest prefix first)."""
    rules = _live(workspace_id=workspace_id, session_id=session_id, agent_id=agent_id).filter(tool_name=tool_name)
    if tool_name == BASH:
        command = command_of(tool_input)
        matching = [r for r in rules if command_matches(r.command_prefix, command)]
    else:
        matching = [r for r in rules if not r.command_prefix]
    return sorted(matching, key=lambda r: (r.scope != Scope.SESSION, -len(r.command_prefix), r.id))


def approval_rule_claim(
    *, workspace_id: int, session_id: int, agent_id: int | None, tool_name: str, tool_input
) -> ApprovalRule | None:
    """The rule that answers this tool use, counted as having matched; None: a person is asked.
    Run it in the prompt's transaction: the count rolls back with it."""
    now = timezone.now()
    for rule in approval_rules_matching(
        workspace_id=workspace_id, session_id=session_id, agent_id=agent_id, tool_name=tool_name, tool_input=tool_input
    ):
        # Conditional: a rule revoked since it was read claims nothing (and the next one is tried).
        claimed = ApprovalRule.objects.filter(id=rule.id, revoked_at__isnull=True).update(
            match_count=F("match_count") + 1, last_matched_at=now
        )
        if claimed:
            return ApprovalRule.objects.select_related("created_by__user").get(id=rule.id)
    return None


@transaction.atomic
def approval_allowed_by_rule(*, call, rule: ApprovalRule, summary: str) -> PendingApproval:
    """Record a permission prompt a rule answered: an approval decided by the rule (nobody was
    asked), audited, and its card posted once this commits so the thread shows what ran and why."""
    from calvin.audit.services import audit_record

    now = timezone.now()
    approval = PendingApproval.objects.create(
        session_id=call.session_id,
        tool_call=call,
        kind=call.tool,
        summary=summary if len(summary) <= 300 else summary[:299] + "…",
        details=call.arguments,
        status=S.APPLIED,
        expires_at=now,
        decided_via=PendingApproval.Via.RULE,
        decided_at=now,
        finished_at=now,
        allowed_by_rule=rule,
    )
    audit_record(
        verb="approval.approve",
        workspace=rule.workspace_id,
        actor=None,
        target=approval,
        changes={"status": ("", S.APPLIED), "allowed_by_rule": (None, f"{rule} #{rule.id}")},
        via=PendingApproval.Via.RULE,
    )
    _changed(approval.id, card="post")
    return approval


def _prefix_for(approval: PendingApproval, prefix: str | None) -> str:
    """The Bash rule's prefix: the one the person chose, or the command's leading words; it must
    be allowed and match this very command (the rule covers what is approved now)."""
    command = command_of(approval.details.get("input"))
    unmatchable = command_refusal(command)
    if unmatchable:
        raise ApprovalRefused(f"no rule can allow this command ({unmatchable}): approve or deny it")
    chosen = prefix_default(command) if prefix is None else prefix
    try:
        chosen = prefix_check(chosen)
    except PrefixRefused as refused:
        raise ApprovalRefused(f"no rule was made and nothing was decided: {refused}") from None
    if HIDDEN_SECRET in chosen:
        raise ApprovalRefused("the prefix holds a hidden secret value; choose the words before it")
    if not command_matches(chosen, command):
        raise ApprovalRefused(
            f"no rule was made and nothing was decided: this command does not start with '{chosen}' followed by"
            " nothing or more words with nothing chained after them (; & | ` $( ${ > < or a line break), so such a"
            " rule would not allow it"
        )
    return chosen


def _refuse_secrets(approval: PendingApproval, prefix: str) -> None:
    from secrets_vault.services import session_text_redacted

    session = approval.session
    if session_text_redacted(session_id=session.id, workspace_id=session.workspace_id, text=prefix) != prefix:
        raise ApprovalRefused("the prefix holds a secret's value (or a token), and rules are shown on cards")


def approval_allow_with_rule(*, approval_id: int, member, scope: str, via: str, prefix: str | None = None) -> str:
    """A permission prompt card's "Allow for this session" / "Allow always for this agent":
    approve it and store the rule, in one transaction. `prefix`: the Bash command's leading words
    the person chose (None: rules.prefix_default's). Raises ApprovalRefused when nothing changed."""
    from calvin.audit.services import audit_record

    if via not in PendingApproval.Via.values or via == PendingApproval.Via.RULE:
        raise ValueError(f"unknown channel {via!r}")
    if scope not in Scope.values:
        raise ApprovalRefused(f"a rule is for {' or '.join(Scope.labels)}")
    approval = PendingApproval.objects.select_related("session__workspace").filter(id=approval_id).first()
    if approval is None:
        raise ApprovalRefused(f"there is no approval {approval_id}")
    if not approval_may_decide(member=member, approval=approval):
        raise ApprovalRefused(approval_refusal(approval))
    if approval.kind != PERMISSION_PROMPT:
        raise ApprovalRefused("only Claude Code's permission prompts can be allowed by a rule; approve or deny this")
    session = approval.session
    if scope == Scope.AGENT and session.agent_id is None:
        raise ApprovalRefused("this session has no agent: allow it for this session instead")
    tool_name = str(approval.details.get("tool_name", ""))
    command_prefix = _prefix_for(approval, prefix) if tool_name == BASH else ""
    if command_prefix:
        _refuse_secrets(approval, command_prefix)
    target = {"session_id": session.id} if scope == Scope.SESSION else {"agent_id": session.agent_id}
    live = ApprovalRule.objects.filter(
        workspace_id=session.workspace_id, scope=scope, revoked_at__isnull=True, **target
    )
    if live.count() >= MAX_LIVE_RULES:
        raise ApprovalRefused(
            f"{Scope(scope).label} already has {MAX_LIVE_RULES} live rules, the most it may have; revoke some in the"
            " admin (Approval rules) first"
        )
    with transaction.atomic():
        decision = approval_decision_take(approval, member=member, approve=True, via=via)
        if decision is not None:
            goes_on, text = decision
            if not goes_on:
                return text  # its arguments changed after the card showed them: nothing runs, no rule
            same = live.filter(tool_name=tool_name, command_prefix=command_prefix).first()
            if same is not None:
                return f"{text} It was allowed already: {rule_named(same)}."
            rule = ApprovalRule.objects.create(
                workspace_id=session.workspace_id,
                scope=scope,
                session=session if scope == Scope.SESSION else None,
                agent_id=session.agent_id,  # a session rule too: the agent's page lists it
                tool_name=tool_name,
                command_prefix=command_prefix,
                created_by=member,
                made_from=approval,
            )
            audit_record(
                verb="approval_rule.create",
                workspace=session.workspace_id,
                actor=member,
                target=rule,
                changes={
                    "scope": (None, scope),
                    "tool_name": (None, tool_name),
                    "command_prefix": (None, command_prefix),
                },
                via=via,
            )
            _changed(approval.id)  # the card names the rule it made
            what = f"Bash commands starting with '{command_prefix}'" if command_prefix else f"every use of {tool_name}"
            where = "in this session" if scope == Scope.SESSION else f"in every session of agent {session.agent}"
            return f"{text} From now on {what} {where} run without asking (rule {rule.id}; revoke it in the admin)."
    approval_decision_lost(approval)


def approval_allow_pressed(*, thread, member, target_id: int, value: str, via: str, prefix: str | None = None) -> str:
    """A press on a permission prompt card's allow buttons (the web channel's form, Slack's buttons)."""
    from calvin.presses import ActionRefused

    scope = ALLOW_BUTTONS.get(value)
    if scope is None:
        raise ActionRefused("that is not one of the card's buttons")
    if member is None:
        raise ActionRefused("only members of this workspace can press this")
    if not PendingApproval.objects.filter(id=target_id, session__thread_id=thread.id).exists():
        raise ActionRefused("there is no such approval in this thread")
    try:
        return approval_allow_with_rule(approval_id=target_id, member=member, scope=scope, via=via, prefix=prefix)
    except ApprovalRefused as exc:
        raise ActionRefused(str(exc)) from None


@transaction.atomic
def approval_rule_revoke(*, rule_id: int, actor) -> str:
    """An operator (a workspace's owner or admin, or a superuser) revokes a rule: from now on it
    matches nothing. Raises ApprovalRefused when it changes nothing."""
    from calvin.audit.services import audit_record
    from calvin.operators import OperatorRefused, operator_check, operator_user

    rule = ApprovalRule.objects.select_related("revoked_by").filter(id=rule_id).first()
    if rule is None:
        raise ApprovalRefused(f"there is no rule {rule_id}")
    try:
        operator_check(actor, rule.workspace_id)
    except OperatorRefused as exc:
        raise ApprovalRefused(str(exc)) from None
    now = timezone.now()
    user = operator_user(actor)
    if not ApprovalRule.objects.filter(id=rule.id, revoked_at__isnull=True).update(revoked_at=now, revoked_by=user):
        rule.refresh_from_db()
        who = rule.revoked_by.get_username() if rule.revoked_by else "someone"
        raise ApprovalRefused(f"it was revoked already, {when(rule.revoked_at)} by {who}")
    audit_record(
        verb="approval_rule.revoke",
        workspace=rule.workspace_id,
        actor=actor,
        target=rule,
        changes={"revoked_at": (None, now.isoformat())},
    )
    return f"revoked {rule}: prompts it allowed are asked again"
