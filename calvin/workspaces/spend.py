"""Spend caps: the month's spend of a workspace, what a turn may spend, and what a refusal says.

Spend is what providers report (Claude Code's `total_cost_usd`), counted on the UTC day it is
reported (DailyUsage.cost_usd; a running turn's spend so far counts as soon as it is reported).

How concurrent turns cannot overshoot the monthly cap by more than one turn's cost
--------------------------------------------------------------------------------------
Admission (`spend_admission`) runs in the scheduler's claim while it holds the workspace's
Quota row (select_for_update): claims for one workspace are serialised, so every admission sees
the turns admitted before it. A turn is admitted only while

    spent this month + reserved by the running turns < cap

and reserves a budget of its own, `unreserved / free session slots` (never more than what the
per-session cap leaves), which goes to Claude Code as `--max-budget-usd`: the CLI stops the turn
itself once it has spent that. So, however many turns run at once, their budgets together never
exceed what the cap leaves; a Claude Code turn overshoots its budget by at most the model call
during which it crossed it. A provider that cannot hold a budget (a `command` or `script`
agent, which report their cost, if at all, when they end) is admitted only while no other such
turn of the workspace runs: at most one turn's cost can land past what was reserved. Once the
month's spend reaches the cap nothing more is admitted until the month resets.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_DOWN, Decimal

from django.db.models import Sum

from calvin.workspaces.models import DailyUsage, Quota
from calvin.workspaces.quotas import PREFIX, month_bounds, utc_now, utc_today

CENT = Decimal("0.01")
MICRO = Decimal("0.000001")
THRESHOLDS = (80, 100)  # percent of the monthly cap at which the owners are told


def usd(value) -> str:
    """$12.34 (rounded to cents, as people read a bill)."""
    return f"${Decimal(value or 0).quantize(CENT):,}"


def spend_caps(*, workspace_id: int) -> tuple[Decimal | None, Decimal | None]:
    """(monthly cap, per-session cap); None where there is none."""
    row = Quota.objects.filter(workspace_id=workspace_id).values_list("monthly_spend_cap_usd", "session_spend_cap_usd")
    return row.first() or (None, None)


def spend_month_usd(*, workspace_id: int, now: datetime | None = None) -> Decimal:
    """What the workspace's turns reported spending this UTC month."""
    first, following = month_bounds(utc_today(now))
    total = DailyUsage.objects.filter(workspace_id=workspace_id, day__gte=first, day__lt=following).aggregate(
        total=Sum("cost_usd")
    )["total"]
    return total or Decimal(0)


def monthly_cap_refusal(*, cap: Decimal, spent: Decimal, now: datetime | None = None) -> str:
    """E.g. "workspace quota reached: the monthly spend cap of $100.00 ($100.31 spent this month);
    it resets on 1 January 00:00 UTC" (the wording of quotas.per_month_refusal)."""
    _, following = month_bounds(utc_today(now))
    return (
        f"{PREFIX}the monthly spend cap of {usd(cap)} ({usd(spent)} spent this month); "
        f"it resets on {following.day} {following:%B} 00:00 UTC"
    )


def session_cap_refusal(*, cap: Decimal, spent: Decimal) -> str:
    return (
        f"{PREFIX}the per-session spend cap of {usd(cap)} ({usd(spent)} spent in this session); "
        "this session runs no more turns unless a workspace owner or admin raises the cap"
    )


RESERVED_WAIT = "the rest of the month's spend cap is reserved by the turns running now; it starts when one finishes"
UNBUDGETED_WAIT = (
    "under a spend cap, one agent at a time whose provider cannot stop at a budget runs; "
    "it starts when the other finishes"
)


@dataclass(frozen=True)
class Admission:
    refusal: str = ""  # the turn is not run (the cap is reached)
    wait: str = ""  # the turn waits (the cap's rest is reserved)
    budget: Decimal | None = None  # what it may spend (None: no cap applies)


def spend_admission(
    *,
    workspace_id: int,
    session_spent: Decimal,
    reserved: Decimal,
    free_slots: int,
    budgeted: bool,
    unbudgeted_running: int,
    now: datetime | None = None,
) -> Admission:
    """Whether one more turn may start, and its budget. Call it holding the workspace's Quota
    row (the scheduler's claim does), with `reserved` what running turns may still spend,
    `free_slots` the sessions that may still start beside them, `budgeted` whether the turn's
    provider stops itself at a budget, `unbudgeted_running` how many running turns' do not."""
    monthly, per_session = spend_caps(workspace_id=workspace_id)
    budget = None
    if per_session is not None:
        if session_spent >= per_session:
            return Admission(refusal=session_cap_refusal(cap=per_session, spent=session_spent))
        budget = per_session - session_spent
    if monthly is not None:
        spent = spend_month_usd(workspace_id=workspace_id, now=utc_now(now))
        if spent >= monthly:
            return Admission(refusal=monthly_cap_refusal(cap=monthly, spent=spent, now=now))
        unreserved = monthly - spent - reserved
        if unreserved <= 0:
            return Admission(wait=RESERVED_WAIT)
        if not budgeted and unbudgeted_running:
            return Admission(wait=UNBUDGETED_WAIT)
        share = (unreserved / max(1, free_slots)).quantize(MICRO, rounding=ROUND_DOWN)
        budget = share if budget is None else min(budget, share)
    if budget is not None and budget <= 0:
        budget = MICRO  # a sliver left: the turn may start and stops at once
    return Admission(budget=budget)


def spend_thresholds_crossed(*, workspace_id: int, now: datetime | None = None) -> list[tuple[int, Decimal, Decimal]]:
    """The thresholds of the monthly cap the month's spend has reached: [(percent, cap, spent)]."""
    monthly, _ = spend_caps(workspace_id=workspace_id)
    if not monthly:
        return []
    spent = spend_month_usd(workspace_id=workspace_id, now=now)
    return [(percent, monthly, spent) for percent in THRESHOLDS if spent * 100 >= monthly * percent]
