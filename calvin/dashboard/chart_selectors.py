"""The dashboard's charts as data: one workspace, one period, aggregated in the database.

Each selector returns `series` for calvin.dashboard.svg_charts: [(name, [(x_label, value), ...])]
with every bucket of the period present (zero where nothing happened), so the x axis reads as
time. GROUP BY runs in the database on PostgreSQL and SQLite alike (Django's Trunc); approval
latency's percentiles are percentile_cont on PostgreSQL and are computed here from the day's
latencies on SQLite (the embedded `up`), which has no such aggregate. Tool calls, the table that
grows to millions, are grouped per hour and each settled hour's counts kept in the cache.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.cache import cache
from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, Func, Sum
from django.db.models.functions import Trunc
from django.utils import timezone

from approvals.models import PendingApproval
from sessions.models import Turn
from tools.models import ToolCall

MAX_TOOLS = 8  # the busiest tools by name; the rest share "other"
HOUR, DAY = timedelta(hours=1), timedelta(days=1)
# An hour is settled (its count kept) this long after it ended: a call's row carries the time it
# was made, and its transaction commits a moment later.
SETTLE = timedelta(minutes=5)
CACHE_SECONDS = 35 * 24 * 3600


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


def _grouped_hours(queryset, field: str, group: str, **sums) -> dict[datetime, dict[str, float]]:
    """{hour: {group value: number}} in one GROUP BY: a count per `group`, or with `sums`
    ({name: aggregate}) each sum under its name."""
    rows = queryset.annotate(bucket=Trunc(field, "hour", tzinfo=UTC)).order_by()
    hours: dict[datetime, dict[str, float]] = defaultdict(dict)
    if sums:
        for row in rows.values("bucket").annotate(**sums):
            hours[_as_key(row["bucket"])] = {name: float(row[name] or 0) for name in sums}
    else:
        for row in rows.values("bucket", group).annotate(n=Count("id")):
            hours[_as_key(row["bucket"])][row[group] or ""] = row["n"]
    return hours


def _hour_key(metric: str, workspace, hour: datetime) -> str:
    # The workspace's creation time too: a database made again (tests, a restore) reuses ids.
    return f"charts:v1:{metric}:{workspace.id}:{workspace.created_at.timestamp():.0f}:{hour:%Y%m%d%H}"


def _floor(moment: datetime, step: timedelta) -> datetime:
    moment = moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if step == DAY else moment


def settled_hours(
    metric: str, workspace, grouped, first: datetime, end: datetime, *, now=None, step: timedelta = HOUR
) -> dict:
    """{hour: {key: number}} from hour `first` to `end`, with `grouped(start, end)` the GROUP BY
    (or per day, with step=DAY, for what cannot be summed from hours, such as percentiles).

    A million rows take longer to group than a page may wait (bench/charts.py), and an hour that
    ended no longer changes: each settled hour is grouped once and kept in the cache (Redis when
    configured), so a view groups only the hours no one has seen yet and the last one or two.
    """
    now = (now or timezone.now()).astimezone(UTC)
    settled = min(end, _floor(now - SETTLE, step))
    hours = []
    hour = first
    while hour < settled:
        hours.append(hour)
        hour += step
    metric = metric if step == HOUR else f"{metric}-daily"
    keys = {_hour_key(metric, workspace, h): h for h in hours}
    counts = {keys[key]: value for key, value in cache.get_many(list(keys)).items()}
    missing = [h for h in hours if h not in counts]
    if missing:
        found = grouped(missing[0], missing[-1] + step)
        fresh = {h: found.get(h, {}) for h in missing}
        cache.set_many({_hour_key(metric, workspace, h): value for h, value in fresh.items()}, CACHE_SECONDS)
        counts |= fresh
    if max(first, settled) < end:
        counts |= grouped(max(first, settled), end)
    return counts


def _per_bucket(period: Period, hours: dict) -> dict[str, dict[datetime, float]]:
    """{key: {bucket start: number}}: hours summed into the period's buckets."""
    out: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for hour, values in hours.items():
        start = hour if period.bucket == "hour" else hour.replace(hour=0)
        for key, n in values.items():
            out[key][start] += n
    return out


def _tool_call_hours(workspace, period, now):
    starts, within, _bucket = _bucketed(period, now, "created_at")

    def grouped(start, end):
        calls = ToolCall.objects.filter(session__workspace=workspace, created_at__gte=start, created_at__lt=end)
        return _grouped_hours(calls, "created_at", "tool")

    hours = settled_hours(
        "tool-calls", workspace, grouped, within["created_at__gte"], within["created_at__lt"], now=now
    )
    return starts, _per_bucket(period, hours)


def _finished_turn_hours(workspace, period, now):
    """Agent seconds and cost of the turns that finished, per bucket (one cache for both charts)."""
    starts, within, _bucket = _bucketed(period, now, "finished_at")

    def grouped(start, end):
        turns = Turn.objects.filter(session__workspace=workspace, finished_at__gte=start, finished_at__lt=end)
        return _grouped_hours(turns, "finished_at", "", seconds=Sum("agent_seconds"), usd=Sum("cost_usd"))

    first, end = within["finished_at__gte"], within["finished_at__lt"]
    return starts, _per_bucket(period, settled_hours("turns-finished", workspace, grouped, first, end, now=now))


def tool_calls_by_tool(workspace, period: Period, *, now=None):
    """Tool calls per hour (24 h) or per day, one series per tool, the busiest first."""
    starts, counts = _tool_call_hours(workspace, period, now)
    totals = {tool: sum(values.values()) for tool, values in counts.items()}
    ranked = sorted(totals, key=lambda tool: (-totals[tool], tool))
    shown, rest = ranked[:MAX_TOOLS], ranked[MAX_TOOLS:]
    series = [(tool, _series(starts, period, counts[tool], scale=int)) for tool in shown]
    if rest:
        other: dict = defaultdict(int)
        for tool in rest:
            for start, n in counts[tool].items():
                other[start] += n
        series.append(("other", _series(starts, period, other, scale=int)))
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


def _latency_percentiles(decided, bucket) -> dict[datetime, dict[str, float]]:
    """{bucket: {"p50": s, "p90": s}}: percentile_cont on PostgreSQL; computed here elsewhere."""
    found: dict[datetime, dict[str, float]] = {}
    if connection.vendor == "postgresql":
        waited = _EpochSeconds(F("decided_at") - F("requested_at"))
        rows = (
            decided.annotate(bucket=bucket)
            .values("bucket")
            .annotate(p50=_PercentileCont(waited, fraction=0.5), p90=_PercentileCont(waited, fraction=0.9))
            .order_by()
        )
        for row in rows:
            found[_as_key(row["bucket"])] = {"p50": row["p50"], "p90": row["p90"]}
        return found
    waits: dict = defaultdict(list)
    for row in decided.annotate(bucket=bucket).values("bucket", "requested_at", "decided_at").order_by():
        waits[_as_key(row["bucket"])].append((row["decided_at"] - row["requested_at"]).total_seconds())
    return {key: {"p50": _percentile(v, 0.5), "p90": _percentile(v, 0.9)} for key, v in waits.items()}


def approval_latency(workspace, period: Period, *, now=None):
    """p50 and p90 of the time from an approval's request to a person's decision, per bucket, in
    seconds (expired ones are no decision; the system's are not a person's)."""
    starts, within, bucket = _bucketed(period, now, "decided_at")

    def grouped(start, end):
        decided = PendingApproval.objects.filter(
            session__workspace=workspace, decided_by__isnull=False, decided_at__gte=start, decided_at__lt=end
        ).exclude(status=PendingApproval.Status.EXPIRED)
        return _latency_percentiles(decided, bucket)

    step = HOUR if period.bucket == "hour" else DAY
    first, end = within["decided_at__gte"], within["decided_at__lt"]
    found = settled_hours("approval-latency", workspace, grouped, first, end, now=now, step=step)
    # No decision in a bucket is a gap, not a latency of zero.
    return [(name, [(bucket_label(s, period), found.get(s, {}).get(name)) for s in starts]) for name in ("p50", "p90")]


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
    starts, sums = _finished_turn_hours(workspace, period, now)
    return [("agent minutes", _series(starts, period, sums["seconds"], scale=lambda v: round(v / 60, 1)))]


def spend(workspace, period: Period, *, now=None):
    """What finished turns cost (as their providers reported it), by hour or day, in USD."""
    starts, sums = _finished_turn_hours(workspace, period, now)
    usd = {start: v for start, v in sums["usd"].items() if v}
    return [("spend", _series(starts, period, usd, scale=lambda v: round(float(v), 4)))]


def turns_per_agent(workspace, period: Period, *, now=None):
    """Turns started in the period, per agent (sessions without one: "no agent"), busiest first."""
    _starts, within, _bucket = _bucketed(period, now, "created_at")

    def grouped(start, end):
        turns = Turn.objects.filter(session__workspace=workspace, created_at__gte=start, created_at__lt=end)
        return _grouped_hours(turns, "created_at", "session__agent__name")

    hours = settled_hours(
        "turns-agent", workspace, grouped, within["created_at__gte"], within["created_at__lt"], now=now
    )
    totals: dict[str, int] = defaultdict(int)
    for values in hours.values():
        for agent, n in values.items():
            totals[agent] += n
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return [("turns", [(agent or "no agent", n) for agent, n in ranked])]
