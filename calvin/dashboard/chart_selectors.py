"""The dashboard's charts as data: one workspace, one period, aggregated in the database.

Each selector returns `series` for calvin.dashboard.svg_charts: [(name, [(x_label, value), ...])]
with every bucket of the period present (zero where nothing happened), so the x axis reads as
time. GROUP BY runs in the database on PostgreSQL and SQLite alike (Django's Trunc); approval
latency's percentiles are percentile_cont on PostgreSQL and are computed here from the day's
latencies on SQLite (the embedded `up`), which has no such aggregate.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, Func, Sum
from django.db.models.functions import Trunc
from django.utils import timezone

from approvals.models import PendingApproval
from sessions.models import Turn
from tools.models import ToolCall

MAX_TOOLS = 8  # the busiest tools by name; the rest share "other"


@dataclass(frozen=True)
class Period:
    key: str
    words: str
    span: timedelta
    bucket: str  # "hour" or "day"


PERIODS = {
    "24h": Period("24h", "24 h", timedelta(hours=24), "hour"),
    "7d": Period("7d", "7 d", timedelta(days=7), "day"),
    "30d": Period("30d", "30 d", timedelta(days=30), "day"),
}


def period_from(value: str | None, default: str = "7d") -> Period:
    """The period a picker asked for; anything else is the default (a bad link is no error)."""
    return PERIODS.get(value or "", PERIODS[default])


def buckets(period: Period, now: datetime | None = None) -> list[datetime]:
    """The period's bucket starts, oldest first, the current (partial) hour or day last."""
    now = (now or timezone.now()).astimezone(UTC)
    if period.bucket == "hour":
        last, step = now.replace(minute=0, second=0, microsecond=0), timedelta(hours=1)
    else:
        last, step = now.replace(hour=0, minute=0, second=0, microsecond=0), timedelta(days=1)
    count = round(period.span / step)
    return [last - step * i for i in range(count - 1, -1, -1)]


def bucket_label(start: datetime, period: Period) -> str:
    return f"{start:%H:00}" if period.bucket == "hour" else f"{start:%m-%d}"


def _bucketed(period: Period, now, field: str):
    """The buckets, the period's bounds as a filter on `field`, and the bucket expression."""
    starts = buckets(period, now)
    end = starts[-1] + (timedelta(hours=1) if period.bucket == "hour" else timedelta(days=1))
    return starts, {f"{field}__gte": starts[0], f"{field}__lt": end}, Trunc(field, period.bucket, tzinfo=UTC)


def _as_key(value) -> datetime:
    """A bucket from the database as an aware UTC datetime (SQLite may hand back a naive one)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _series(starts, period, values: dict, *, scale=lambda v: v) -> list[tuple[str, float]]:
    """Every bucket, zero where nothing happened; none at all when nothing happened in the period
    (the chart then says "no data" rather than drawing a flat zero)."""
    if not values:
        return []
    return [(bucket_label(s, period), scale(values.get(s, 0) or 0)) for s in starts]


def tool_calls_by_tool(workspace, period: Period, *, now=None):
    """Tool calls per hour (24 h) or per day, one series per tool."""
    starts, within, bucket = _bucketed(period, now, "created_at")
    rows = (
        ToolCall.objects.filter(session__workspace=workspace, **within)
        .annotate(bucket=bucket)
        .values("bucket", "tool")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[str, dict] = defaultdict(dict)
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row["tool"]][_as_key(row["bucket"])] = row["n"]
        totals[row["tool"]] += row["n"]
    ranked = sorted(totals, key=lambda tool: (-totals[tool], tool))
    shown, rest = ranked[:MAX_TOOLS], ranked[MAX_TOOLS:]
    series = [(tool, _series(starts, period, counts[tool])) for tool in shown]
    if rest:
        other: dict = defaultdict(int)
        for tool in rest:
            for start, n in counts[tool].items():
                other[start] += n
        series.append(("other", _series(starts, period, other)))
    return series


class _EpochSeconds(Func):
    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()


class _PercentileCont(Aggregate):
    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _percentile(values: list[float], fraction: float) -> float:
    """percentile_cont's interpolation, for databases without it."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def approval_latency(workspace, period: Period, *, now=None):
    """p50 and p90 of the time from an approval's request to a person's decision, per bucket, in
    seconds (expired ones are no decision; the system's are not a person's)."""
    starts, within, bucket = _bucketed(period, now, "decided_at")
    decided = PendingApproval.objects.filter(session__workspace=workspace, decided_by__isnull=False, **within).exclude(
        status=PendingApproval.Status.EXPIRED
    )
    p50: dict = {}
    p90: dict = {}
    if connection.vendor == "postgresql":
        waited = _EpochSeconds(F("decided_at") - F("requested_at"))
        rows = (
            decided.annotate(bucket=bucket)
            .values("bucket")
            .annotate(p50=_PercentileCont(waited, fraction=0.5), p90=_PercentileCont(waited, fraction=0.9))
            .order_by()
        )
        for row in rows:
            p50[_as_key(row["bucket"])], p90[_as_key(row["bucket"])] = row["p50"], row["p90"]
    else:
        waits: dict = defaultdict(list)
        for row in decided.annotate(bucket=bucket).values("bucket", "requested_at", "decided_at").order_by():
            waits[_as_key(row["bucket"])].append((row["decided_at"] - row["requested_at"]).total_seconds())
        for key, values in waits.items():
            p50[key], p90[key] = _percentile(values, 0.5), _percentile(values, 0.9)
    # No decision in a bucket is a gap, not a latency of zero.
    return [
        ("p50", [(bucket_label(s, period), p50.get(s)) for s in starts]),
        ("p90", [(bucket_label(s, period), p90.get(s)) for s in starts]),
    ]


def latency_unit(series) -> tuple[str, float]:
    """Seconds, minutes or hours, whichever reads best for the largest value."""
    top = max((v for _n, points in series for _l, v in points if v is not None), default=0)
    if top >= 7200:
        return "h", 3600.0
    if top >= 120:
        return "min", 60.0
    return "s", 1.0


def agent_minutes(workspace, period: Period, *, now=None):
    """Minutes agents ran, by the hour or day their turns finished in."""
    starts, within, bucket = _bucketed(period, now, "finished_at")
    rows = (
        Turn.objects.filter(session__workspace=workspace, **within)
        .annotate(bucket=bucket)
        .values("bucket")
        .annotate(seconds=Sum("agent_seconds"))
        .order_by()
    )
    seconds = {_as_key(row["bucket"]): row["seconds"] for row in rows}
    return [("agent minutes", _series(starts, period, seconds, scale=lambda v: round(v / 60, 1)))]


def spend(workspace, period: Period, *, now=None):
    """What finished turns cost (as their providers reported it), by hour or day, in USD."""
    starts, within, bucket = _bucketed(period, now, "finished_at")
    rows = (
        Turn.objects.filter(session__workspace=workspace, cost_usd__isnull=False, **within)
        .annotate(bucket=bucket)
        .values("bucket")
        .annotate(usd=Sum("cost_usd"))
        .order_by()
    )
    usd = {_as_key(row["bucket"]): row["usd"] for row in rows}
    return [("spend", _series(starts, period, usd, scale=lambda v: round(float(v), 4)))]


def turns_per_agent(workspace, period: Period, *, now=None):
    """Turns started in the period, per agent (sessions without one: "no agent"), busiest first."""
    _starts, within, _bucket = _bucketed(period, now, "created_at")
    rows = (
        Turn.objects.filter(session__workspace=workspace, **within)
        .values("session__agent__name")
        .annotate(n=Count("id"))
        .order_by("-n", "session__agent__name")
    )
    return [("turns", [(row["session__agent__name"] or "no agent", row["n"]) for row in rows])]
