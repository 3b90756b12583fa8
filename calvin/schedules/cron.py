"""When a recurrence fires: five-field cron read as wall-clock time in a time zone (pure functions).

Each wall-clock time a cron names fires once. A time that a DST change skips (02:30 on the
night clocks go from 02:00 to 03:00) fires at the first instant after the gap, as Vixie cron
runs such jobs at once after the change; a time that happens twice (01:30 when clocks go
back) fires at its first occurrence only.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from croniter.croniter import CroniterBadCronError, CroniterBadDateError, CroniterError

MAX_LENGTH = 100
SAMPLED_FIRINGS = 500  # how far ahead the minimum interval is checked


class CronRefused(ValueError):
    pass


def cron_check(expression: str, *, min_interval_seconds: int, zone: ZoneInfo, now: datetime) -> str:
    """The expression, normalised, or CronRefused saying why it cannot be a task's recurrence."""
    text = " ".join(str(expression).split())
    if not text or len(text) > MAX_LENGTH or "\x00" in text:
        raise CronRefused(f"recurrence: a cron expression of 5 fields, at most {MAX_LENGTH} characters")
    if len(text.split(" ")) != 5:
        raise CronRefused("recurrence: exactly 5 fields (minute hour day-of-month month day-of-week); no seconds field")
    try:
        croniter(text)
    except (CroniterBadCronError, CroniterError, ValueError, KeyError) as exc:
        raise CronRefused(f"recurrence: not a cron expression ({str(exc)[:120]})") from None
    times = []
    at = now
    for _ in range(SAMPLED_FIRINGS):
        try:
            at = next_after(text, zone, at)
        except CronRefused:
            break
        times.append(at)
    if not times:
        raise CronRefused(f"recurrence: {text!r} never fires")
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    if gaps and min(gaps) < min_interval_seconds:
        raise CronRefused(
            f"recurrence: {text!r} fires {int(min(gaps))} s apart; at most one run every {min_interval_seconds} s"
        )
    return text


def _instant(naive: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a wall-clock time: its first occurrence, or the end of the gap it falls in."""
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == naive:
        return first
    # In a gap: walk from just before it (fold=1 reads the time with the earlier offset) to the
    # first minute whose wall clock is past the skipped time.
    at = naive.replace(tzinfo=zone, fold=1).astimezone(UTC).replace(second=0, microsecond=0)
    for _ in range(24 * 60):
        if at.astimezone(zone).replace(tzinfo=None) >= naive:
            return at
        at += timedelta(minutes=1)
    return first


def next_after(expression: str, zone: ZoneInfo, after: datetime) -> datetime:
    """The first firing strictly after `after` (an aware datetime), in UTC."""
    local = after.astimezone(zone).replace(tzinfo=None) - timedelta(hours=3)  # before any fold it sits in
    walker = croniter(expression, local)
    for _ in range(100_000):
        try:
            candidate = _instant(walker.get_next(datetime), zone)
        except CroniterBadDateError:
            break
        if candidate > after:
            return candidate
    raise CronRefused(f"recurrence: {expression!r} never fires")


def firings_between(expression: str, zone: ZoneInfo, start: datetime, end: datetime, *, newest: int) -> list[datetime]:
    """The last `newest` firings in [start, end], oldest first (a downtime's missed runs)."""
    local = end.astimezone(zone).replace(tzinfo=None) + timedelta(hours=3)
    walker = croniter(expression, local)
    found: list[datetime] = []
    for _ in range(100_000):
        try:
            candidate = _instant(walker.get_prev(datetime), zone)
        except CroniterBadDateError:
            break
        if candidate < start:
            break
        if candidate <= end and candidate not in found:
            found.append(candidate)
            if len(found) == newest:
                break
    return sorted(found)
