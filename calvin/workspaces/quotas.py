"""Per-workspace quotas: what is counted, when it is refused, and what the refusal says.

Days and months are UTC calendar days and months. Counts live in DailyUsage, one row per
workspace and day, taken with conditional UPDATEs (never read-modify-write), so concurrent
gateways and schedulers cannot overrun a quota. Tool calls per day are counted in the
tool-call hot path itself (tools/limits.py); turns and agent time here, for the scheduler.

A workspace without a Quota row (made without workspace_create) is held to the model's
defaults rather than being unlimited or refused everything.
"""

import math
from datetime import UTC, date, datetime, timedelta

from django.db import transaction
from django.db.models import DecimalField, F, IntegerField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan

from calvin.workspaces.models import DailyUsage, Quota

PREFIX = "workspace quota reached: "


def quota_default(field: str) -> int:
    return Quota._meta.get_field(field).default


def quota_limit(*, workspace_id: int, field: str) -> int:
    """One limit of the workspace's quota (the model's default without a Quota row)."""
    value = Quota.objects.filter(workspace_id=workspace_id).values_list(field, flat=True).first()
    return quota_default(field) if value is None else value


def _limit_expression(workspace_id: int, field: str):
    """The limit as SQL inside the statement that counts, so counting needs no earlier read."""
    limit = Quota.objects.filter(workspace_id=workspace_id).values(field)[:1]
    return Coalesce(Subquery(limit), Value(quota_default(field)), output_field=IntegerField())


def utc_now(now: datetime | None = None) -> datetime:
    return (now or datetime.now(UTC)).astimezone(UTC)


def utc_today(now: datetime | None = None) -> date:
    return utc_now(now).date()


def month_bounds(day: date) -> tuple[date, date]:
    """The first day of `day`'s month and of the next one."""
    first = day.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return first, following


def _duration(seconds: float) -> str:
    # Rounded up: "in 0 min" would read as already reset.
    minutes = max(1, math.ceil(seconds / 60))
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def per_day_refusal(*, limit: int, what: str, now: datetime | None = None) -> str:
    """E.g. "workspace quota reached: 2000 turns per day; it resets at 00:00 UTC (in 3 h 12 min)"."""
    now = utc_now(now)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    left = _duration((midnight - now).total_seconds())
    return f"{PREFIX}{limit} {what} per day; it resets at 00:00 UTC (in {left})"


def per_month_refusal(*, limit: int, what: str, now: datetime | None = None) -> str:
    """E.g. "workspace quota reached: 30000 agent minutes per month; it resets on 1 December 00:00 UTC"."""
    _, following = month_bounds(utc_today(now))
    return f"{PREFIX}{limit} {what} per month; it resets on {following.day} {following:%B} 00:00 UTC"


def month_agent_seconds_expression(*, workspace, day: date) -> Coalesce:
    """The agent seconds of `day`'s month as SQL: inside the statement that counts a turn,
    or per row of a list (the admin's) with `workspace` an OuterRef."""
    first, following = month_bounds(day)
    month = (
        DailyUsage.objects.filter(workspace_id=workspace, day__gte=first, day__lt=following)
        .values("workspace_id")
        .annotate(total=Sum("agent_seconds"))
        .values("total")
    )
    return Coalesce(Subquery(month), Value(0), output_field=IntegerField())


def quota_month_agent_seconds(*, workspace_id: int, now: datetime | None = None) -> int:
    first, following = month_bounds(utc_today(now))
    total = DailyUsage.objects.filter(workspace_id=workspace_id, day__gte=first, day__lt=following).aggregate(
        total=Sum("agent_seconds")
    )["total"]
    return total or 0


def usage_row_ensure(*, workspace_id: int, day: date) -> None:
    """The day's row, made on the day's first count. ignore_conflicts: a concurrent first
    count may make it at the same moment, and the loser must not fail (or abort the
    transaction it runs in)."""
    DailyUsage.objects.bulk_create([DailyUsage(workspace_id=workspace_id, day=day)], ignore_conflicts=True)


def _count_today(counter: QuerySet, *, field: str, workspace_id: int, day: date) -> bool:
    """Add one to `field` of the day's row through `counter` (a conditional UPDATE that checks
    the quota); the row is made on a miss and the UPDATE tried once more. True when counted."""
    if counter.update(**{field: F(field) + 1}) == 1:
        return True
    usage_row_ensure(workspace_id=workspace_id, day=day)
    return counter.update(**{field: F(field) + 1}) == 1


def _turn_refusal(workspace_id: int, now: datetime) -> str:
    """Why a turn was not counted; read after the fact, off the path of the turns that run."""
    minutes = quota_limit(workspace_id=workspace_id, field="agent_minutes_per_month")
    # The month's quota first: it resets last, so it is the one that says when turns run again.
    if quota_month_agent_seconds(workspace_id=workspace_id, now=now) >= minutes * 60:
        return per_month_refusal(limit=minutes, what="agent minutes", now=now)
    return per_day_refusal(limit=quota_limit(workspace_id=workspace_id, field="turns_per_day"), what="turns", now=now)


@transaction.atomic
def quota_turn_take(*, workspace_id: int, now: datetime | None = None) -> str | None:
    """Count one turn for today, or say which quota refuses it: None when it was counted.

    One conditional UPDATE checks both the day's turns and the month's agent time, so two
    schedulers cannot both take the last turn. The day's row is made on a miss, then the
    UPDATE is tried once more (as the per-runner counts in tools/limits.py do).
    """
    now = utc_now(now)
    today = now.date()
    counter = DailyUsage.objects.filter(
        LessThan(F("turns"), _limit_expression(workspace_id, "turns_per_day")),
        LessThan(
            month_agent_seconds_expression(workspace=workspace_id, day=today),
            _limit_expression(workspace_id, "agent_minutes_per_month") * 60,
        ),
        workspace_id=workspace_id,
        day=today,
    )
    if _count_today(counter, field="turns", workspace_id=workspace_id, day=today):
        return None
    return _turn_refusal(workspace_id, now)


@transaction.atomic
def quota_agent_seconds_add(*, workspace_id: int, seconds: float, now: datetime | None = None) -> None:
    """Add the time an agent ran to the day it finished on (a turn across midnight counts
    whole on its last day). Never refused: the time was used; the next turn is what stops."""
    whole = int(seconds + 0.5)  # rounded, so many short turns are not all rounded up
    if whole <= 0:
        return
    today = utc_today(now)
    row = DailyUsage.objects.filter(workspace_id=workspace_id, day=today)
    if row.update(agent_seconds=F("agent_seconds") + whole) == 1:
        return
    usage_row_ensure(workspace_id=workspace_id, day=today)
    row.update(agent_seconds=F("agent_seconds") + whole)


def quota_concurrent_sessions(*, workspace_id: int) -> int:
    """How many of the workspace's sessions may have their agent running at once."""
    return quota_limit(workspace_id=workspace_id, field="concurrent_sessions")


def quota_concurrent_refusal(*, workspace_id: int, running: int) -> str | None:
    """None when one more session may start beside the `running` ones, else why not."""
    limit = quota_concurrent_sessions(workspace_id=workspace_id)
    if running < limit:
        return None
    return f"{PREFIX}{limit} sessions at once; it frees when one of them finishes"


@transaction.atomic
def quota_tool_call_take(*, workspace_id: int, now: datetime | None = None) -> str | None:
    """Count one tool call for today, or say why not: the ORM form of what tools/limits.py
    does inside its one statement on PostgreSQL (used by the embedded SQLite)."""
    today = utc_today(now)
    counter = DailyUsage.objects.filter(
        LessThan(F("tool_calls"), _limit_expression(workspace_id, "tool_calls_per_day")),
        workspace_id=workspace_id,
        day=today,
    )
    if _count_today(counter, field="tool_calls", workspace_id=workspace_id, day=today):
        return None
    return tool_calls_refusal(workspace_id=workspace_id, now=now)


def tool_calls_refusal(*, workspace_id: int, now: datetime | None = None) -> str:
    """The message of a tool call refused by the day's tool-call quota (read when refused)."""
    limit = quota_limit(workspace_id=workspace_id, field="tool_calls_per_day")
    return per_day_refusal(limit=limit, what="tool calls", now=now)


def quota_usage(*, workspace_id: int, now: datetime | None = None) -> dict:
    """Today's and this month's use next to the limits, for the admin."""
    now = utc_now(now)
    today = now.date()
    quota = Quota.objects.filter(workspace_id=workspace_id).first() or Quota(workspace_id=workspace_id)
    day = DailyUsage.objects.filter(workspace_id=workspace_id, day=today).first()
    month_seconds = quota_month_agent_seconds(workspace_id=workspace_id, now=now)
    return {
        "day": today,
        "turns": day.turns if day else 0,
        "turns_per_day": quota.turns_per_day,
        "tool_calls": day.tool_calls if day else 0,
        "tool_calls_per_day": quota.tool_calls_per_day,
        "month": month_bounds(today)[0],
        "agent_seconds": month_seconds,
        "agent_minutes": round(month_seconds / 60, 1),
        "agent_minutes_per_month": quota.agent_minutes_per_month,
        "concurrent_sessions": quota.concurrent_sessions,
    }


def quotas_with_usage(*, queryset: QuerySet | None = None, now: datetime | None = None) -> QuerySet:
    """Quotas with today's turns and tool calls and the month's agent seconds beside them
    (today_turns, today_tool_calls, month_agent_seconds): one query for a whole list."""
    today = utc_today(now)

    def today_count(field: str) -> Coalesce:
        row = DailyUsage.objects.filter(workspace_id=OuterRef("workspace_id"), day=today).values(field)[:1]
        return Coalesce(Subquery(row), Value(0), output_field=IntegerField())

    first, following = month_bounds(today)
    month_cost = (
        DailyUsage.objects.filter(workspace_id=OuterRef("workspace_id"), day__gte=first, day__lt=following)
        .values("workspace_id")
        .annotate(total=Sum("cost_usd"))
        .values("total")
    )
    money = DecimalField(max_digits=14, decimal_places=6)
    return (Quota.objects.all() if queryset is None else queryset).annotate(
        today_turns=today_count("turns"),
        today_tool_calls=today_count("tool_calls"),
        month_agent_seconds=month_agent_seconds_expression(workspace=OuterRef("workspace_id"), day=today),
        month_cost_usd=Coalesce(Subquery(month_cost), Value(0), output_field=money),
    )
