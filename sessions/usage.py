"""What turns used: the host's report checked, recorded on the turn and the day, and added up.

A host reports usage in turn.finished (and a script agent its spend so far mid-turn). The
host is not trusted with the numbers: each is checked here. Tokens are non-negative whole
numbers; the cost is a finite, non-negative number. A value that is none of these (a string,
NaN, a negative number, a bool) is refused: logged, and recorded as not reported (tokens 0,
cost empty), never as a credit. A value past a sane bound is clamped to it and logged, so a huge
report still counts hugely against the caps instead of failing the turn's end.
"""

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from calvin.events import UsageRecorded, announce
from calvin.workspaces.models import DailyUsage
from calvin.workspaces.quotas import month_bounds, usage_row_ensure, utc_today
from sessions.models import Session, Turn

log = logging.getLogger(__name__)

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
MAX_TOKENS = 10**12  # per turn; far beyond any model's context, well inside the column
MAX_COST = Decimal("999999.999999")  # the column's bound (12 digits, 6 decimals)


@dataclass
class Usage:
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: Decimal | None = None
    problems: list[str] = field(default_factory=list)


def _number(value) -> int | float | None:
    """A JSON number that is finite (an int of any size is; a float may be NaN or infinite)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def usage_clean(raw) -> Usage:
    """The usage a host reported, checked value by value (see the module's docstring)."""
    usage = Usage()
    if raw is None:
        return usage
    if not isinstance(raw, dict):
        usage.problems.append(f"usage is not an object ({type(raw).__name__})")
        return usage
    for name in TOKEN_FIELDS:
        if name not in raw:
            continue
        value = _number(raw[name])
        if value is None or value < 0 or value != int(value):
            usage.problems.append(f"{name} refused: {str(raw[name])[:40]!r} is not a non-negative whole number")
            continue
        if value > MAX_TOKENS:
            usage.problems.append(f"{name} clamped: {value:.0f} is past {MAX_TOKENS}")
            value = MAX_TOKENS
        usage.tokens[name] = int(value)
    if "cost_usd" in raw:
        value = _number(raw["cost_usd"])
        if value is None or value < 0:
            usage.problems.append(f"cost_usd refused: {str(raw['cost_usd'])[:40]!r} is not a non-negative number")
        elif value > MAX_COST:
            usage.problems.append(f"cost_usd clamped: {str(value)[:40]} is past {MAX_COST}")
            usage.cost_usd = MAX_COST
        else:
            usage.cost_usd = Decimal(repr(value)).quantize(Decimal("0.000001"))
    return usage


def _logged(usage: Usage, turn_id: int, host_id: int | None) -> Usage:
    for problem in usage.problems:
        log.warning("turn %s: host %s reported bad usage: %s", turn_id, host_id, problem)
    return usage


def _spend_add(*, workspace_id: int, cost: Decimal) -> None:
    """The day's spend, added with an UPDATE (never read-modify-write)."""
    if cost <= 0:
        return
    today = utc_today()
    row = DailyUsage.objects.filter(workspace_id=workspace_id, day=today)
    if row.update(cost_usd=F("cost_usd") + cost) == 1:
        return
    usage_row_ensure(workspace_id=workspace_id, day=today)
    row.update(cost_usd=F("cost_usd") + cost)


def _cost_raise(turn: Turn, cost: Decimal | None) -> Decimal:
    """Set the turn's cost to what was reported (a total so far: it only grows) and count the
    growth on today's spend; returns the growth."""
    if cost is None:
        return Decimal(0)
    before = turn.cost_usd or Decimal(0)
    if turn.cost_usd is not None and cost <= before:
        return Decimal(0)
    Turn.objects.filter(id=turn.id).update(cost_usd=cost)
    turn.cost_usd = cost
    grown = cost - before
    _spend_add(workspace_id=turn.session.workspace_id, cost=grown)
    return grown


@transaction.atomic
def turn_usage_record(*, turns: list[Turn], raw, seconds: float, host_id: int | None = None) -> Usage:
    """A batch's end: its agent seconds and reported usage go on its first turn (the one the
    host ran; the others came along), the cost on the day's spend. Called with the batch's rows
    held (turn_finish's select_for_update). Announces UsageRecorded."""
    batch = min(turns, key=lambda t: t.id)
    usage = _logged(usage_clean(raw), batch.id, host_id)
    fields = {"agent_seconds": max(0, int(seconds + 0.5)), **usage.tokens}
    Turn.objects.filter(id=batch.id).update(**fields)
    _cost_raise(batch, usage.cost_usd)
    session = batch.session
    _audited(batch, fields)
    announce(
        UsageRecorded(
            workspace_id=session.workspace_id,
            thread_id=session.thread_id,
            session_id=session.id,
            turn_id=batch.id,
            cost_usd=float(batch.cost_usd or 0),
            extra={"agent_seconds": fields["agent_seconds"], **usage.tokens},
        )
    )
    return usage


def _audited(turn: Turn, fields: dict) -> None:
    """The turn's usage in the audit log, so the audit export carries every turn's spend."""
    from calvin.audit.services import audit_record

    changes = {name: (None, value) for name, value in fields.items() if value}
    changes["cost_usd"] = (None, None if turn.cost_usd is None else str(turn.cost_usd))
    audit_record(verb="turn.usage", workspace=turn.session.workspace_id, target=turn, changes=changes, via="system")


@transaction.atomic
def turn_usage_report(*, host_id: int, turn_id: int, raw) -> bool:
    """A running turn's spend so far (a total): counted at once, and a session that reached
    its per-session cap is stopped through Stop's own path."""
    turn = (
        Turn.objects.select_for_update()
        .filter(batch_id=turn_id, host_id=host_id, status=Turn.Status.RUNNING, id=turn_id)
        .select_related("session")
        .first()
    )
    if turn is None:
        return False
    usage = _logged(usage_clean(raw), turn.id, host_id)
    if usage.tokens:
        Turn.objects.filter(id=turn.id).update(**usage.tokens)
    _cost_raise(turn, usage.cost_usd)
    session = turn.session
    announce(
        UsageRecorded(
            workspace_id=session.workspace_id,
            thread_id=session.thread_id,
            session_id=session.id,
            turn_id=turn.id,
            cost_usd=float(turn.cost_usd or 0),
            extra={"running": True, **usage.tokens},
        )
    )
    session_stop_if_over_cap(session=session)
    return True


def session_stop_if_over_cap(*, session: Session) -> bool:
    """Stop the session's running turn when its spend reached the per-session cap."""
    from calvin.workspaces.spend import spend_caps, usd

    _, cap = spend_caps(workspace_id=session.workspace_id)
    if cap is None or session_spent_usd(session_id=session.id) < cap:
        return False
    if not Turn.objects.filter(session_id=session.id, status=Turn.Status.RUNNING).exists():
        return False
    from sessions.turns import session_stop

    session_stop(session_id=session.id, via=f"the per-session spend cap of {usd(cap)}")
    return True


# Selectors.


def session_spent_usd(*, session_id: int) -> Decimal:
    total = Turn.objects.filter(session_id=session_id).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal(0)


def usage_totals(turns: QuerySet) -> dict:
    """Turns, agent seconds, tokens and cost of `turns`; `cost_usd` None when none reported a cost."""
    totals = turns.aggregate(
        turns=Count("id", filter=Q(batch_id=F("id"))),
        agent_seconds=Coalesce(Sum("agent_seconds"), 0),
        input_tokens=Coalesce(Sum("input_tokens"), 0),
        output_tokens=Coalesce(Sum("output_tokens"), 0),
        cache_read_tokens=Coalesce(Sum("cache_read_tokens"), 0),
        cache_creation_tokens=Coalesce(Sum("cache_creation_tokens"), 0),
        cost_usd=Sum("cost_usd"),
    )
    totals["agent_minutes"] = round(totals["agent_seconds"] / 60, 1)
    totals["tokens"] = sum(totals[name] for name in TOKEN_FIELDS)
    return totals


def _this_month(turns: QuerySet, now: datetime | None) -> QuerySet:
    """Turns of this UTC month: by when they ended, a running one by when it started."""
    first, _ = month_bounds(utc_today(now))
    return turns.annotate(at=Coalesce("finished_at", "started_at", "created_at")).filter(at__date__gte=first)


def usage_of(turns: QuerySet, *, now: datetime | None = None) -> dict:
    """{"month": totals, "all": totals} of a scope's turns."""
    return {"month": usage_totals(_this_month(turns, now)), "all": usage_totals(turns)}


def session_usage(*, session_id: int, now: datetime | None = None) -> dict:
    return usage_of(Turn.objects.filter(session_id=session_id), now=now)


def agent_usage(*, agent_id: int, now: datetime | None = None) -> dict:
    return usage_of(Turn.objects.filter(session__agent_id=agent_id), now=now)


def person_usage(*, member_id: int, now: datetime | None = None) -> dict:
    """The turns of the sessions a person (a workspace Member) started."""
    return usage_of(Turn.objects.filter(session__owner_id=member_id), now=now)


def people_usage_this_month(*, workspace_id: int, now: datetime | None = None) -> dict[int, dict]:
    """{member id: this month's turns, agent minutes and cost} of the sessions each person of the
    workspace started, in one grouped query (people without turns are absent)."""
    turns = _this_month(Turn.objects.filter(session__workspace_id=workspace_id), now)
    rows = turns.values("session__owner_id").annotate(
        turns=Count("id", filter=Q(batch_id=F("id"))), seconds=Coalesce(Sum("agent_seconds"), 0), cost=Sum("cost_usd")
    )
    return {
        row["session__owner_id"]: {
            "turns": row["turns"],
            "agent_minutes": round(row["seconds"] / 60, 1),
            "cost_usd": row["cost"],
        }
        for row in rows
        if row["session__owner_id"] is not None
    }


def workspace_usage(*, workspace_id: int, now: datetime | None = None) -> dict:
    return usage_of(Turn.objects.filter(session__workspace_id=workspace_id), now=now)


def thread_usage_context(session: Session) -> dict:
    """What templates/chat/_usage.html shows: the session's use, its caps and the month's spend
    of its workspace (the same for every reader of the thread)."""
    from calvin.workspaces.spend import spend_caps, spend_month_usd

    monthly, per_session = spend_caps(workspace_id=session.workspace_id)
    return {
        "session": usage_totals(Turn.objects.filter(session_id=session.id)),
        "session_cap": per_session,
        "monthly_cap": monthly,
        "month_spent": spend_month_usd(workspace_id=session.workspace_id) if monthly is not None else None,
    }
