"""Approval state changes: request, decide, apply's bookkeeping, expire, and the card.

The lifecycle (approvals/models.py): pending -> approved -> applied | failed,
pending -> denied, pending -> expired; each step a compare-and-swap, so a second click, a
stale card or a late decision changes nothing. The ToolCall it gates moves with it:
awaiting_approval -> pending (queued for the worker) | denied | expired. The agent learns
every outcome as a system message in its session; the card is edited in place.
"""

import logging
from datetime import timedelta
from typing import NoReturn

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from approvals.cards import approval_card, duration, title_of, when
from approvals.models import PendingApproval
from approvals.policy import approval_session_owner_decides
from calvin.chat import ChatPermanentError
from calvin.events import ApprovalChanged, ToolCallChanged, announce
from calvin.workspaces.models import Member, Workspace
from secrets_vault.services import session_text_redacted
from tools.models import ToolCall

log = logging.getLogger(__name__)

S = PendingApproval.Status
# Requests one session may have waiting at once: an agent cannot flood its thread with cards.
MAX_PENDING_PER_SESSION = 10
EXPIRE_BATCH = 500


class ApprovalRefused(Exception):
    """A decision that changes nothing; the text says why (not allowed, already decided, expired)."""


class ApprovedArgumentsChanged(ChatPermanentError):
    """The call's arguments are no longer those its card showed: nothing is applied."""


CHANGED = "its arguments changed after the card showed them, so nothing was applied"


def _changed(approval_id: int, *, card: str = "refresh") -> None:
    """Announce the approval's state as it is now; approvals/reactions.py posts or edits its card
    once this commits (a lost publish is not lost work: the sweep posts cards that are missing)."""
    row = (
        PendingApproval.objects.filter(id=approval_id)
        .values("session_id", "session__workspace_id", "session__thread_id", "tool_call_id", "status")
        .first()
    )
    if row is None:
        return
    announce(
        ApprovalChanged(
            workspace_id=row["session__workspace_id"],
            thread_id=row["session__thread_id"],
            session_id=row["session_id"],
            approval_id=approval_id,
            tool_call_id=row["tool_call_id"],
            status=row["status"],
            card=card,
        )
    )


def _card_refresh_later(approval_id: int) -> None:
    _changed(approval_id)


def _call_changed(approval: PendingApproval, status: str) -> None:
    """The gated call moved with its approval (tools/reactions.py queues an approved one's effect)."""
    announce(
        ToolCallChanged(
            workspace_id=approval.session.workspace_id,
            thread_id=approval.session.thread_id,
            session_id=approval.session_id,
            tool_call_id=approval.tool_call_id,
            tool=approval.kind,
            status=status,
        )
    )


# Answered to the waiting tool call itself: a system message too would queue an extra turn.
ANSWERED_IN_CALL = ("approval_prompt", "post_thread")


def _tell_agent(approval: PendingApproval, text: str) -> None:
    from sessions.services import inbox_post

    if approval.kind in ANSWERED_IN_CALL:
        return
    inbox_post(session=approval.session, text=text)


def _named(approval: PendingApproval) -> str:
    return f"{approval.kind} (approval {approval.id}: {approval.summary})"


# Request


def approvals_waiting_refusal(*, session_id: int) -> str | None:
    """Why the session may not ask for one more decision now (None: it may)."""
    waiting = PendingApproval.objects.filter(session_id=session_id, status=S.PENDING).count()
    if waiting >= MAX_PENDING_PER_SESSION:
        return (
            f"{waiting} requests of this session already wait for a decision (at most {MAX_PENDING_PER_SESSION});"
            " wait for them to be decided"
        )
    return None


@transaction.atomic
def approval_open(*, call: ToolCall, workspace_id: int, summary: str) -> PendingApproval:
    """Open the approval of a call recorded awaiting it (tools/services/approval_requests.py),
    with the exact arguments that will run once approved, and post its card once this commits."""
    timeout = Workspace.objects.values_list("approval_timeout", flat=True).get(id=workspace_id)
    approval = PendingApproval.objects.create(
        session_id=call.session_id,
        tool_call=call,
        kind=call.tool,
        summary=summary if len(summary) <= 300 else summary[:299] + "…",
        details=call.arguments,  # the same arguments the effect reads: what is approved is what runs
        expires_at=timezone.now() + timeout,
    )
    _changed(approval.id, card="post")
    return approval


def approval_expiry_bound(*, approval: PendingApproval, seconds: float) -> PendingApproval:
    """For a call that waits for its decision: the workspace's approval timeout, shortened to the
    wait, so the card and the call's answer say "expired" at the same moment. Run it in the
    request's transaction, before the card is posted (on commit), so the card shows it."""
    bound = approval.requested_at + timedelta(seconds=seconds)
    if approval.expires_at > bound:
        PendingApproval.objects.filter(id=approval.id).update(expires_at=bound)
        approval.expires_at = bound
    return approval


# Decide


def approval_may_decide(*, member, approval: PendingApproval) -> bool:
    """An owner or admin of the approval's workspace, or the person who started its session
    (Session.may_be_decided_by) unless it is an agent's change to itself that the workspace leaves
    to its owners and admins (approvals.policy.session_owner_decides)."""
    session = approval.session
    if not session.may_be_decided_by(member):
        return False
    return member.is_admin or approval_session_owner_decides(approval)


def approval_refusal(approval: PendingApproval) -> str:
    """What a person who may not decide `approval` is told."""
    if approval_session_owner_decides(approval):
        return "only the person who started this session or an owner or admin of its workspace can decide this"
    return (
        "only the workspace's owners and admins can decide an agent's changes to itself"
        " (install_packages, add_mcp_server, create_agent)"
    )


def approval_deciders(approval: PendingApproval) -> list[Member]:
    """The people approval_may_decide lets decide it: the workspace's owners and admins, and the
    person who started the session where they decide too (first, as the one most likely waiting)."""
    session = approval.session
    who = Q(role__in=(Member.Role.OWNER, Member.Role.ADMIN))
    if session.owner_id and approval_session_owner_decides(approval):
        who |= Q(id=session.owner_id)
    people = Member.objects.filter(who, workspace_id=session.workspace_id).select_related("user")
    return sorted(people, key=lambda m: (m.id != session.owner_id, m.id))


def _already(approval: PendingApproval) -> str:
    who = str(approval.decided_by) if approval.decided_by else "someone"
    status = approval.status
    if status == S.APPROVED:
        return f"already approved by {who}; it is being applied"
    if status == S.APPLIED:
        return f"already approved by {who} and applied"
    if status == S.FAILED:
        return f"already approved by {who}; applying it failed"
    if status == S.DENIED:
        return f"already denied by {who}"
    if status == S.EXPIRED:
        waited = duration(approval.expires_at - approval.requested_at)
        return f"expired: nobody decided within {waited}; nothing was changed"
    return "not decided: try again"


def approval_decide(*, approval_id: int, member, approve: bool, via: str) -> str:
    """A person's decision. Returns the text shown to them; raises ApprovalRefused when it
    changes nothing (not theirs to decide, already decided, expired)."""
    if via not in PendingApproval.Via.values:
        raise ValueError(f"unknown channel {via!r}")
    approval = PendingApproval.objects.select_related("session__workspace").filter(id=approval_id).first()
    if approval is None:
        raise ApprovalRefused(f"there is no approval {approval_id}")
    if not approval_may_decide(member=member, approval=approval):
        raise ApprovalRefused(approval_refusal(approval))
    with transaction.atomic():
        decision = approval_decision_take(approval, member=member, approve=approve, via=via)
        if decision is not None:
            return decision[1]
    approval_decision_lost(approval)


def approval_decision_take(approval: PendingApproval, *, member, approve: bool, via: str) -> tuple[bool, str] | None:
    """In the caller's transaction, for a person approval_may_decide lets decide: the
    compare-and-swap and what follows it. None when it changed nothing; else (whether the call
    goes on as the card showed it, the text shown to the person)."""
    target = S.APPROVED if approve else S.DENIED
    if not PendingApproval.transition(approval.id, source=S.PENDING, target=target, decided_by=member, decided_via=via):
        return None
    approval.refresh_from_db()
    _decision_audited(approval, member=member, approve=approve, via=via)
    if not _decided(approval, member=member, approve=approve):
        return False, f"Approved: {approval.summary}, but {CHANGED}. The agent is told."
    verb = "Approved" if approve else "Denied"
    return True, f"{verb}: {approval.summary}" + (". Applying it now." if approve else ". The agent is told.")


def approval_decision_lost(approval: PendingApproval) -> NoReturn:
    """A decision that changed nothing: someone decided first, or it expired (the sweep may not
    have run yet). The card pressed may be stale: render it again from the current state."""
    if not approval_expire(approval_id=approval.id):
        _changed(approval.id, card="stale")
    approval = PendingApproval.objects.select_related("decided_by").get(id=approval.id)
    raise ApprovalRefused(_already(approval))


def _decision_audited(approval: PendingApproval, *, member, approve: bool, via: str) -> None:
    from calvin.audit.services import audit_record

    # One event per decision, whichever channel it came through (web, Slack, the admin).
    audit_record(
        verb="approval.approve" if approve else "approval.deny",
        workspace=approval.session.workspace_id,
        actor=member,
        target=approval,
        changes={"status": (S.PENDING, S.APPROVED if approve else S.DENIED)},
        via=via,
    )


def _decided(approval: PendingApproval, *, member, approve: bool) -> bool:
    """The gated call follows the decision; False when an approved call's arguments are no
    longer what the card showed (it then fails, applying nothing)."""
    if approve:
        waiting = ToolCall.objects.filter(id=approval.tool_call_id, status=ToolCall.Status.AWAITING_APPROVAL)
        # Only the arguments the card showed go to the worker: what is approved is what runs.
        if waiting.filter(arguments=approval.details).update(status=ToolCall.Status.PENDING):
            _call_changed(approval, ToolCall.Status.PENDING)  # tools/reactions.py queues its effect
        elif waiting.update(status=ToolCall.Status.FAILED, error=CHANGED, finished_at=timezone.now()):
            _call_changed(approval, ToolCall.Status.FAILED)
            PendingApproval.transition(approval.id, source=S.APPROVED, target=S.FAILED)
            _tell_agent(approval, f"Your request {_named(approval)} was approved by {member}, but {CHANGED}.")
            _card_refresh_later(approval.id)
            return False
    else:
        if ToolCall.objects.filter(id=approval.tool_call_id, status=ToolCall.Status.AWAITING_APPROVAL).update(
            status=ToolCall.Status.DENIED, error=f"denied by {member}", finished_at=timezone.now()
        ):
            _call_changed(approval, ToolCall.Status.DENIED)
        _tell_agent(approval, f"Your request {_named(approval)} was denied by {member}. Nothing was changed.")
    _card_refresh_later(approval.id)
    return True


# A permission prompt's card's "Allow for this session" / "Allow always for this agent": the rule's scope.
ALLOW_BUTTONS = {"allow_session": "session", "allow_agent": "agent"}


def approval_decision_pressed(*, thread, member, target_id: int, value: str, via: str) -> str:
    """A press on an approval card's button (calvin/dashboard/actions.py)."""
    from calvin.presses import ActionRefused

    if value in ALLOW_BUTTONS:
        from approvals.rule_services import approval_allow_pressed

        # Slack's buttons carry no text: a Bash rule takes the command's leading words (rules.prefix_default).
        return approval_allow_pressed(thread=thread, member=member, target_id=target_id, value=value, via=via)
    if value not in ("approve", "deny"):
        raise ActionRefused("that is not one of the card's buttons")
    if not PendingApproval.objects.filter(id=target_id, session__thread_id=thread.id).exists():
        raise ActionRefused("there is no such approval in this thread")
    try:
        return approval_decide(approval_id=target_id, member=member, approve=value == "approve", via=via)
    except ApprovalRefused as exc:
        raise ActionRefused(str(exc)) from None


# Apply (called by tools.effects in the worker)


def approved_arguments(call: ToolCall) -> dict:
    """What an effect applies: the arguments a person approved (the card showed them), or the
    call's own when no approval gates it. A call whose arguments no longer match is refused."""
    try:
        approval = call.approval
    except PendingApproval.DoesNotExist:
        return call.arguments
    if approval.status != S.APPROVED:
        raise ApprovedArgumentsChanged(
            f"approval {approval.id} is {approval.status}, not approved: nothing was applied"
        )
    if call.arguments != approval.details:
        raise ApprovedArgumentsChanged(CHANGED)
    return approval.details


def approval_after_apply(*, tool_call_id: int, error: str | None) -> bool:
    """Called when a tool call's effect applied (error None) or failed, also after it applied
    (what it queued was finally refused). True when the call was an approved request: its
    approval then records the outcome and tells the agent."""
    approval = PendingApproval.objects.select_related("session", "decided_by").filter(tool_call_id=tool_call_id).first()
    if approval is None:
        return False
    target = S.APPLIED if error is None else S.FAILED
    sources = (S.APPROVED,) if error is None else (S.APPROVED, S.APPLIED)
    if any(PendingApproval.transition(approval.id, source=source, target=target) for source in sources):
        who = approval.decided_by or "someone"
        if error is None:
            outcome = ToolCall.objects.values_list("result", flat=True).get(id=tool_call_id) or {}
            done = outcome.get("outcome") if isinstance(outcome, dict) else None
            text = f"Your request {_named(approval)} was approved by {who} and applied." + (f" {done}" if done else "")
        else:
            text = f"Your request {_named(approval)} was approved by {who} but failed: {error}. Nothing was changed."
        _tell_agent(approval, text)
        _card_refresh_later(approval.id)
    return True


# Expire


@transaction.atomic
def approval_expire(*, approval_id: int, actor=None) -> bool:
    """pending -> expired once past expires_at; the agent is told it expired (never "denied").
    `actor`: the operator who expired it now (approval_expire_now); None for the sweep."""
    if not PendingApproval.transition(approval_id, source=S.PENDING, target=S.EXPIRED, decided_via="system"):
        return False
    approval = PendingApproval.objects.select_related("session").get(id=approval_id)
    waited = duration(approval.expires_at - approval.requested_at)
    if ToolCall.objects.filter(id=approval.tool_call_id, status=ToolCall.Status.AWAITING_APPROVAL).update(
        status=ToolCall.Status.EXPIRED, error=f"approval expired after {waited}", finished_at=timezone.now()
    ):
        _call_changed(approval, ToolCall.Status.EXPIRED)
    why = f"{actor} expired it after {waited}" if actor is not None else f"nobody decided within {waited}"
    _tell_agent(
        approval,
        f"Your request {_named(approval)} expired: {why}, so nothing was changed. Ask again if it is still needed.",
    )
    _card_refresh_later(approval.id)
    from calvin.audit.services import audit_record

    # One event whoever expired it: the sweep (the system) or an operator (approval_expire_now).
    audit_record(
        verb="approval.expire",
        workspace=approval.session.workspace_id,
        actor=actor,
        target=approval,
        changes={"status": (S.PENDING, S.EXPIRED)},
    )
    return True


@transaction.atomic
def approval_expire_now(*, approval_id: int, actor) -> str:
    """An operator ends a pending approval before its time: it expires as the sweep would
    expire it (the agent is told, the card edited), by `actor` (a Member or a superuser's
    User). Raises ApprovalRefused when it changes nothing."""
    from calvin.operators import OperatorRefused, operator_check

    approval = PendingApproval.objects.select_related("session").filter(id=approval_id).first()
    if approval is None:
        raise ApprovalRefused(f"there is no approval {approval_id}")
    try:
        operator_check(actor, approval.session.workspace_id)
    except OperatorRefused as exc:
        raise ApprovalRefused(str(exc)) from None
    now = timezone.now()
    # Brought forward only while still pending: a decision that won meanwhile stays.
    PendingApproval.objects.filter(id=approval.id, status=S.PENDING, expires_at__gt=now).update(expires_at=now)
    if not approval_expire(approval_id=approval.id, actor=actor):
        raise ApprovalRefused(_already(PendingApproval.objects.select_related("decided_by").get(id=approval.id)))
    return "expired now; the agent is told nothing was changed"


def approvals_sweep(*, now) -> dict:
    """Expire what nobody decided in time; post cards whose first post was lost."""
    due = PendingApproval.objects.filter(status=S.PENDING, expires_at__lte=now)
    expired = sum(approval_expire(approval_id=i) for i in due.values_list("id", flat=True)[:EXPIRE_BATCH])
    lost = now - timedelta(seconds=settings.CALVIN_LOST_PENDING_SECONDS)
    missing = PendingApproval.objects.filter(status=S.PENDING, card_platform_ids={}, requested_at__lt=lost)
    missing_ids = list(missing.values_list("id", flat=True)[:EXPIRE_BATCH])
    return {"expired": expired, "cards_missing": missing_ids}


# Remind


def _mention(member: Member) -> str:
    """A person named in a thread's text: Slack's `<@U…>` where they have a Slack id (Slack notifies
    them; the web channel shows their name), else @ and their name, escaped as mrkdwn text."""
    if member.slack_user_id:
        return f"<@{member.slack_user_id}>"
    return "@" + _mrkdwn_text(str(member))


def _mrkdwn_text(text: str) -> str:
    """Text that stays text in mrkdwn (Slack and the web channel): no link, mention or entity."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _reminder_text(approval: PendingApproval, *, deciders: list[Member], now) -> str:
    from calvin.chat.links import thread_url

    session = approval.session
    agent = f"agent {session.agent.name}" if session.agent else "the agent"
    link = thread_url(session.thread_id)
    card = approval.card_platform_ids.get("message_id")
    if isinstance(card, int):
        link += f"#message-{card}"
    who = ", ".join(_mention(m) for m in deciders)
    what = _mrkdwn_text(f"{agent} asks to {title_of(approval)} ({approval.summary})")
    waited = now - approval.requested_at
    if waited >= timedelta(minutes=1):  # whole minutes: "31 min", not "1862 s"
        waited = timedelta(minutes=waited // timedelta(minutes=1))
    return (
        f"Reminder: {who}: approval {approval.id} has waited {duration(waited)} for a decision:"
        f" {what}. Approve or deny it on <{link}|its card>; it expires {when(approval.expires_at)}."
    )


def _remind_bound() -> timedelta | None:
    minutes = settings.CALVIN_APPROVAL_REMIND_MINUTES
    return timedelta(minutes=minutes) if minutes > 0 else None


@transaction.atomic
def approval_remind(*, approval_id: int, now) -> bool:
    """Remind the people who may decide an approval still waiting past CALVIN_APPROVAL_REMIND_MINUTES:
    a notice in its thread naming them. Once: the conditional update that sets reminded_at claims
    it, so of two sweeps (or a retry) only the one that changed the row posts."""
    bound = _remind_bound()
    if bound is None:
        return False
    claimed = PendingApproval.objects.filter(
        id=approval_id,
        status=S.PENDING,
        expires_at__gt=now,
        requested_at__lte=now - bound,
        reminded_at__isnull=True,
    ).update(reminded_at=now)
    if claimed != 1:
        return False
    from sessions.services import system_notice_post

    approval = PendingApproval.objects.select_related("session__agent", "session__workspace").get(id=approval_id)
    deciders = approval_deciders(approval)
    system_notice_post(thread_id=approval.session.thread_id, text=_reminder_text(approval, deciders=deciders, now=now))
    return True


def approvals_remind(*, now) -> int:
    """Beat: remind of every approval that has waited too long and was not reminded yet."""
    bound = _remind_bound()
    if bound is None:
        return 0
    due = PendingApproval.objects.filter(
        status=S.PENDING, expires_at__gt=now, requested_at__lte=now - bound, reminded_at__isnull=True
    ).order_by("requested_at", "id")
    return sum(approval_remind(approval_id=i, now=now) for i in due.values_list("id", flat=True)[:EXPIRE_BATCH])


# The card


def _locked(approval_id: int) -> PendingApproval | None:
    return (
        PendingApproval.objects.select_for_update(of=("self",))
        .select_related("session__agent", "session__thread", "session__workspace", "decided_by", "tool_call")
        .filter(id=approval_id)
        .first()
    )


@transaction.atomic
def approval_card_post(*, approval_id: int) -> dict:
    """Post the card into the session's thread, once: the row lock and the stored ids make
    a retried or duplicated task a no-op."""
    from calvin.chat import chat_adapter_for

    approval = _locked(approval_id)
    if approval is None:  # deleted with its session meanwhile
        return {}
    if approval.card_platform_ids:
        return approval.card_platform_ids
    thread = approval.session.thread
    card = approval_card(approval)
    try:
        ids = chat_adapter_for(thread).post_card(
            thread=thread,
            items=card["items"],
            blocks=card["blocks"],
            fallback_text=card["text"],
            tool_call_id=None,
            author="system",  # Calvin asks, not the agent: people must not read it as the agent's words
        )
    except ChatPermanentError as exc:
        # Retrying will not help; people can still decide in the admin. Stored, so the sweep stops trying.
        log.warning("approval %s: its card cannot be posted: %s", approval.id, exc)
        error = session_text_redacted(
            session_id=approval.session_id, workspace_id=approval.session.workspace_id, text=str(exc)
        )
        ids = {"error": error[:500]}
    PendingApproval.objects.filter(id=approval.id).update(card_platform_ids=ids)
    return ids


@transaction.atomic
def approval_card_refresh(*, approval_id: int) -> bool:
    """Re-render the card from the approval's current state and edit it in place.
    False when there is no card yet (its post renders the current state anyway)."""
    from calvin.chat import chat_adapter_for
    from sessions.models import Message

    approval = _locked(approval_id)
    message_id = approval.card_platform_ids.get("message_id") if approval else None
    message = Message.objects.filter(id=message_id).first() if message_id else None
    if message is None:
        return False
    thread = approval.session.thread
    card = approval_card(approval)
    chat_adapter_for(thread).update_card(
        thread=thread, message=message, items=card["items"], blocks=card["blocks"], fallback_text=card["text"]
    )
    return True
